"""The worker's msgpack bodies (``application/x-seq-msgpack``) through the ``msgpack`` package.

Bytes stay bytes; a numpy array travels as msgpack-numpy's map (``nd``, ``type``, ``shape``,
``data``), which the platform's workers read and write. Reading back without numpy gives the
nested lists ``tolist()`` would: the client does not require numpy. Extension types and arrays
of objects are refused, so decoding never runs code the sender chose.
"""

from __future__ import annotations

import struct
import sys
from types import ModuleType
from typing import Dict, List, Optional, Tuple, cast

import msgpack

__all__ = ["MEDIA_TYPE", "FORMAT", "CodecError", "pack", "unpack"]

MEDIA_TYPE = "application/x-seq-msgpack"
# What a worker lists in its formats header when it reads msgpack act and observe bodies.
FORMAT = "x-seq-msgpack/1"

# numpy's kind letter and item size -> struct's code, for reading arrays without numpy.
_STRUCT_CODES: Dict[Tuple[str, int], str] = {
    ("b", 1): "?", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
    ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
    ("f", 2): "e", ("f", 4): "f", ("f", 8): "d",
}

class CodecError(ValueError):
    """A value msgpack cannot carry, or a body that is not one msgpack value this client reads."""


def pack(value: object) -> bytes:
    """``value`` as msgpack: JSON values, bytes, tuples (as lists) and numpy arrays and scalars."""
    try:
        return cast(bytes, msgpack.packb(value, default=_array_map, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as exc:
        raise CodecError(f"cannot send as msgpack: {exc}") from None


def unpack(data: bytes) -> object:
    """The one value ``data`` holds; arrays back as numpy arrays, or as lists without numpy."""
    try:
        return cast(object, msgpack.unpackb(
            data, raw=False, strict_map_key=False, object_hook=_from_map, ext_hook=_refuse_ext
        ))
    except CodecError:
        raise
    except (ValueError, TypeError) as exc:
        raise CodecError(f"not one msgpack value: {exc}") from None


def _array_map(obj: object) -> Dict[bytes, object]:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, (np.ndarray, np.generic)):
        dtype = obj.dtype
        if dtype.hasobject or dtype.kind in ("O", "V"):
            raise CodecError(f"a numpy array of dtype {dtype} is not sent (numeric, bool, str are)")
        if isinstance(obj, np.ndarray):
            return {b"nd": True, b"type": dtype.str, b"kind": b"", b"shape": list(obj.shape),
                    b"data": np.ascontiguousarray(obj).tobytes()}
        return {b"nd": False, b"type": dtype.str, b"data": np.asarray(obj).tobytes()}
    raise CodecError(f"{type(obj).__name__} cannot be sent (JSON values, bytes, numpy arrays can)")


def _refuse_ext(code: int, data: bytes) -> object:
    raise CodecError(f"a msgpack extension type ({code}) is not read")


def _from_map(obj: Dict[object, object]) -> object:
    """An array's map (msgpack-numpy's ``nd``, openpi's ``__ndarray__``) as an array, else obj."""
    if b"nd" in obj and b"type" in obj and b"data" in obj:
        return _array(obj.get(b"type"), obj.get(b"shape", []) if obj[b"nd"] else [], obj[b"data"])
    if b"__ndarray__" in obj:
        return _array(obj.get(b"dtype"), obj.get(b"shape"), obj.get(b"data"))
    return obj


def _array(descr: object, shape: object, data: object) -> object:
    if isinstance(descr, bytes):
        descr = descr.decode("ascii", errors="replace")
    if not isinstance(descr, str):
        raise CodecError(f"an array's dtype is {descr!r}; expected a type string such as '<f4'")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise CodecError(f"an array's shape is {shape!r}; expected a list of non-negative ints")
    if not isinstance(data, bytes):
        raise CodecError(f"an array's data is {type(data).__name__}; expected bytes")
    count = 1
    for d in shape:
        count *= d
    np = _numpy()
    if np is not None:
        try:
            dtype = np.dtype(descr)
        except TypeError:
            raise CodecError(f"an array's dtype is {descr!r}, which is not a numpy dtype") from None
        if dtype.hasobject or dtype.kind in ("O", "V"):
            raise CodecError(f"an array of dtype {descr} is not read (only numeric, bool, str)")
        if len(data) != count * dtype.itemsize:
            raise CodecError(f"an array of shape {shape} and dtype {descr} has {len(data)} bytes; "
                             f"expected {count * dtype.itemsize}")
        return np.frombuffer(data, dtype=dtype, count=count).reshape(shape)
    return _nested(_plain_items(descr, data, count), shape)


def _numpy() -> Optional[ModuleType]:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _plain_items(descr: str, data: bytes, count: int) -> List[object]:
    order = "<" if descr[:1] in ("<", "|", "=", "") or descr[:1].isalpha() else ">"
    body = descr.lstrip("<>|=")
    kind, size_text = body[:1], body[1:]
    size = int(size_text) if size_text.isdigit() else -1
    code = _STRUCT_CODES.get((kind, size))
    if code is None:
        raise CodecError(f"an array of dtype {descr} needs numpy to be read; install numpy")
    if len(data) != count * size:
        raise CodecError(f"an array of {count} items of dtype {descr} has {len(data)} bytes; "
                         f"expected {count * size}")
    return list(struct.unpack(f"{order}{count}{code}", data))


def _nested(flat: List[object], shape: List[int]) -> object:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nested(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
