"""sensor_msgs images → arrays: encodings, row padding, views without copies, clear errors."""

from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image

from sequence_ai_ros.inputs import image_conversion
from sequence_ai_ros.inputs.image_conversion import (
    ImageConversionError,
    compressed_to_array,
    image_to_array,
    to_array,
)


def _pattern(height: int, width: int) -> np.ndarray:
    """An RGB picture where every pixel differs, so any mix-up of rows or channels shows."""
    rows = np.arange(height, dtype=np.uint8)[:, None, None]
    cols = np.arange(width, dtype=np.uint8)[None, :, None]
    channel = np.array([0, 85, 170], dtype=np.uint8)[None, None, :]
    return (rows * 7 + cols * 3 + channel).astype(np.uint8)


def _image(pixels: np.ndarray, encoding: str, padding: int = 0, bigendian: int = 0) -> Image:
    height, width = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    step = width * channels + padding
    buffer = np.full((height, step), 0xEE, dtype=np.uint8)
    buffer[:, : width * channels] = pixels.reshape(height, width * channels)
    msg = Image(height=height, width=width, encoding=encoding, step=step, is_bigendian=bigendian)
    msg.data = buffer.tobytes()
    return msg


@pytest.mark.parametrize("padding", [0, 5])
@pytest.mark.parametrize("bigendian", [0, 1])
def test_rgb8_round_trips_with_row_padding(padding: int, bigendian: int) -> None:
    rgb = _pattern(6, 9)
    out = image_to_array(_image(rgb, "rgb8", padding, bigendian))
    np.testing.assert_array_equal(out, rgb)


def test_bgr8_is_returned_as_rgb() -> None:
    rgb = _pattern(4, 5)
    out = image_to_array(_image(rgb[:, :, ::-1].copy(), "bgr8", padding=3))
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize("encoding", ["rgba8", "bgra8"])
def test_alpha_is_dropped(encoding: str) -> None:
    rgb = _pattern(3, 4)
    alpha = np.full((3, 4, 1), 200, dtype=np.uint8)
    ordered = rgb if encoding == "rgba8" else rgb[:, :, ::-1]
    out = image_to_array(_image(np.concatenate([ordered, alpha], axis=2), encoding, padding=2))
    np.testing.assert_array_equal(out, rgb)


def test_mono8_gives_a_grey_plane() -> None:
    grey = _pattern(5, 7)[:, :, 0].copy()
    out = image_to_array(_image(grey, "mono8", padding=1))
    assert out.shape == (5, 7)
    np.testing.assert_array_equal(out, grey)


def test_raw_conversion_does_not_copy_the_pixels() -> None:
    msg = _image(_pattern(4, 4), "rgb8", padding=4)
    out = image_to_array(msg)
    assert np.shares_memory(out, np.frombuffer(msg.data, dtype=np.uint8))


@pytest.mark.parametrize("encoding", ["16UC1", "yuv422", "bayer_rggb8", "32FC1"])
def test_unsupported_encoding_is_named(encoding: str) -> None:
    msg = Image(height=2, width=2, encoding=encoding, step=8)
    msg.data = bytes(16)
    with pytest.raises(ImageConversionError, match=encoding):
        image_to_array(msg)


def test_step_smaller_than_a_row_is_refused() -> None:
    msg = Image(height=2, width=4, encoding="rgb8", step=10)
    msg.data = bytes(24)
    with pytest.raises(ImageConversionError, match="step 10"):
        image_to_array(msg)


def test_short_data_is_refused() -> None:
    msg = Image(height=4, width=4, encoding="rgb8", step=12)
    msg.data = bytes(40)
    with pytest.raises(ImageConversionError, match="40 bytes"):
        image_to_array(msg)


def test_empty_image_is_refused() -> None:
    msg = Image(height=0, width=4, encoding="rgb8", step=12)
    with pytest.raises(ImageConversionError, match="0"):
        image_to_array(msg)


@pytest.mark.parametrize("fmt,pil_format", [("rgb8; jpeg compressed bgr8", "JPEG"), ("png", "PNG")])
def test_compressed_image_decodes(fmt: str, pil_format: str) -> None:
    pil = pytest.importorskip("PIL.Image")
    rgb = np.zeros((24, 32, 3), dtype=np.uint8)
    rgb[:, :16] = (250, 10, 10)
    rgb[:, 16:] = (10, 10, 250)
    encoded = io.BytesIO()
    pil.fromarray(rgb).save(encoded, format=pil_format, quality=95)
    msg = CompressedImage(format=fmt)
    msg.data = encoded.getvalue()
    out = compressed_to_array(msg)
    assert out.shape == (24, 32, 3)
    assert out[12, 4, 0] > 200 and out[12, 4, 2] < 60
    assert out[12, 28, 2] > 200 and out[12, 28, 0] < 60


def test_compressed_unknown_format_is_refused() -> None:
    msg = CompressedImage(format="h264")
    msg.data = b"\x00\x01"
    with pytest.raises(ImageConversionError, match="h264"):
        compressed_to_array(msg)


def test_corrupt_jpeg_is_refused() -> None:
    msg = CompressedImage(format="jpeg")
    msg.data = b"not a jpeg at all"
    with pytest.raises(ImageConversionError, match="could not be decoded"):
        compressed_to_array(msg)


# ----- the numpy path against cv_bridge (vision_opencv, humble: cv_bridge/python/core.py) -----

# cv_bridge's cvtColor2(image, msg encoding, desired encoding) for the pairs the node asks for,
# as OpenCV's colour codes define them (BGR2RGB, RGBA2RGB, BGRA2RGB; same encoding = copy).
_CV_BRIDGE_CONVERSIONS = {
    ("rgb8", "rgb8"): lambda a: a,
    ("bgr8", "rgb8"): lambda a: a[:, :, ::-1],
    ("rgba8", "rgb8"): lambda a: a[:, :, :3],
    ("bgra8", "rgb8"): lambda a: a[:, :, 2::-1],
    ("mono8", "mono8"): lambda a: a,
}
_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}


def _cv_bridge_imgmsg_to_cv2(msg: Image, desired: str) -> np.ndarray:
    """What cv_bridge's imgmsg_to_cv2 documents and does for 8-bit encodings: view the buffer
    as rows of step bytes, crop each row to width pixels, then cvtColor2 to `desired`."""
    channels = _CHANNELS[msg.encoding]
    buffer = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if channels == 1:
        image = buffer.reshape(msg.height, msg.step)[:, : msg.width]
    else:
        image = buffer.reshape(msg.height, msg.step // channels, channels)[:, : msg.width, :]
    return np.ascontiguousarray(_CV_BRIDGE_CONVERSIONS[(msg.encoding, desired)](image))


def _random_pixels(rng: np.random.Generator, height: int, width: int, channels: int) -> np.ndarray:
    shape = (height, width) if channels == 1 else (height, width, channels)
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


@pytest.mark.parametrize("encoding", sorted(_CHANNELS))
@pytest.mark.parametrize("padding_pixels", [0, 3])
def test_the_numpy_path_gives_cv_bridges_array_for_every_encoding(
    encoding: str, padding_pixels: int
) -> None:
    rng = np.random.default_rng(len(encoding) * 31 + padding_pixels)
    channels = _CHANNELS[encoding]
    msg = _image(_random_pixels(rng, 37, 53, channels), encoding, padding_pixels * channels)
    desired = "mono8" if channels == 1 else "rgb8"
    np.testing.assert_array_equal(image_to_array(msg), _cv_bridge_imgmsg_to_cv2(msg, desired))


def test_a_depth_image_is_refused_on_either_path() -> None:
    msg = Image(height=2, width=2, encoding="16UC1", step=4, data=bytes(8))
    with pytest.raises(ImageConversionError, match="16UC1.*not supported"):
        image_to_array(msg)
    with pytest.raises(ImageConversionError, match="16UC1.*not supported"):
        to_array(msg)


def test_png_decodes_to_the_exact_pixels() -> None:
    from PIL import Image as PILImage

    rgb = _random_pixels(np.random.default_rng(7), 24, 40, 3)
    encoded = io.BytesIO()
    PILImage.fromarray(rgb).save(encoded, format="PNG")
    msg = CompressedImage(format="png", data=encoded.getvalue())
    np.testing.assert_array_equal(to_array(msg), rgb)


def test_the_path_in_use_is_reported() -> None:
    expected = "numpy" if importlib.util.find_spec("cv_bridge") is None else "cv_bridge"
    assert image_conversion.CONVERTER == expected


@pytest.mark.skipif(
    importlib.util.find_spec("cv_bridge") is None,
    reason="cv_bridge is not importable here (PyPI ROS); it runs where ROS is installed",
)
@pytest.mark.parametrize("encoding", sorted(_CHANNELS))
def test_cv_bridge_and_numpy_paths_agree(encoding: str) -> None:
    from PIL import Image as PILImage

    rng = np.random.default_rng(3)
    channels = _CHANNELS[encoding]
    msg = _image(_random_pixels(rng, 37, 53, channels), encoding, 2 * channels)
    converter = image_conversion._BridgeConverter()
    np.testing.assert_array_equal(converter.image(msg), image_to_array(msg))
    for fmt in ("PNG", "JPEG"):
        encoded = io.BytesIO()
        PILImage.fromarray(_random_pixels(rng, 24, 40, 3)).save(encoded, format=fmt)
        compressed = CompressedImage(format=fmt.lower(), data=encoded.getvalue())
        np.testing.assert_array_equal(
            converter.compressed(compressed), compressed_to_array(compressed)
        )
