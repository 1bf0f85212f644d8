"""A teleop deadman in a process of its own: `true` on TOPIC every PERIOD_S until SIGINT.

    python bench/heartbeat.py BEATS.json TOPIC PERIOD_S

Writes the monotonic time of the last beat sent to BEATS.json on exit (CLOCK_MONOTONIC is the
same clock in every process). Its own process, so the bench's work never delays a beat.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path


def main() -> int:
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from std_msgs.msg import Bool

    out, topic, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bench_heartbeat")
    publisher = node.create_publisher(Bool, topic, 10)
    last = float("nan")
    while not stop.wait(period):
        publisher.publish(Bool(data=True))
        last = time.monotonic()
    Path(out).write_text(json.dumps({"last_beat": last}), encoding="utf-8")
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
