"""A simulator in a process of its own, as a robot's controllers run.

In the test's process a simulated arm shares the interpreter with the node: under load it falls
behind the commands, and a chunk planned from the lagging arm then seams back by more than
max_step (the gate refuses it, rightly, and the test is about something else).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def simulator(
    module: str, namespace: str, log_path: Path, parameters: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `module`'s `main()` in `namespace` with `-p name:=value` parameters; its output goes
    to `log_path`. Ended with SIGTERM on exit (it stops cleanly on one)."""
    arguments = ["--ros-args", "-r", f"__ns:={namespace}"]
    for name, value in (parameters or {}).items():
        arguments += ["-p", f"{name}:={value}"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", f"from {module} import main; main()", *arguments],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ),
        )
        try:
            yield process
        finally:
            process.terminate()
            process.wait(timeout=20)
