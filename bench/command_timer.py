"""When the arm's commands arrive, timed by a receiver that does nothing else.

    python bench/command_timer.py TIMES.json NAMESPACE TOPIC

One node on a `SingleThreadedExecutor` with a single reliable subscription to TOPIC (a
`std_msgs/Float64MultiArray` command topic): the role of a controller's command subscriber, in a
process of its own so that the bench process's own work (its gateway, its planner, its
diagnostics) does not add to the intervals. Stops on SIGINT/SIGTERM and writes the monotonic
arrival time of every message to TIMES.json.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType


def main() -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Float64MultiArray

    out, namespace, topic = sys.argv[1:]
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bench_command_timer", namespace=namespace)
    # CLOCK_MONOTONIC is the same clock in every process: comparable with the node's probe.
    arrivals: list[float] = []
    node.create_subscription(
        Float64MultiArray, topic, lambda _msg: arrivals.append(time.monotonic()),
        QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE),
    )
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("command timer: ready", flush=True)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.2)
    Path(out).write_text(json.dumps(arrivals), encoding="utf-8")
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
