"""Print the Python requirements that setup.py declares, one per line.

Usage: requirements.py [EXTRA ...]   (install_requires first, then each extra's list)
       requirements.py --assets       (SIM_ASSETS: packages installed with --no-deps for files)
setup.py is run with setuptools.setup replaced, so nothing is built or installed.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import setuptools


def declared(setup_py: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run setup.py: the keyword arguments it passes to setup() and its module globals."""
    captured: dict[str, Any] = {}
    setuptools.setup = lambda **kwargs: captured.update(kwargs)
    names = runpy.run_path(str(setup_py), run_name="__main__")
    return captured, names


def main(extras: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    kwargs, names = declared(root / "setup.py")
    if extras == ["--assets"]:
        print("\n".join(names.get("SIM_ASSETS", [])))
        return 0
    known = kwargs.get("extras_require", {})
    unknown = [name for name in extras if name not in known]
    if unknown:
        sys.stderr.write(f"extras {unknown}: not in setup.py; expected one of {sorted(known)}\n")
        return 2
    wanted = [r for r in kwargs.get("install_requires", []) if r != "setuptools"]
    for name in extras:
        wanted += known[name]
    print("\n".join(dict.fromkeys(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
