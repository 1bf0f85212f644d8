"""The processes `evaluate --sim` (and the demo's launcher) start die with it, however it dies:
a `kill -9` leaves no gateway, world or node to race the resumed run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

LAUNCHER = """
import sys, time
from pathlib import Path
from sequence_ai_lab.demo.launcher import Launcher, ProcessSpec
child = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
launcher = Launcher([ProcessSpec("child", "", command_line=child, ready_prefix="up")],
                    log_dir=Path(sys.argv[1]))
launcher.start(30.0)
print(launcher.pids()["child"], flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie nobody reaps has ended


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_a_killed_launchers_children_end_with_it(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 20.0
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
