"""The enable switch (`~/enable`, std_srvs/SetBool) and the optional heartbeat deadman
(`enable_topic`, std_msgs/Bool, with `enable_timeout_s`).

Motion is allowed only while the switch is on and, with a heartbeat topic, a `true` arrived
within the timeout. While it is not, goals are rejected with the reason, and a running goal is
stopped — at once by the service, within one control period by a watcher for a missing
heartbeat — and ends held with its own ending. This is a software interlock, not a hardware
e-stop (docs/safety.md).
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription
from std_msgs.msg import Bool
from std_srvs.srv import SetBool


class Blocked(enum.Enum):
    """Why motion is not allowed; the value is the stop cause's wording."""

    DISABLED = "disabled"
    DEADMAN = "deadman"


class MotionEnable:
    """The switch's state and the heartbeat's, safe from any thread (`_lock`).

    The service and the heartbeat subscription are the node's (its executor calls them); the
    watcher thread looks every `check_s` and calls `stop(cause)` while motion is blocked, so a
    goal that started just before a heartbeat went missing is stopped too.
    """

    def __init__(
        self,
        node: Node,
        stop: Callable[[Blocked], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._stop = stop
        self._clock = clock
        # Lock order: a leaf (the stop callback runs after its release).
        self._lock = threading.Lock()
        self._enabled = True
        # The heartbeat: its topic's subscription, timeout, and the last `true`'s time.
        self._subscription: Subscription | None = None
        self._timeout_s = math.inf
        self._beat_s = -math.inf
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._service = node.create_service(SetBool, "~/enable", self._on_enable)

    def blocked(self) -> tuple[Blocked, str] | None:
        """(cause, why) while motion is not allowed, else None."""
        with self._lock:
            if not self._enabled:
                return Blocked.DISABLED, "motion is disabled (~/enable false); enable it first"
            if self._subscription is not None:
                age = self._clock() - self._beat_s
                if age > self._timeout_s:
                    seen = "none received" if math.isinf(age) else f"the last {age:.3f} s ago"
                    return Blocked.DEADMAN, (
                        f"no true on the enable topic within enable_timeout_s "
                        f"({self._timeout_s:g} s): {seen}"
                    )
        return None

    def state(self) -> str:
        """For /diagnostics: enabled, or why not."""
        blocked = self.blocked()
        return "enabled" if blocked is None else blocked[1]

    # ----- configure / cleanup -----

    def watch(self, topic: str, timeout_s: float, check_s: float) -> None:
        """Start the watcher, looking every `check_s` (a control period or less); with a
        `topic`, require a `true` on it within `timeout_s`. Without one the watcher only stops
        goals while the switch is off."""
        self.stop_watching()()
        if topic:
            qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
            subscription = self._node.create_subscription(Bool, topic, self._on_beat, qos)
            with self._lock:
                self._subscription = subscription
                self._timeout_s = timeout_s
                self._beat_s = -math.inf
        self._start_watcher(check_s)

    def stop_watching(self) -> Callable[[], None]:
        """Stop the watcher and the heartbeat requirement (cleanup); returns what destroys the
        heartbeat's subscription, for the thread that may (the executor's, or destroy_node)."""
        self._watch_stop.set()
        watcher, self._watcher = self._watcher, None
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()
        with self._lock:
            subscription, self._subscription = self._subscription, None
            self._timeout_s = math.inf

        def destroy() -> None:
            if subscription is not None:
                self._node.destroy_subscription(subscription)

        return destroy

    # ----- callbacks -----

    def _start_watcher(self, check_s: float) -> None:
        self._watch_stop = threading.Event()
        self._watcher = threading.Thread(
            target=self._watch, args=(self._watch_stop, check_s), name="sequence_ai-enable",
            daemon=True,
        )
        self._watcher.start()

    def _watch(self, stop: threading.Event, check_s: float) -> None:
        while not stop.wait(check_s):
            blocked = self.blocked()
            if blocked is not None:
                self._stop(blocked[0])

    def _on_beat(self, msg: Bool) -> None:
        with self._lock:
            if msg.data:
                self._beat_s = self._clock()
            else:
                # An explicit false (a released deadman) blocks at once, not after the timeout.
                self._beat_s = -math.inf
        if not msg.data:
            self._stop(Blocked.DEADMAN)

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self._lock:
            self._enabled = bool(request.data)
        if request.data:
            blocked = self.blocked()
            response.message = "enabled" if blocked is None else f"enabled; but {blocked[1]}"
        else:
            self._stop(Blocked.DISABLED)
            response.message = "disabled: a running goal was stopped and the arm held"
        response.success = True
        self._node.get_logger().info(f"~/enable {request.data}: {response.message}")
        return response
