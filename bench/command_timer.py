"""When the arm's commands arrive, timed by a receiver that does nothing else.

    python bench/command_timer.py TIMES.json NAMESPACE TOPIC {step,trajectory,twist,pose}

One node on a `SingleThreadedExecutor` with a single reliable subscription to TOPIC (a
`std_msgs/Float64MultiArray` for `step`, a `trajectory_msgs/JointTrajectory` for `trajectory`,
a `geometry_msgs/TwistStamped` for `twist`, a `geometry_msgs/PoseStamped` for `pose`):
the role of a controller's command subscriber, in a process of its own so that the bench
process's own work (its gateway, its planner, its diagnostics) does not add to the times.
Stops on SIGINT/SIGTERM and writes one record per message to TIMES.json: "t" (monotonic
arrival), "values" (step: the targets; trajectory: every point's positions, then every
velocity), "trajectory", "still" (a trajectory at one position with zero velocity; a zero twist) and
"first_point" (a timed trajectory's first point's due time, monotonic; NaN otherwise). A twist's
values are linear x, y, z then angular x, y, z; a pose's position x, y, z then its quaternion
x, y, z, w.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType


def main() -> int:
    import rclpy
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    out, namespace, topic, kind = sys.argv[1:]
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bench_command_timer", namespace=namespace)
    # CLOCK_MONOTONIC is the same clock in every process: comparable with the node's probe.
    records: list[dict[str, object]] = []
    # Stamps are on the system clock: one offset maps them onto monotonic.
    offset = time.time() - time.monotonic()

    def on_step(msg: Float64MultiArray) -> None:
        records.append({"t": time.monotonic(), "values": list(msg.data)})

    def on_trajectory(msg: JointTrajectory) -> None:
        at = time.monotonic()
        positions = [tuple(p.positions) for p in msg.points]
        velocities = [v for p in msg.points for v in p.velocities]
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        first_point = math.nan
        # A zero stamp means "start now" (a hold): no due time.
        if msg.points and stamp:
            first = msg.points[0].time_from_start
            first_point = stamp + first.sec + first.nanosec * 1e-9 - offset
        records.append({
            "t": at,
            "values": [v for p in positions for v in p] + velocities,
            "trajectory": True,
            "still": len(set(positions)) == 1 and not any(velocities),
            "first_point": first_point,
        })

    def on_twist(msg: TwistStamped) -> None:
        at = time.monotonic()
        linear, angular = msg.twist.linear, msg.twist.angular
        values = [linear.x, linear.y, linear.z, angular.x, angular.y, angular.z]
        records.append({"t": at, "values": values, "still": not any(values)})

    def on_pose(msg: PoseStamped) -> None:
        at = time.monotonic()
        p, q = msg.pose.position, msg.pose.orientation
        records.append({"t": at, "values": [p.x, p.y, p.z, q.x, q.y, q.z, q.w]})

    callbacks = {"trajectory": (JointTrajectory, on_trajectory), "twist": (TwistStamped, on_twist),
                 "pose": (PoseStamped, on_pose), "step": (Float64MultiArray, on_step)}
    if kind not in callbacks:
        raise SystemExit(f"kind {kind!r}: expected one of {', '.join(callbacks)}")
    message, callback = callbacks[kind]
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(message, topic, callback, qos)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("command timer: ready", flush=True)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.2)
    Path(out).write_text(json.dumps(records), encoding="utf-8")
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
