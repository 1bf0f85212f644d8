"""A goal's instruction as the node checks it and shows it: anyone on the ROS domain can send
one, so its length is bounded and what reaches a log or ``/diagnostics`` is a short prefix."""

from __future__ import annotations

from sequence_ai import is_blank

# Characters of an instruction a log line or diagnostics value shows.
SHOWN_CHARS = 80


def shown(instruction: str) -> str:
    """The instruction quoted, cut to ``SHOWN_CHARS`` with its full length said when cut."""
    if len(instruction) <= SHOWN_CHARS:
        return repr(instruction)
    return f"{instruction[:SHOWN_CHARS]!r}... ({len(instruction)} characters)"


def instruction_problem(instruction: str, max_chars: int) -> str | None:
    """Why a goal's instruction must be rejected, or None."""
    if is_blank(instruction):
        return "instruction is empty (or only invisible characters); expected one sentence " \
            "for the policy"
    if len(instruction) > max_chars:
        return (
            f"instruction is {len(instruction)} characters long; expected at most "
            f"max_instruction_chars = {max_chars}"
        )
    return None
