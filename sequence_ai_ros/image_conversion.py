"""Camera messages to numpy arrays: a small replacement for cv_bridge, which is not on PyPI."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

# Channels per pixel and whether the colour order must be flipped to reach RGB.
_RAW_LAYOUTS: dict[str, tuple[int, bool]] = {
    "rgb8": (3, False),
    "bgr8": (3, True),
    "rgba8": (4, False),
    "bgra8": (4, True),
    "mono8": (1, False),
}

SUPPORTED_ENCODINGS = tuple(_RAW_LAYOUTS)


class ImageConversionError(ValueError):
    """A camera message that cannot be turned into an RGB or grey image."""


def _byte_view(data: Any) -> np.ndarray:
    """A uint8 view of a message's data field without copying when it supports the buffer API."""
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except TypeError:
        # Some message builders hand a plain list of ints; that needs one copy.
        return np.asarray(data, dtype=np.uint8)


def image_to_array(msg: Image) -> np.ndarray:
    """`sensor_msgs/Image` → (H, W, 3) RGB or (H, W) grey uint8 array.

    The result is a strided view on the message's buffer wherever possible: row padding is
    skipped through strides, BGR is reversed through a negative stride and alpha is sliced off.
    """
    encoding = msg.encoding.lower()
    if encoding not in _RAW_LAYOUTS:
        raise ImageConversionError(
            f"Image encoding {msg.encoding!r} is not supported; expected one of "
            f"{', '.join(SUPPORTED_ENCODINGS)}"
        )
    channels, flip = _RAW_LAYOUTS[encoding]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise ImageConversionError(
            f"Image size {width}x{height} is empty; expected a positive width and height"
        )
    row_bytes = width * channels
    if step < row_bytes:
        raise ImageConversionError(
            f"Image step {step} is smaller than width {width} × {channels} bytes per pixel "
            f"({row_bytes}) for encoding {encoding}"
        )
    if msg.is_bigendian not in (0, 1, True, False):
        raise ImageConversionError(f"Image is_bigendian {msg.is_bigendian!r}; expected 0 or 1")
    # Every supported encoding has one byte per channel, so is_bigendian cannot change how the
    # bytes read; it is still checked above so a corrupt header is reported.
    flat = _byte_view(msg.data)
    needed = step * (height - 1) + row_bytes
    if flat.size < needed:
        raise ImageConversionError(
            f"Image data has {flat.size} bytes; {width}x{height} {encoding} with step {step} "
            f"needs at least {needed}"
        )
    if channels == 1:
        return np.lib.stride_tricks.as_strided(
            flat, shape=(height, width), strides=(step, 1), writeable=False
        )
    pixels = np.lib.stride_tricks.as_strided(
        flat, shape=(height, width, channels), strides=(step, channels, 1), writeable=False
    )
    rgb = pixels[:, :, :3]
    return rgb[:, :, ::-1] if flip else rgb


def compressed_to_array(msg: CompressedImage) -> np.ndarray:
    """`sensor_msgs/CompressedImage` (JPEG or PNG) → (H, W, 3) RGB uint8 array."""
    fmt = msg.format.lower()
    if "jpeg" not in fmt and "jpg" not in fmt and "png" not in fmt:
        raise ImageConversionError(
            f"CompressedImage format {msg.format!r} is not supported; expected JPEG or PNG "
            "(image_transport 'compressed')"
        )
    try:
        from PIL import Image as PILImage
    except ImportError as exc:  # pragma: no cover - Pillow is a declared dependency
        raise ImageConversionError(
            "decoding CompressedImage needs Pillow (pip install pillow)"
        ) from exc
    raw = _byte_view(msg.data)
    if raw.size == 0:
        raise ImageConversionError("CompressedImage data is empty")
    try:
        with PILImage.open(io.BytesIO(memoryview(raw))) as decoded:
            return np.asarray(decoded.convert("RGB"))
    except (OSError, ValueError) as exc:
        raise ImageConversionError(
            f"CompressedImage ({msg.format!r}, {raw.size} bytes) could not be decoded: {exc}"
        ) from exc


def to_array(msg: Image | CompressedImage) -> np.ndarray:
    """Either camera message type → array."""
    if isinstance(msg, CompressedImage):
        return compressed_to_array(msg)
    return image_to_array(msg)
