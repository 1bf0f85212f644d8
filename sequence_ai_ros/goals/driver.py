"""The narrow interface the goal state machine drives goals through (run / hand over; a run is
interrupted through its goal's call handle), and the one that ends goals; `GoalDriver`
(driving.py) and `GoalResults` (results.py) are the node's, a test's fake drives the runner
without ROS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import sequence_ai
    from sequence_ai_ros.core.node_config import NodeConfig
    from sequence_ai_ros.goals.goal_state import GoalRun
    from sequence_ai_ros.goals.results import GoalOutcome
    from sequence_ai_ros.goals.takeover import RunBaton
    from sequence_ai_ros.inputs.sent_images import SentImages


class Driver(Protocol):
    """Plays one goal's run on the driving thread; `run.call.interrupt()` stops it."""

    @property
    def images(self) -> SentImages:
        """The images of the last observation sent (~/current_frames)."""
        ...

    @property
    def baton(self) -> RunBaton | None:
        """The running goal's relay of its run's events (None: no run), for a hand-over."""
        ...

    def run(self, run: GoalRun, config: NodeConfig) -> GoalOutcome:
        """Drive `run` to its end (and hold); its outcome."""
        ...

    def hand_over(self, previous: GoalRun, run: GoalRun, config: NodeConfig) -> GoalOutcome:
        """`run` takes `previous`'s run over; `previous`'s outcome (`HANDED_OVER`)."""
        ...


class Results(Protocol):
    """Ends goals that did not reach a run's end: never started, or failed while ending."""

    def end(
        self,
        run: GoalRun,
        outcome: sequence_ai.RunOutcome | None,
        error: Exception | None,
        *,
        ran: bool,
    ) -> GoalOutcome:
        """The goal's outcome from its `GoalEnding` row."""
        ...

    def crashed(self, run: GoalRun, exc: Exception) -> GoalOutcome:
        """The outcome of a goal the node failed to end normally: aborted, raised."""
        ...
