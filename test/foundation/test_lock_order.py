"""The lock order of docs/architecture.md ("lock order"), held by the code: read from the AST,
no lock is held where the code calls into something that takes a lock before it in the order
(or, for the leaves, into anything that takes a lock at all)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (module, the lock as written in `with`, calls that must not happen under it, why).
RULES = [
    ("sequence_ai_ros/goals/runner.py", "self._cond", ("self._driver.", ".interrupt("),
     "6 before 10"),
    ("sequence_ai_ros/goals/driving.py", "self._cond",
     ("self._cache.", "self._gate.", "self._policy.", "self._health.", "feedback.",
      ".interrupt("), "6 after 2, 3, 5; before 8-10"),
    ("sequence_ai_ros/goals/results.py", "self._cond", ("self._health.", "self._log."),
     "6: only its own fields"),
    ("sequence_ai_ros/inputs/observation_cache.py", "self._lock",
     ("listener(", "self._frames.", "self._warn("), "5 after 3, 4, 6"),
    ("sequence_ai_ros/goals/feedback.py", "self._lock",
     ("self._health.", "self._handle.", "self._stats."), "a leaf"),
    ("sequence_ai/_run/run_stats.py", "self._lock", ("self._connections(",), "a leaf"),
    ("sequence_ai_ros/episodes/recorder.py", "self._lock",
     ("self._health.", "self._error(", "episode.", "cameras.", "self._open("), "a leaf"),
    ("sequence_ai_ros/episodes/episode.py", "self._lock",
     ("self.put(", "self.writer.", "self.instruction("), "a leaf"),
    ("sequence_ai_ros/episodes/writer.py", "self._lock",
     ("self._on_drop(", "self._on_error(", "self._queue.", "self._mcap.", "self._file."),
     "a leaf"),
    ("sequence_ai_ros/inputs/motion_enable.py", "self._lock", ("self._stop(", "self._node."),
     "a leaf"),
    ("sequence_ai_ros/commands/dry_run.py", "self._lock",
     ("self._commands.", "self._node.", "self._ghost."),
     "a leaf"),
    ("sequence_ai/_run/capture.py", "self._lock",
     ("self._publish(", "self._observe(", "check_observation("), "8: only the Session's (9)"),
    ("sequence_ai/_requests/session.py", "self._lock", (".interrupt(", ".notify(", ".join("),
     "9 before 10"),
    ("sequence_ai/_requests/calls.py", "self._cond", ("self._session", "interrupt_all("), "10"),
]


def _calls_under(path: Path, lock: str) -> tuple[int, list[str]]:
    """How many `with <lock>:` blocks the module has, and every call written inside them
    (lambdas included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    blocks = 0
    calls: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            ast.unparse(item.context_expr) == lock for item in node.items
        ):
            blocks += 1
            for statement in node.body:
                calls += [
                    ast.unparse(call) for call in ast.walk(statement) if isinstance(call, ast.Call)
                ]
    return blocks, calls


@pytest.mark.parametrize(("module", "lock", "forbidden", "why"), RULES)
def test_no_call_under_a_lock_reaches_a_lock_before_it(
    module: str, lock: str, forbidden: tuple[str, ...], why: str
) -> None:
    blocks, calls = _calls_under(ROOT / module, lock)
    assert blocks, f"{module} has no `with {lock}:` block: the rule is stale"
    wrong = [call for call in calls if any(name in call for name in forbidden)]
    assert not wrong, f"{module}: under {lock} (lock order {why}): {wrong}"


def test_the_order_is_written_at_every_lock_of_the_shipped_code() -> None:
    unwritten = []
    for package in ("sequence_ai", "sequence_ai_ros"):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines):
                made = "threading.Lock()" in line or "threading.RLock()" in line or (
                    "threading.Condition(" in line)
                if made and "=" in line and not line.lstrip().startswith(("#", "def", "return")):
                    above = " ".join(lines[max(0, number - 3):number])
                    if "Lock order" not in above:
                        unwritten.append(f"{path.relative_to(ROOT)}:{number + 1}")
    assert not unwritten, f"locks without their place in the lock order: {unwritten}"


_LOCK_TYPES = {"threading.Lock", "threading.RLock", "threading.Condition"}


def _shipped_locks() -> list[str]:
    """`Class._attr` (or a module-level name) of every lock made in the shipped code."""
    found = []
    for package in ("sequence_ai", "sequence_ai_ros"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            owners = {
                id(node): cls.name
                for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                for node in ast.walk(cls)
            }
            for node in ast.walk(tree):
                if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                    node.value, ast.Call
                ) and ast.unparse(node.value.func) in _LOCK_TYPES):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    written = ast.unparse(target)
                    owner = owners.get(id(node))
                    if owner and written.startswith("self."):
                        found.append(f"{owner}.{written.removeprefix('self.')}")
                    elif node in tree.body:
                        found.append(written)
                    # else a local handed to an object that owns it (goal_runner's cond: the
                    # runner's `_cond`), named in the table by that owner.
    return found


@pytest.mark.slow  # over half a second of wall time
def test_every_lock_of_the_shipped_code_is_in_the_pages_lock_table() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Lock order", 1)[1].split("\n## ", 1)[0]
    locks = _shipped_locks()
    assert len(locks) > 20  # the walk found them
    missing = sorted({lock for lock in locks if f"`{lock}`" not in table})
    assert not missing, f"locks made in shipped code but not in docs/architecture.md: {missing}"
