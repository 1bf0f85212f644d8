"""README's commands run as printed (issue 33 item 11), in the shell its one line gives.

Every command of README's ```bash blocks is classified here: run as printed when it needs no
robot and no network, `--help` of the tool it names otherwise, a `make` target that must exist,
or a robot's command (ROS 2 Humble's CLI, a build on a robot). A command README gains that fits
none of these fails the test until it is classified, so README and this test cannot drift.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SHELL_LINE = "source .venv/bin/activate && source install/setup.bash"
# The tools README names bare: `make setup` puts them on the venv's PATH (Makefile CLI_SCRIPTS).
TOOLS = ("sequence-ai", "sequence-ai-gateway", "sequence-ai-episodes")
# A robot's commands: ROS 2 Humble's CLI (PyPI's wheels have none) and building on the robot.
ROBOT_FIRST_WORDS = ("ros2", "rosdep", "colcon", "git", "mkdir", "cd")
RUN_TIMEOUT_S = 120


def _commands(block: str) -> list[str]:
    """The commands of one block: continued lines joined, blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _readme_commands() -> list[str]:
    return [c for b in re.findall(r"```bash\n(.*?)```", README, re.S) for c in _commands(b)]


def _setup_root() -> Path:
    """Where `make setup` made .venv and install/: the checkout whose venv runs this test."""
    root = Path(sys.prefix).parent
    if not (root / "install" / "setup.bash").is_file() or Path(sys.prefix).name != ".venv":
        pytest.skip(f"no `make setup` workspace around {sys.prefix}")
    return root


def _shell(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`command` in a fresh bash that has run README's line and nothing else (this checkout's
    code first when it is not the one set up)."""
    script = f"cd {_setup_root()} && {SHELL_LINE} && cd {ROOT} && {command}"
    clean = {
        "HOME": os.environ.get("HOME", "/root"),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "0"),
        "ROS_LOCALHOST_ONLY": "1",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        **env,
    }
    return subprocess.run(
        ["bash", "-c", script],
        env=clean,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def _ok(command: str, **env: str) -> str:
    done = _shell(command, **env)
    assert done.returncode == 0, f"{command!r}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m for line in re.findall(r"^([\w. -]+):", text, re.M) for m in line.split()}


def _kind(command: str) -> str:
    words = shlex.split(command, comments=True)
    if command == SHELL_LINE or command.startswith(SHELL_LINE + " "):
        return "shell"
    if not words:
        return "comment"
    first = words[0]
    if first in ROBOT_FIRST_WORDS or first == "source":
        return "robot"  # a ROS install's setup (README's own line is the shell's, above)
    if first == "make":
        return "make"
    if first == "export":
        return "export"
    if first.startswith("python") and words[1:3] == ["-m", "pip"]:
        return "network"  # installs from an index
    if first.startswith("python") and words[1] == "-c":
        return "run"
    if first in TOOLS:
        return "tool"
    return "unclassified"


COMMANDS = _readme_commands()


def _id(command: str) -> str:
    return shlex.join(shlex.split(command, comments=True))


def test_readme_states_the_shell_line_and_every_command_is_classified() -> None:
    assert SHELL_LINE in COMMANDS, f"README has no code line {SHELL_LINE!r}"
    kinds = {c: _kind(c) for c in COMMANDS}
    unclassified = [c for c, k in kinds.items() if k == "unclassified"]
    assert not unclassified, (
        f"README commands {unclassified} are not classified: teach test_readme_commands.py "
        "whether each runs here, needs a robot or the network, or is a tool to ask for --help"
    )
    # The tools are named where they are run: a bare name README uses is on the shell's PATH.
    assert {w.split()[0] for w, k in kinds.items() if k == "tool"} <= set(TOOLS)


@pytest.mark.parametrize(
    "target", sorted({shlex.split(c, comments=True)[1] for c in COMMANDS if _kind(c) == "make"})
)
def test_each_make_target_exists(target: str) -> None:
    assert target in _make_targets(), f"README's `make {target}`: no such target in the Makefile"


@pytest.mark.parametrize("command", [c for c in COMMANDS if _kind(c) == "run"], ids=_id)
def test_each_command_that_needs_no_robot_runs_as_printed(command: str) -> None:
    _ok(command)


@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_is_on_the_path_and_answers_help(tool: str) -> None:
    assert "usage:" in _ok(f"{tool} --help")


@pytest.mark.parametrize("command", [c for c in COMMANDS if _kind(c) == "tool"], ids=_id)
def test_each_tool_command_parses_its_flags(command: str) -> None:
    """The command's subcommand answers --help and names every flag README gives it."""
    words = shlex.split(command, comments=True)
    # `sequence-ai train submit pi05-droid ...`: the leading lower-case words are verbs.
    verbs = list(itertools.takewhile(lambda w: re.fullmatch(r"[a-z]+", w), words[1:]))
    shown = _ok(shlex.join([words[0], *verbs, "--help"]))
    flags = [w.split("=")[0] for w in words if w.startswith("--")]
    assert all(f in shown for f in flags), f"{command!r}: {flags} not all in its --help"


def test_the_estimate_runs_as_printed_against_a_gateway(gateway: Any) -> None:
    (command,) = [c for c in COMMANDS if c.startswith("sequence-ai estimate")]
    assert _ok(command, SEQUENCES_BASE_URL=gateway.url, SEQUENCES_API_KEY=gateway.api_key)


@pytest.mark.parametrize("module", sorted(set(re.findall(r"`python -m ([\w.]+)[^`]*`", README))))
def test_each_python_module_readme_names_answers_help(module: str) -> None:
    assert _shell(f"python -m {module} --help").returncode == 0


def test_the_fast_test_line_runs_as_printed_in_a_shell_that_sourced_nothing() -> None:
    """README's fast-test line on a fresh setup: no workspace sourced, so test/conftest.py
    starts pytest again in the built workspace (issue 41 hole 15). Collected for one folder
    that imports the interfaces, so the check costs seconds rather than the whole run."""
    (line,) = re.findall(r"`(\.venv/bin/python -m pytest [^`]*)`", README)
    words = shlex.split(line)
    assert "test" in words, f"README's fast-test line {line!r} names no `test` folder"
    words[words.index("test")] = "test/node/episodes"
    root = _setup_root()
    done = subprocess.run(
        [*words, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        env={"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0 and " error" not in done.stdout, done.stdout + done.stderr
    assert re.search(r"\d+/\d+ tests collected", done.stdout), done.stdout
