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

from collections.abc import Callable

from rclpy.context import Context
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from sequence_ai_ros.plumbing.side_executor import SideExecutor

JOINT_NODE_SUFFIX = "_joints"
JOINT_THREAD = "sequence_ai-joints"


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
        self._side = SideExecutor(
            context, node_name + JOINT_NODE_SUFFIX, namespace, JOINT_THREAD, log
        )
        self._side.node.create_subscription(
            JointState, topic, on_message, qos_profile_sensor_data
        )
        self._side.start()

    def destroy(self) -> None:
        """Stop the thread, then destroy the node; from any thread but the feed's own."""
        if self._side.stop():
            self._side.node.destroy_node()
