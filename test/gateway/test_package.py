"""The gateway is a service of its own: it imports nothing of the client or the node, and it
starts as ``python -m sequence_ai_gateway`` and as the ``sequence-ai-gateway`` console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

import sequence_ai_gateway  # noqa: E402

SOURCE = Path(sequence_ai_gateway.__file__).resolve().parent


def _in_fresh_interpreter(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SOURCE.parent))
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=str(SOURCE.parent),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_no_gateway_module_imports_the_client_or_the_node():
    probe = (
        "import importlib, json, pkgutil, sys\n"
        "import sequence_ai_gateway as g\n"
        "names = [m.name for m in pkgutil.walk_packages(g.__path__, g.__name__ + '.')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({'imported': names, 'modules': sorted(sys.modules)}))\n"
    )
    run = _in_fresh_interpreter(probe)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "sequence_ai_gateway.http.routes.act" in report["imported"]
    top_level = {name.split(".")[0] for name in report["modules"]}
    assert not top_level & {"sequence_ai", "sequence_ai_ros"}


@pytest.mark.slow
def test_module_entry_point_answers_help():
    run = _in_fresh_interpreter(
        "import runpy, sys; sys.argv = ['sequence-ai-gateway', '--help'];"
        " runpy.run_module('sequence_ai_gateway', run_name='__main__')"
    )
    assert run.returncode == 0, run.stderr
    assert "usage: sequence-ai-gateway" in run.stdout


@pytest.mark.slow
def test_installed_console_script_answers_help():
    ament = pytest.importorskip("ament_index_python.packages")
    try:
        prefix = Path(ament.get_package_prefix("sequence_ai_ros"))
    except ament.PackageNotFoundError:
        pytest.skip("sequence_ai_ros is not built here (make setup)")
    script = prefix / "lib" / "sequence_ai_ros" / "sequence-ai-gateway"
    run = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "usage: sequence-ai-gateway" in run.stdout
