"""`ros2msg` schemas for MCAP channels: a message's definition followed by every definition it
uses, the text rosbag2 stores, read from the interface files the ament index lists."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from ament_index_python.packages import get_package_share_directory

_SEPARATOR = "=" * 80
_PRIMITIVES = frozenset({
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "string", "wstring",
})
# A field's type: a name, an optional bound on a string, an optional array suffix.
_FIELD_TYPE = re.compile(r"^([A-Za-z0-9_/]+?)(?:<=\d+)?(?:\[[^\]]*\])?$")
_ACTION_PARTS = {"Goal": 0, "Result": 1, "Feedback": 2}


def type_name(message_class: type) -> str:
    """`pkg/msg/Type` (or `pkg/action/Act_Feedback`) of a generated ROS message class."""
    module = message_class.__module__.split(".")
    return f"{module[0]}/{module[1]}/{message_class.__name__}"


def _definition(name: str) -> str:
    """The text of one interface definition, comments kept (rosbag2 keeps them too)."""
    package, kind, leaf = name.split("/")
    share = Path(get_package_share_directory(package))
    if kind == "action":
        action, part = leaf.rsplit("_", 1)
        sections = (share / "action" / f"{action}.action").read_text(encoding="utf-8")
        return re.split(r"^---\s*$", sections, flags=re.M)[_ACTION_PARTS[part]].strip("\n")
    return (share / kind / f"{leaf}.msg").read_text(encoding="utf-8").strip("\n")


def _uses(text: str, package: str) -> list[str]:
    """The non-primitive types a definition's fields name, as `pkg/msg/Type`."""
    names: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        # Constants ("uint8 OK=0") name only primitives.
        if len(words) < 2 or "=" in words[1] or "=" in words[0]:
            continue
        match = _FIELD_TYPE.match(words[0])
        base = match.group(1) if match else words[0]
        if base in _PRIMITIVES:
            continue
        if base == "Header":
            names.append("std_msgs/msg/Header")
        elif "/" in base:
            owner, leaf = base.split("/")[0], base.split("/")[-1]
            names.append(f"{owner}/msg/{leaf}")
        else:
            names.append(f"{package}/msg/{base}")
    return names


@cache
def schema_text(name: str) -> str:
    """The `ros2msg` schema of `pkg/msg/Type`: its definition, then each one it depends on."""
    parts = [_definition(name)]
    seen = {name}
    pending = _uses(parts[0], name.split("/")[0])
    while pending:
        used = pending.pop(0)
        if used in seen:
            continue
        seen.add(used)
        text = _definition(used)
        package, _, leaf = used.split("/")
        parts.append(f"{_SEPARATOR}\nMSG: {package}/{leaf}\n{text}")
        pending.extend(_uses(text, package))
    return "\n".join(parts) + "\n"
