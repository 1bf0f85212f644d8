"""``predict``: one chunk for one observation, outside the built-in loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from ..errors import SequencesError
from ..options import body_fields
from ..types import Observation, Prediction
from .calls import CallEnded, CallHandle
from .session import Session
from .warmup import await_first_chunk

__all__ = ["predict_chunk"]


def predict_chunk(
    session: Session, observation: Observation, options: Mapping[str, object],
    call: Optional[CallHandle],
) -> Prediction:
    """One chunk for ``observation`` (``predict``/``next_action``): the latched instruction
    written in, the pre-send check, a cold start waited out, the buffer refilled."""
    if not isinstance(observation, Observation):
        raise TypeError(
            f"observation is {type(observation).__name__}; expected a sequence_ai.Observation"
        )
    body = body_fields(options)
    latch = session.instruction
    if latch is not None and observation.instruction != latch:
        observation = observation.with_instruction(latch)
    # Fetches the catalogue row unless validate="off"; the chunk is then checked against
    # the row whenever one is known.
    session.check_observation(observation)
    model = session.known_spec()
    with session.open_call("predict", call) as handle:
        budget = 0.0 if session.served else session.defaults.startup_timeout_s
        try:
            fetch = await_first_chunk(
                session, handle, lambda: observation, body,
                model=model, budget_s=budget, deadline=None,
            )
        except CallEnded:
            raise SequencesError("predict() was interrupted") from None
    prediction = fetch.prediction()
    if fetch.warm:
        session.note_latency(fetch.latency_s)
    session.mark_served()
    chunk = prediction.action_chunk
    steps = [list(step) for step in chunk.steps]
    if chunk.open_loop_horizon:
        steps = steps[: chunk.open_loop_horizon]
    # Always replace: steps left from an earlier chunk belong to an older observation.
    session.buffer.clear()
    session.buffer.extend(steps)
    return prediction
