"""A `MultiThreadedExecutor` spun on a thread of its own, stopped with no callback still running.

A planner (the VLM planner, the demo's) destroys its nodes and action clients once it stops
spinning them. rclpy 7.1.5's `Executor.shutdown()` returns without waiting for the callbacks
its pool threads are still running (Humble's waits), and destroys the guard condition each of
them triggers when it ends: such a callback fails with "cannot use Destroyable because
destruction was requested", printed at exit as an exception never retrieved. `stop()` ends the
spinning, waits for those callbacks, and only then shuts the executor down.
"""

from __future__ import annotations

import threading

from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

_STOP_TIMEOUT_S = 5.0
# The thread looks at its stop flag at least this often, should a wake be missed.
_POLL_S = 0.5


class _DrainableExecutor(MultiThreadedExecutor):
    def drain(self, timeout_s: float) -> bool:
        """Wait for the callbacks already handed to the pool; False if they outlast `timeout_s`.
        Only once nothing spins it any more, so that nothing new is handed over."""
        # The pool is rclpy's own attribute (Humble and 7.1 alike): nothing public waits on it.
        pool = self._executor
        waiter = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
        waiter.start()
        waiter.join(timeout_s)
        return not waiter.is_alive()


class SpinThread:
    """Spins the nodes added to it on `threads` pool threads, from construction to `stop()`."""

    def __init__(self, name: str, threads: int = 2, context: Context | None = None) -> None:
        self.executor = _DrainableExecutor(num_threads=threads, context=context)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"{name}-spin", daemon=True)
        self._thread.start()

    def add_node(self, node: Node) -> None:
        self.executor.add_node(node)

    def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> bool:
        """Stop spinning, wait for the running callbacks, shut the executor down; from any
        thread but the pool's. False if the callbacks did not end within `timeout_s`: then the
        executor is left as it is, and destroying a node may fail them."""
        self._stop.set()
        self.executor.wake()
        self._thread.join(timeout_s)
        if self._thread.is_alive() or not self.executor.drain(timeout_s):
            return False
        self.executor.shutdown(timeout_sec=0.0)
        return True

    def _spin(self) -> None:
        context = self.executor.context
        try:
            while not self._stop.is_set() and context.ok():
                self.executor.spin_once(timeout_sec=_POLL_S)
        except ExternalShutdownException:
            pass  # the context shut down under the spin
