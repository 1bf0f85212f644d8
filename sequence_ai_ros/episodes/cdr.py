"""The exact length of a message's CDR serialisation. rclpy's serialiser (seen with the Jazzy
wheels) may return a buffer a few bytes longer than the message; strict readers such as
`rosbags` refuse the trailing bytes, so the recorder stores exactly the message."""

from __future__ import annotations

import re

ENCAPSULATION = 4
_SIZES = {
    "boolean": 1, "octet": 1, "char": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8,
}
_SEQUENCE = re.compile(r"^sequence<(.+?)(?:, \d+)?>$")
_ARRAY = re.compile(r"^(.+)\[(\d+)\]$")


def _align(offset: int, size: int) -> int:
    return (offset + size - 1) // size * size


def _value_end(kind: str, value: object, offset: int) -> int:
    """The offset after `value` of rosidl type `kind`, starting at `offset`."""
    size = _SIZES.get(kind)
    if size is not None:
        return _align(offset, size) + size
    if kind.startswith("string") or kind.startswith("wstring"):
        text = str(value).encode("utf-8") if kind.startswith("string") else str(value)
        width = 1 if kind.startswith("string") else 4
        return _align(offset, 4) + 4 + (len(text) + 1) * width
    sequence = _SEQUENCE.match(kind)
    array = _ARRAY.match(kind)
    if sequence or array:
        element = (sequence or array).group(1)  # type: ignore[union-attr]
        count = len(value)  # type: ignore[arg-type]
        if sequence:
            offset = _align(offset, 4) + 4
        element_size = _SIZES.get(element)
        if element_size is not None:
            # Primitive elements: one alignment, then packed.
            return _align(offset, element_size) + element_size * count if count else offset
        for item in value:  # type: ignore[attr-defined]
            offset = _value_end(element, item, offset)
        return offset
    return message_end(value, offset)


def message_end(message: object, offset: int = 0) -> int:
    """The offset after a ROS message's fields, starting at `offset` (0 after the
    encapsulation header)."""
    fields = message.get_fields_and_field_types()  # type: ignore[attr-defined]
    for name, kind in fields.items():
        offset = _value_end(kind, getattr(message, name), offset)
    return offset


def cdr_length(message: object) -> int:
    """Bytes of the message's CDR serialisation, encapsulation header included."""
    return ENCAPSULATION + message_end(message)
