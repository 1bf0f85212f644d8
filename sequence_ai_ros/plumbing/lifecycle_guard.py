"""The lifecycle services kept answering: a `ChangeState` for a transition the current state
lacks is refused (`success: false`) instead of raising out of the executor (rclpy raises
`RCLError: Transition is not registered` on such an id, ros2/rclpy#1209, which ended the node
and lost every running goal's result); a shutdown ends a configure's catalogue probe at
once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from lifecycle_msgs.srv import ChangeState
from rclpy.lifecycle import LifecycleNode

import sequence_ai

ChangeStateCallback = Callable[[ChangeState.Request, ChangeState.Response], ChangeState.Response]


def _available(node: LifecycleNode) -> list[tuple[int, str]]:
    # rclpy's state machine (the `_state_machine` its own services use): (id, label, ...) rows.
    return [(int(row[0]), str(row[1])) for row in node._state_machine.available_transitions]


def guard_change_state(node: LifecycleNode, warn: Callable[[str], object]) -> None:
    """Wrap the node's `change_state` service callback (rclpy keeps it in the service's
    `callback`) so an unavailable transition is answered `success: false` and logged."""
    service = node._service_change_state
    inner: ChangeStateCallback = service.callback

    def guarded(request: ChangeState.Request, response: ChangeState.Response
                ) -> ChangeState.Response:
        wanted_id, wanted_label = int(request.transition.id), str(request.transition.label)
        available = _available(node)
        found = any(
            (label == wanted_label) if wanted_label else (tid == wanted_id)
            for tid, label in available
        )
        if not found:
            asked = f"label {wanted_label!r}" if wanted_label else f"id {wanted_id}"
            state = node._state_machine.current_state[1]
            offered = ", ".join(f"{label} ({tid})" for tid, label in available) or "none"
            warn(
                f"ChangeState refused: transition {asked} is not available in state "
                f"{state!r}; available: {offered}"
            )
            response.success = False
            return response
        return inner(request, response)

    service.callback = guarded


class ConfigureProbe:
    """The catalogue probe of a configure in progress, which a shutdown ends at once.

    `running()` is held for a whole configure; `probing(policy)` registers its probe;
    `abort()` (any thread) closes the probe, refuses later ones and waits for the configure
    to finish. `_probe` and `_aborted` are guarded by `_lock`."""

    def __init__(self) -> None:
        # Lock order: a leaf (the probe is closed after its release).
        self._lock = threading.Lock()
        # Lock order 0: held for a whole configure, so everything configure takes is below it.
        self._busy = threading.Lock()
        self._probe: sequence_ai.Policy | None = None
        self._aborted = False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._busy:
            yield

    @contextlib.contextmanager
    def probing(self, policy: sequence_ai.Policy) -> Iterator[sequence_ai.Policy]:
        with self._lock:
            self._probe = policy
            aborted = self._aborted
        try:
            if aborted:
                raise sequence_ai.SequencesError("the node is shutting down")
            with policy:
                yield policy
        finally:
            with self._lock:
                self._probe = None

    def abort(self, timeout_s: float) -> None:
        with self._lock:
            self._aborted = True
            probe = self._probe
        if probe is not None:
            probe.close()
        if self._busy.acquire(timeout=timeout_s):
            self._busy.release()
