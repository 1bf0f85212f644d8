"""How a simulator process runs: its node spun until SIGINT or SIGTERM, then ended once.

Any number of signals (a terminal's Ctrl-C to the process group, then launch's own SIGINT and
SIGTERM) ends it once, cleanly, with status 0.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

# The spin looks at the stop flag at least this often (a signal cannot wake rcl's wait).
SIGNAL_POLL_S = 0.2


def spin_until_signal(make_node: Callable[[], Node], args: list[str] | None = None) -> None:
    """rclpy up, `make_node()` spun on this thread until a signal, then everything down."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    executor = None
    try:
        node = make_node()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=SIGNAL_POLL_S)
    except ExternalShutdownException:
        pass
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        # Exiting: interpreter shutdown puts the default handlers back (a signal then kills the
        # process, status -2 or -15) — but leaves an ignored signal ignored.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
