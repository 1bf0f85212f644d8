"""`import sequence_ai` needs httpx and msgpack only: no numpy, Pillow, FastAPI or ROS at import.

Runs in both venvs; in the Python 3.9 one (httpx, msgpack and the test runner only) it also proves
that nothing else is installed there to lean on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "PIL", "fastapi", "uvicorn", "starlette", "pydantic", "rclpy")


def modules_after_import() -> dict:
    """Import sequence_ai in a fresh interpreter with only the source tree on the path."""
    probe = (
        "import json, sys\n"
        "import sequence_ai\n"
        "print(json.dumps({'file': sequence_ai.__file__, 'version': sequence_ai.__version__,"
        " 'modules': sorted(sys.modules)}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=str(ROOT), capture_output=True, text=True,
        timeout=60,
    )
    assert run.returncode == 0, f"import sequence_ai failed:\n{run.stderr}"
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_import_loads_the_source_tree_and_no_heavy_module() -> None:
    report = modules_after_import()
    assert Path(report["file"]).resolve() == ROOT / "sequence_ai" / "__init__.py"
    assert report["version"]
    top_level = {name.split(".")[0] for name in report["modules"]}
    assert not top_level & set(HEAVY)
    assert "sequence_ai_gateway" not in top_level  # a separate service, reached only over HTTP


@pytest.mark.skipif(sys.version_info >= (3, 10), reason="the minimal venv is the Python 3.9 one")
def test_minimal_venv_has_httpx_and_nothing_heavy() -> None:
    assert importlib.util.find_spec("httpx") is not None
    present = [name for name in HEAVY if importlib.util.find_spec(name) is not None]
    assert not present, f"the 3.9 venv must hold only httpx and the test tools; found {present}"
