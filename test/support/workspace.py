"""The built workspace for a bare `.venv/bin/python -m pytest` (README's fast-test line): when
the interfaces do not import (install/setup.bash not sourced), pytest starts again in the
environment `make pytest` gives it, so a new user's first run collects like CI's."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# Set in the restarted run: a second restart would loop.
RESTARTED = "SEQUENCE_AI_TEST_WORKSPACE"


def _setup_root() -> Path | None:
    """The checkout whose `make setup` venv runs pytest, if it has a built workspace; None for
    any other interpreter (the 3.9 client venv, the floors venv), which needs no workspace."""
    prefix = Path(sys.prefix)
    root = prefix.parent
    if prefix.name != ".venv" or not (root / "install" / "setup.bash").is_file():
        return None
    return root


def workspace_environment() -> dict[str, str] | None:
    """The environment of the Makefile's WS_ENV, or None when pytest needs no restart."""
    if os.environ.get(RESTARTED) or importlib.util.find_spec("sequence_ai_interfaces"):
        return None
    root = _setup_root()
    if root is None:
        return None
    venv = root / ".venv"
    script = f'source "{venv}/bin/activate" && source "{root}/install/setup.bash" && '
    if not os.environ.get("ROS_DISTRO"):
        # As the Makefile without a system ROS: the wheels' ament index and CMake configs live
        # in the venv prefix.
        script += ('export AMENT_PREFIX_PATH="$AMENT_PREFIX_PATH:$VIRTUAL_ENV" '
                   'CMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:+$CMAKE_PREFIX_PATH:}$VIRTUAL_ENV" && ')
    script += "env -0"
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=True)
    env = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    python_path = env.get("PYTHONPATH", "")
    env.update({
        RESTARTED: "1",
        "PYTHONPATH": f"{root}:{python_path}" if python_path else str(root),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOCALHOST_ONLY": "1",
        "SEQUENCE_AI_GATEWAY_PYTHON": str(venv / "bin" / "python"),
    })
    return env
