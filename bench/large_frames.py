"""Frames delivered with and without the large-frames Fast DDS profile, and sim_robot's own CPU.

    python bench/large_frames.py --profile none        # Fast DDS defaults
    python bench/large_frames.py --profile large       # config/fastdds_large_frames.xml
    python bench/large_frames.py --profile my.xml      # any other Fast DDS profile
    python bench/large_frames.py --frames rendered --views exterior_1,exterior_2,wrist_left \
        --fps 15 --moving                               # the renderer's cost while the arm moves

Starts `sim_robot` (by default the light feed: premade 1280x720 rgb8 frames, two cameras at
30 Hz, joint states at 100 Hz) and a subscriber process whose callbacks only count (one
SingleThreadedExecutor, sensor-data QoS like the node's), both with the same transport setting,
on loopback. Prints one JSON line: messages per second received per topic, and CPU (share of
one core, user + system from /proc) of both processes over the window. `--moving` sends the arm
a slow 12-point trajectory so that a rendered feed redraws every frame. Not a `make bench`
section: a tool to check a machine's transport (docs/sim.md quotes its figures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _subscriber(args: argparse.Namespace) -> int:
    """Count what arrives for `args.warmup + args.seconds`; print rates over the window."""
    import numpy as np
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CompressedImage, Image, JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from sequence_ai_lab.robots.shared.arm import HOME, JOINT_NAMES
    from sequence_ai_lab.robots.sim_robot.robot import TRAJECTORY_TOPIC

    rclpy.init()
    node = rclpy.create_node("large_frames_counter")
    counts: dict[str, int] = {}
    counting = [False]

    def counter(topic: str):  # noqa: ANN202 - a callback factory
        def count(_msg: object) -> None:
            if counting[0]:
                counts[topic] = counts.get(topic, 0) + 1

        return count

    suffix = "/compressed" if args.transport == "compressed" else ""
    msg_type = CompressedImage if args.transport == "compressed" else Image
    for view in args.views.split(","):
        topic = f"cameras/{view}/image_raw{suffix}"
        node.create_subscription(msg_type, topic, counter(topic), qos_profile_sensor_data)
    node.create_subscription(JointState, "joint_states", counter("joint_states"), 50)
    trajectories = node.create_publisher(JointTrajectory, TRAJECTORY_TOPIC, 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    started = time.monotonic()
    sent = False
    while time.monotonic() - started < args.warmup:
        executor.spin_once(timeout_sec=0.1)
        if args.moving and not sent and trajectories.get_subscription_count() > 0:
            # A slow swing of the first joints over the whole run: every frame shows a new pose.
            msg = JointTrajectory(joint_names=list(JOINT_NAMES))
            total = args.warmup + args.seconds + 5.0
            for k in range(1, 13):
                t = total * k / 12
                offset = (0.4 if k % 2 else -0.4) * np.array([1.0, 0.5, 0.0, 0.5, 0.0, 0.0, 1.0])
                point = JointTrajectoryPoint(positions=(HOME + offset).tolist())
                point.time_from_start.sec, point.time_from_start.nanosec = int(t), int(t % 1 * 1e9)
                msg.points.append(point)
            trajectories.publish(msg)
            sent = True
    counting[0] = True
    cpu0, t0 = _cpu_seconds(os.getpid()), time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        executor.spin_once(timeout_sec=0.1)
    cpu1, t1 = _cpu_seconds(os.getpid()), time.monotonic()
    span = t1 - t0
    rates = {topic: round(n / span, 1) for topic, n in sorted(counts.items())}
    print(json.dumps({"received_per_s": rates, "subscriber_cpu": round((cpu1 - cpu0) / span, 3)}))
    node.destroy_node()
    rclpy.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--profile", default="large",
        help="none (Fast DDS defaults), large (the package's profile) or a profile file",
    )  # fmt: skip
    parser.add_argument("--frames", choices=("premade", "rendered"), default="premade")
    parser.add_argument("--transport", choices=("raw", "compressed"), default="raw")
    parser.add_argument("--views", default="exterior_1,wrist_left")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--moving", action="store_true")
    parser.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.subscriber:
        return _subscriber(args)

    from sequence_ai_ros.params import launch as node_launch

    env = {k: v for k, v in os.environ.items() if k not in node_launch.DDS_PROFILE_ENVS}
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("ROS_LOCALHOST_ONLY", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if args.profile == "large":
        env.update(node_launch.dds_profile_env({}))
    elif args.profile != "none":
        profile = str(Path(args.profile).resolve())
        env.update({name: profile for name in node_launch.DDS_PROFILE_ENVS})
    width, _, height = args.size.partition("x")
    sim_args = [
        "--ros-args",
        "-p", f"camera_frames:={args.frames}", "-p", f"fps:={args.fps}",
        "-p", f"views:=[{args.views}]", "-p", f"image_transport:={args.transport}",
        "-p", f"image_width:={width}", "-p", f"image_height:={height}",
    ]  # fmt: skip
    bootstrap = ("import sys; from sequence_ai_lab.robots.sim_robot.robot import main; "
                 "sys.exit(main())")
    sim = subprocess.Popen(
        [sys.executable, "-c", bootstrap, *sim_args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        counter = subprocess.Popen(
            [sys.executable, __file__, "--subscriber", *(argv or sys.argv[1:])],
            env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(args.warmup)
        cpu0, t0 = _cpu_seconds(sim.pid), time.monotonic()
        out, _ = counter.communicate(timeout=args.warmup + args.seconds + 60)
        cpu1, t1 = _cpu_seconds(sim.pid), time.monotonic()
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    result = json.loads(out.strip().splitlines()[-1])
    result.update(
        profile=args.profile, frames=args.frames, transport=args.transport, views=args.views,
        fps=args.fps, size=args.size, moving=args.moving,
        sim_robot_cpu=round((cpu1 - cpu0) / (t1 - t0), 3),
    )  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
