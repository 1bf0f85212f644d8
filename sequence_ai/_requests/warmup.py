"""The first request of a call: waits out a cold model or a rate limit before anything moves."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Callable, Optional

from .._model.catalogue import Model
from ..errors import RateLimited, SequencesError, Unavailable
from ..outcome import Ending
from ..types import Observation
from .calls import CallEnded, CallHandle, Wake
from .fetch import Fetch
from .session import Session

__all__ = ["WARMING_POLL_MAX_S", "WARMING_POLL_MIN_S", "await_first_chunk"]

# Never sleep longer than this between warming attempts, so a model that becomes ready early is
# noticed early (a rate limit's Retry-After is honoured in full); never shorter than the floor,
# so a 0 s Retry-After cannot spin.
WARMING_POLL_MAX_S = 5.0
WARMING_POLL_MIN_S = 0.2


def await_first_chunk(
    session: Session,
    call: CallHandle,
    make_observation: Callable[[], Observation],
    body: Mapping[str, object],
    *,
    model: Optional[Model],
    budget_s: float,
    deadline: Optional[float],
) -> Fetch:
    """First request of a call, waiting out a warming model or a rate limit for up to
    ``budget_s`` (nothing moves yet, so waiting is free).

    Each attempt gets a fresh observation. Returns the finished fetch (its prediction and
    latency); raises ``CallEnded`` (interrupted, or timeout when ``deadline`` passes) and
    ``Unavailable`` when the budget runs out.
    """
    start = time.monotonic()
    budget_end = start + max(0.0, budget_s)
    eta_s: Optional[float] = None
    warned = False
    saw_warming = False
    while True:
        # An interrupt that came before the call (or during the last pause) sends nothing.
        if call.interrupted:
            raise CallEnded(Ending.INTERRUPTED)
        # A gateway may hold the connection open while it loads; let such an attempt use the
        # whole remaining budget instead of timing out at the default.
        timeout = (
            max(session.transport.timeout_s, budget_end - time.monotonic())
            if budget_s > 0 else None
        )
        # make_observation runs on the request's own thread, as every observation does.
        fetch = session.submit(
            make_observation, body, call, model=model, timeout=timeout, deadline=deadline
        )
        wake = call.wait_for(fetch.is_done, deadline)
        if wake is not Wake.READY:
            raise CallEnded.after(wake)
        try:
            fetch.prediction()
            # A request that followed a load may still include part of it: not a warm sample.
            fetch.warm = fetch.warm and not saw_warming
            return fetch
        except Unavailable as exc:
            limited = isinstance(exc, RateLimited)
            if not (exc.warming or limited) or budget_s <= 0:
                raise
            saw_warming = saw_warming or exc.warming
            now = time.monotonic()
            if now >= budget_end:
                if deadline is not None and deadline <= budget_end:
                    raise CallEnded(Ending.TIMEOUT) from None
                raise _out_of_budget(exc, budget_s) from None
            pause = exc.retry_after_s if exc.retry_after_s is not None else WARMING_POLL_MAX_S
            if limited:
                notice = f"is rate limited (retry after {pause:g}s)"
            else:
                if eta_s is None:
                    eta_s = _full_load_eta(session, exc)
                if session.on_warming is not None:
                    session.on_warming(now - start, eta_s)
                notice = f"is loading (about {_eta_text(eta_s)})"
                pause = min(pause, WARMING_POLL_MAX_S)
            pause = max(pause, WARMING_POLL_MIN_S)
            if not warned:
                warned = True
                warnings.warn(
                    f"{session.model_id} {notice}; waiting up to {budget_s:g}s before the "
                    "first action",
                    UserWarning,
                    stacklevel=4,
                )
            wake_at = min(now + pause, budget_end)
            if deadline is not None and deadline <= wake_at:
                raise CallEnded.after(call.sleep_until(deadline)) from None
            if call.sleep_until(wake_at) is Wake.INTERRUPTED:
                raise CallEnded(Ending.INTERRUPTED) from None


def _out_of_budget(exc: Unavailable, budget_s: float) -> Unavailable:
    """``exc`` (warming or rate limited) again, saying the startup budget ran out."""
    what = "rate limited" if isinstance(exc, RateLimited) else "still loading"
    return type(exc)(
        f"{exc.message} (the model was {what} when the startup budget of {budget_s:g}s ran "
        "out; raise startup_timeout_s or call wait_until_ready() first)",
        status=exc.status,
        body=exc.body,
        retry_after_s=exc.retry_after_s,
        warming=exc.warming,
        job_id=exc.job_id,
    )


def _full_load_eta(session: Session, exc: Unavailable) -> Optional[float]:
    """The model's full-load ETA for ``on_warming``: from ``/v1/act/ready``, else the 503."""
    try:
        _, eta_s = session.ready()
    except SequencesError:
        eta_s = None
    return eta_s if eta_s is not None else exc.retry_after_s


def _eta_text(eta_s: Optional[float]) -> str:
    if eta_s is None:
        return "an unknown time"
    if eta_s < 90:
        return f"{eta_s:.0f}s"
    return f"{eta_s / 60:.0f} min"
