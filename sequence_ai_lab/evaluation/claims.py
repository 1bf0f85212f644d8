"""One evaluation at a time per --out folder and per node: a claim is an flock on a file holding
the claimant's pid. The kernel drops it when that process ends however it ends, so a killed
evaluation never blocks its resume, and a second claimant is refused naming the first."""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from pathlib import Path

# In --out: held by the evaluation writing the folder.
FOLDER_LOCK = ".evaluate.lock"


class Claimed(RuntimeError):
    """Another evaluation holds the claim; the message names its pid."""


class Claim:
    """An exclusive claim on `path`, held until `release` or this process's end."""

    def __init__(self, path: Path, what: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise Claimed(f"{what}: evaluation pid {holder} holds it ({path}); expected one "
                          "evaluation at a time (or wait for it to end)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def claim_folder(directory: Path) -> Claim:
    return Claim(directory / FOLDER_LOCK, f"--out {directory}")


def claim_node(node_path: str, directory: Path | None = None) -> Claim:
    """The claim on the node `node_path` of this ROS domain, on this machine (where
    ROS_LOCALHOST_ONLY puts every process of the graph)."""
    domain = os.environ.get("ROS_DOMAIN_ID", "0")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", node_path.strip("/")) or "node"
    folder = directory or Path(tempfile.gettempdir())
    return Claim(folder / f"sequence_ai_evaluate.{domain}.{name}.lock",
                 f"node {node_path} (ROS domain {domain})")
