"""Camera messages to RGB (or grey) numpy arrays: with cv_bridge where it imports (a ROS
install), else with the node's own numpy/Pillow conversion (PyPI ROS has no cv_bridge).

Both paths check the header first and return the same array for every supported encoding:
the numpy path follows cv_bridge's conversions (test/node/inputs/test_image_conversion.py).
"""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

try:
    from cv_bridge import CvBridge, CvBridgeError
except ImportError:  # pragma: no cover - depends on the install
    CvBridge = None

# Channels per pixel and whether the colour order must be flipped to reach RGB.
_RAW_LAYOUTS: dict[str, tuple[int, bool]] = {
    "rgb8": (3, False),
    "bgr8": (3, True),
    "rgba8": (4, False),
    "bgra8": (4, True),
    "mono8": (1, False),
}

SUPPORTED_ENCODINGS = tuple(_RAW_LAYOUTS)
# The ceiling of max_frame_pixels: 4096x4096, past any robot camera's stream (4K UHD is 8.3
# megapixels); its RGB array is 50 MB where an 84-megapixel PNG of 245 kB needed 1.7 GB.
MAX_FRAME_PIXELS = 4096 * 4096
# What converts images in this process: "cv_bridge" or "numpy".
CONVERTER = "numpy" if CvBridge is None else "cv_bridge"


class ImageConversionError(ValueError):
    """A camera message that cannot be turned into an RGB or grey image."""


def _byte_view(data: Any) -> np.ndarray:
    """A uint8 view of a message's data field without copying when it supports the buffer API."""
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except TypeError:
        # Some message builders hand a plain list of ints; that needs one copy.
        return np.asarray(data, dtype=np.uint8)


def _checked_layout(msg: Image) -> tuple[str, int, bool, np.ndarray]:
    """(encoding, channels, flip to RGB, the data as bytes) of a well-formed Image."""
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
    return encoding, channels, flip, flat


def image_to_array(msg: Image) -> np.ndarray:
    """`sensor_msgs/Image` → (H, W, 3) RGB or (H, W) grey uint8 array, the numpy path.

    The result is a strided view on the message's buffer wherever possible: row padding is
    skipped through strides, BGR is reversed through a negative stride and alpha is sliced off.
    """
    _, channels, flip, flat = _checked_layout(msg)
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if channels == 1:
        return np.lib.stride_tricks.as_strided(
            flat, shape=(height, width), strides=(step, 1), writeable=False
        )
    pixels = np.lib.stride_tricks.as_strided(
        flat, shape=(height, width, channels), strides=(step, channels, 1), writeable=False
    )
    rgb = pixels[:, :, :3]
    return rgb[:, :, ::-1] if flip else rgb


def _check_format(msg: CompressedImage) -> None:
    fmt = msg.format.lower()
    if "jpeg" not in fmt and "jpg" not in fmt and "png" not in fmt:
        raise ImageConversionError(
            f"CompressedImage format {msg.format!r} is not supported; expected JPEG or PNG "
            "(image_transport 'compressed')"
        )
    if len(msg.data) == 0:
        raise ImageConversionError("CompressedImage data is empty")


def _pillow() -> ModuleType:
    try:
        from PIL import Image as PILImage
    except ImportError as exc:  # pragma: no cover - Pillow is a declared dependency
        raise ImageConversionError(
            "decoding CompressedImage needs Pillow (pip install pillow)"
        ) from exc
    return PILImage


def _check_pixels(msg: CompressedImage, max_pixels: int) -> None:
    """Refuse, from its header alone, a frame larger than the cameras deliver: a few hundred
    kB of PNG can decode to gigabytes."""
    pil = _pillow()
    try:
        with pil.open(io.BytesIO(memoryview(_byte_view(msg.data)))) as header:
            width, height = header.size
    except (OSError, ValueError, pil.DecompressionBombError) as exc:
        raise ImageConversionError(
            f"CompressedImage ({msg.format!r}, {len(msg.data)} bytes) could not be decoded: {exc}"
        ) from exc
    if width * height > max_pixels:
        raise ImageConversionError(
            f"CompressedImage ({msg.format!r}, {len(msg.data)} bytes) is {width}x{height} "
            f"({width * height} pixels); expected at most {max_pixels} pixels "
            "(max_frame_pixels: the largest frame the cameras are configured to deliver)"
        )


def compressed_to_array(
    msg: CompressedImage, max_pixels: int = MAX_FRAME_PIXELS
) -> np.ndarray:
    """`sensor_msgs/CompressedImage` (JPEG or PNG) → (H, W, 3) RGB uint8 array, the numpy path
    (decoded by Pillow); a frame of more than `max_pixels` is refused undecoded."""
    _check_format(msg)
    _check_pixels(msg, max_pixels)
    pil = _pillow()
    raw = _byte_view(msg.data)
    try:
        with pil.open(io.BytesIO(memoryview(raw))) as decoded:
            return np.asarray(decoded.convert("RGB"))
    except (OSError, ValueError, pil.DecompressionBombError) as exc:
        raise ImageConversionError(
            f"CompressedImage ({msg.format!r}, {raw.size} bytes) could not be decoded: {exc}"
        ) from exc


class _BridgeConverter:
    """cv_bridge's conversions, after the same header checks as the numpy path."""

    def __init__(self) -> None:
        assert CvBridge is not None
        self._bridge = CvBridge()

    def image(self, msg: Image) -> np.ndarray:
        encoding, channels, _, _ = _checked_layout(msg)
        try:
            return self._bridge.imgmsg_to_cv2(msg, "mono8" if channels == 1 else "rgb8")
        except CvBridgeError as exc:
            raise ImageConversionError(f"Image ({encoding}): cv_bridge: {exc}") from exc

    def compressed(
        self, msg: CompressedImage, max_pixels: int = MAX_FRAME_PIXELS
    ) -> np.ndarray:
        _check_format(msg)
        _check_pixels(msg, max_pixels)
        # Decoded as stored (BGR, or one plane for a grey picture), then put in RGB order like
        # Pillow's convert("RGB"): cv_bridge's own "rgb8" refuses grey pictures.
        try:
            decoded = self._bridge.compressed_imgmsg_to_cv2(msg, "passthrough")
        except (CvBridgeError, RuntimeError, TypeError, ValueError) as exc:
            decoded, detail = None, f": cv_bridge: {exc}"
        else:
            detail = ""
        if decoded is None or decoded.ndim not in (2, 3):
            raise ImageConversionError(
                f"CompressedImage ({msg.format!r}, {len(msg.data)} bytes) could not be "
                f"decoded{detail}"
            )
        if decoded.ndim == 2:
            return np.repeat(decoded[:, :, None], 3, axis=2)
        return decoded[:, :, 2::-1]


_bridge = _BridgeConverter() if CvBridge is not None else None


def to_array(msg: Image | CompressedImage, max_pixels: int = MAX_FRAME_PIXELS) -> np.ndarray:
    """Either camera message type → array, through `CONVERTER`; a compressed frame of more than
    `max_pixels` is refused before it is decoded."""
    if isinstance(msg, CompressedImage):
        if _bridge:
            return _bridge.compressed(msg, max_pixels)
        return compressed_to_array(msg, max_pixels)
    return _bridge.image(msg) if _bridge else image_to_array(msg)
