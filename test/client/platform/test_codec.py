"""The worker's msgpack bodies: bytes and arrays kept, the wheel's array layout, refusals."""

from __future__ import annotations

import struct
import sys

import msgpack
import pytest

from sequence_ai._platform import codec


def test_plain_values_and_bytes_round_trip() -> None:
    value = {"instruction": "pick", "image": b"\xff\xd8jpeg", "n": [1, -2, 3.5, None, True]}
    assert codec.unpack(codec.pack(value)) == value


def test_tuple_is_sent_as_list() -> None:
    assert codec.unpack(codec.pack({"q": (1, 2)})) == {"q": [1, 2]}


def test_array_map_layout_is_msgpack_numpys() -> None:
    np = pytest.importorskip("numpy")
    raw = msgpack.unpackb(codec.pack(np.zeros((2, 3), np.float32)), raw=False)
    assert raw[b"nd"] is True and raw[b"type"] == "<f4" and raw[b"shape"] == [2, 3]
    assert raw[b"data"] == bytes(24)


def test_array_round_trip_keeps_dtype_and_shape() -> None:
    np = pytest.importorskip("numpy")
    actions = np.arange(120, dtype=np.float32).reshape(15, 8)
    back = codec.unpack(codec.pack({"actions": actions}))
    assert isinstance(back, dict)
    assert back["actions"].dtype == np.float32 and back["actions"].shape == (15, 8)
    assert (back["actions"] == actions).all()


def test_array_without_numpy_reads_as_nested_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    body = msgpack.packb({"a": {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2, 2],
                                b"data": struct.pack("<4f", 1, 2, 3, 4)}}, use_bin_type=True)
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy then raises ImportError
    assert codec.unpack(body) == {"a": [[1.0, 2.0], [3.0, 4.0]]}


def test_openpi_layout_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    body = msgpack.packb({b"__ndarray__": True, b"dtype": "<i2", b"shape": [3],
                          b"data": struct.pack("<3h", -1, 0, 7)}, use_bin_type=True)
    monkeypatch.setitem(sys.modules, "numpy", None)
    assert codec.unpack(body) == [-1, 0, 7]


@pytest.mark.parametrize("bad", [
    msgpack.packb(msgpack.ExtType(5, b"x")),
    msgpack.packb({b"nd": True, b"type": "|O", b"shape": [1], b"data": b"12345678"}),
    msgpack.packb({b"nd": True, b"type": "<f4", b"shape": [3], b"data": b"1234"}),
    msgpack.packb(1) + b"\x01",
    b"\xc1",
])
def test_refused_bodies(bad: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.unpack(bad)


def test_object_value_is_refused_naming_its_type() -> None:
    with pytest.raises(codec.CodecError, match="object"):
        codec.pack({"x": object()})
