"""Joint states at their full rate, on a small executor and thread of their own.

rclpy's executor rebuilds its wait set from every entity of the nodes it spins each time it
wakes. The lifecycle node carries a dozen services, the `act` server, timers and a guard
condition, so on its executor each of the 100 joint messages a second paid for all of them. Here
the subscription sits alone on a node without parameter services, spun by its own
`SingleThreadedExecutor` on the thread `sequence_ai-joints`: a message costs what rclpy's floor
is, and no service, goal or lifecycle callback can delay the joints every step is checked
against.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

JOINT_NODE_SUFFIX = "_joints"
JOINT_THREAD = "sequence_ai-joints"
_STOP_TIMEOUT_S = 5.0
# The thread looks at its stop flag at least this often, should a wake be missed.
_POLL_S = 1.0


class JointFeed:
    """One joint_states subscription, spun on `JOINT_THREAD` from construction to `destroy()`;
    `on_message` runs there for every message."""

    def __init__(
        self,
        context: Context,
        node_name: str,
        namespace: str,
        topic: str,
        on_message: Callable[[JointState], None],
        log: RcutilsLogger,
    ) -> None:
        """`topic`: fully resolved (with the main node's namespace and remappings)."""
        # No global arguments: the process's `__node:=` remap must not rename this node.
        self._node = Node(
            node_name + JOINT_NODE_SUFFIX,
            namespace=namespace,
            context=context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        self._node.create_subscription(JointState, topic, on_message, qos_profile_sensor_data)
        # Wakes the executor's wait when the feed is stopped.
        self._wake = self._node.create_guard_condition(_nothing)
        self._stop = threading.Event()
        self._log = log
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._spin, name=JOINT_THREAD, daemon=True)
        self._thread.start()

    def destroy(self) -> None:
        """Stop the thread, then destroy the node; from any thread but the feed's own."""
        self._stop.set()
        self._wake.trigger()
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            # Left to the process's exit (daemon): destroying what it waits on would crash it.
            self._log.error(f"{JOINT_THREAD} did not stop within {_STOP_TIMEOUT_S:g} s")
            return
        self._executor.shutdown()
        self._node.destroy_node()

    def _spin(self) -> None:
        try:
            while not self._stop.is_set():
                self._executor.spin_once(timeout_sec=_POLL_S)
        except ExternalShutdownException:
            pass  # the process is shutting rclpy down
        except Exception as exc:  # noqa: BLE001 - without joints every step is refused; say why
            self._log.fatal(f"{JOINT_THREAD} stopped: {type(exc).__name__}: {exc}")


def _nothing() -> None:
    """A guard condition's callback; the wake is all it is for."""
