"""Point the ROS wheels' rosidl CMake exports at this venv's Python and numpy headers.

The Jazzy wheels were built under /opt/python/cpXY-cpXY and their
export_*__rosidl_generator_pyExport.cmake files still name include directories there;
CMake refuses a target whose include path does not exist. Only files inside the venv
given as argument are rewritten; running it again changes nothing.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

import numpy

# The wheel builder's numpy include dir, then its Python include dir (order matters: the first
# pattern is the more specific one).
NUMPY_INCLUDE = re.compile(r"/opt/python/[^/;\"\s]+/lib/python[0-9.]+t?/site-packages/numpy/"
                           r"(?:_core|core)/include")
PYTHON_INCLUDE = re.compile(r"/opt/python/[^/;\"\s]+/include/python[0-9.]+t?")


def rewrite(venv: Path) -> int:
    """Rewrite every export file under venv/share; return how many files changed."""
    python_include = sysconfig.get_paths()["include"]
    numpy_include = numpy.get_include()
    if not Path(python_include, "Python.h").is_file():
        raise SystemExit(f"Python.h not found in {python_include}: this interpreter has no headers")
    changed = 0
    for export in sorted(venv.glob("share/*/cmake/export_*__rosidl_generator_pyExport.cmake")):
        text = export.read_text()
        fixed = PYTHON_INCLUDE.sub(python_include, NUMPY_INCLUDE.sub(numpy_include, text))
        if fixed != text:
            export.write_text(fixed)
            changed += 1
    return changed


if __name__ == "__main__":
    venv = Path(sys.argv[1] if len(sys.argv) > 1 else sys.prefix)
    print(f"rosidl CMake exports rewritten: {rewrite(venv)} file(s) in {venv}")
