"""The floor of taking every frame: a subscriber that does nothing, beside the node.

    python bench/floor_subscriber.py COUNTS.json NAMESPACE raw|compressed VIEW [VIEW ...]

One node on a `SingleThreadedExecutor` subscribed (sensor-data QoS) to the same camera topics
and joint_states as the node; its callbacks only count. Stops on SIGINT/SIGTERM and writes the
messages per second of each topic (from its first message to the stop) to COUNTS.json.
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
    from rclpy.qos import qos_profile_sensor_data
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import CompressedImage, Image, JointState

    out, namespace, transport, *views = sys.argv[1:]
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bench_floor_subscriber", namespace=namespace)
    counts: dict[str, int] = {}
    first: dict[str, float] = {}

    def counter(topic: str):  # noqa: ANN202 - a callback
        counts[topic] = 0

        def count(_msg: object) -> None:
            counts[topic] += 1
            first.setdefault(topic, time.monotonic())

        return count

    suffix = "/compressed" if transport == "compressed" else ""
    msg_type = CompressedImage if transport == "compressed" else Image
    for view in views:
        topic = f"cameras/{view}/image_raw{suffix}"
        node.create_subscription(msg_type, topic, counter(view), qos_profile_sensor_data)
    node.create_subscription(
        JointState, "joint_states", counter("joint_states"), qos_profile_sensor_data
    )
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("floor subscriber: ready", flush=True)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.2)
    end = time.monotonic()
    rates = {t: (n - 1) / (end - first[t]) if t in first and n > 1 else 0.0
             for t, n in counts.items()}
    Path(out).write_text(json.dumps(rates), encoding="utf-8")
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
