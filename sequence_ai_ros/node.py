"""The `sequence_ai` lifecycle node: cameras and joints in, joint commands out, `act` goals."""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

import rclpy
import rclpy.logging
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.signals import SignalHandlerOptions

from sequence_ai_interfaces.action import Act
from sequence_ai_ros.bringup.configuration import Configured, ConfigureError, configure
from sequence_ai_ros.bringup.diagnostics_output import DiagnosticsOutput
from sequence_ai_ros.bringup.readiness import Readiness
from sequence_ai_ros.core.health import HealthRecord
from sequence_ai_ros.goals.client_watch import ClientWatch
from sequence_ai_ros.goals.goal_state import goal_problem
from sequence_ai_ros.goals.instruction import shown
from sequence_ai_ros.goals.results import unstarted
from sequence_ai_ros.goals.runner import GoalRunner
from sequence_ai_ros.goals.stop_policy import StopCause
from sequence_ai_ros.inputs.motion_enable import Blocked, MotionEnable
from sequence_ai_ros.inputs.sent_images import serve_sent_images
from sequence_ai_ros.params import config_checks, spec_table
from sequence_ai_ros.plumbing.lifecycle_guard import ConfigureProbe, guard_change_state
from sequence_ai_ros.safety.gate import MotionRules
from sequence_ai_ros.safety.joint_limits_file import LimitsFile

NODE_NAME = "sequence_ai"
# A running goal stops within one control period plus one interruptible wait.
_STOP_TIMEOUT_S = 5.0
# main() looks at its stop flag at least this often (a signal cannot wake rcl's wait).
_SIGNAL_POLL_S = 0.2
# How long a thread that wants the GIL waits before the holder must hand it over (Python's
# default is 5 ms). The driving thread takes it several times a step, behind request and sensor
# threads; each wait adds to the step's lateness (bench section 6).
_GIL_SWITCH_S = 0.001
# After the last goal's execute returned, the executor sends the result responses rclpy
# queued for it; this bounds that last spin before the node is destroyed.
_RESULT_FLUSH_S = 0.3
# rclpy takes one goal, one cancel and one result request per executor wake, and its default
# service depth of 10 drops the rest of a burst (50 goals in a second, each with a result
# request): these queues hold a burst until it is taken.
ACTION_SERVICE_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)


class SequenceAiNode(LifecycleNode):
    """Drives an arm with a cloud VLA model; see docs/node.md ("Threads").

    Spun by one `SingleThreadedExecutor` (main()): its callbacks never block on a goal or an
    image, and on the network only in configure's catalogue probe, bounded by
    configure_timeout_s. Lifecycle callbacks run on that thread and own every field; `_lock`
    guards the ones other threads read: `_accepting`, `_configured` (bringup/configuration.py),
    `_open_executes` (the goal, cancel, diagnostics and idle-hold callbacks, the driving
    thread's `_wake`). Entities the executor takes from (the command publishers) are created and
    destroyed only by lifecycle callbacks, on the executor's thread, or by `destroy_node()` once
    nothing spins the node. Sensors live on nodes of their own: joint states on a small
    executor's thread (joint_feed.py), camera subscriptions on a node nothing spins
    (camera_feed.py). The readiness thread is readiness.py's, the enable watcher motion_enable.py's.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        guard_change_state(self, self.get_logger().warning)
        self._configuring = ConfigureProbe()
        spec_table.declare(self)
        # joint_limits_file's table: read off this thread, never waited on by a goal.
        self._limits_file = LimitsFile(
            self.get_logger().warning, lambda: self.get_parameter("joint_limits_file").value
        )
        self.add_on_set_parameters_callback(config_checks.validation_callback(
            self._parameter_values, self._configured_as, self._limits_file.check
        ))
        self.health = HealthRecord()
        # Lock order: a leaf (nothing is taken under it).
        self._lock = threading.Lock()
        self._accepting = False
        self._configured: Configured | None = None
        # Destroyers of entities a teardown off the executor's thread had to leave; run by the
        # next lifecycle callback (or left to destroy_node()).
        self._orphans: list[Callable[[], object]] = []
        # Goals whose `execute` has not returned yet: the executor must still send results.
        self._open_executes = 0
        self._readiness = Readiness(self.health, self.get_logger(), _STOP_TIMEOUT_S)
        # The driving thread triggers it when a goal ends: the executor wakes and resumes the
        # goal's `execute`, which returns the result to rclpy.
        self._wake_guard = self.create_guard_condition(_nothing)
        # The act server lives as long as the node, so a goal to a node that is not active is
        # rejected at once (with the reason in the log) rather than waiting for a server.
        self._action_server = ActionServer(
            self,
            Act,
            "act",
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            goal_service_qos_profile=ACTION_SERVICE_QOS,
            result_service_qos_profile=ACTION_SERVICE_QOS,
            cancel_service_qos_profile=ACTION_SERVICE_QOS,
        )
        serve_sent_images(self, lambda: None if (r := self._runner()) is None else r.images)
        # The safety net for a goal whose action client is gone (end_goal_without_client_s).
        # Looked at by the overdue timer, once a second: no timer of its own wakes the idle node.
        feedback_topic = f"{self.resolve_topic_name('act')}/_action/feedback"
        self._goal_clients = ClientWatch(
            lambda: (
                tuple(info.endpoint_gid)
                for info in self.get_subscriptions_info_by_topic(feedback_topic)
            ),
            lambda: float(self.get_parameter("end_goal_without_client_s").value),
            self.get_logger().warning,
        )
        # ~/enable and the heartbeat deadman: a running goal stops held when motion is blocked.
        self._enable = MotionEnable(self, self._stop_blocked)
        # In every state, so a failed configure or one in progress is visible too.
        self._diagnostics = DiagnosticsOutput(
            self, self.health, self._configured_parts, self._enable.state
        )
        # Its own timer, not the diagnostics': goals waiting behind a run that does not stop
        # end BUSY after PREEMPT_WAIT_S (goals/runner.py).
        # (rclpy's node keeps the timer.) It also ends goals whose action client is gone.
        self.create_timer(1.0, self._end_overdue)
        # The hold is one volatile message: a controller that (re)connects after a goal never
        # hears it, so an idle node sends it again (the gate decides whether it may). Made for
        # the node's life, at the rate configure reads; stopped until then.
        self._republish_timer = self.create_timer(1.0, self._republish_hold)
        self._republish_timer.cancel()

    # ----- lifecycle -----

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        # The whole transition: a shutdown meanwhile waits for it, then has the last word.
        with self._configuring.running():
            self.health.update(lifecycle="configuring")
            try:
                self._configure()
            except Exception as exc:  # noqa: BLE001 - every failure is logged with its reason
                self._teardown(destroy=True)
                detail = str(exc) if isinstance(exc, ConfigureError) else (
                    f"{type(exc).__name__}: {exc}")
                problem = f"configure failed: {detail}"
                self.health.update(problem=problem, lifecycle="unconfigured")
                self.get_logger().error(problem)
                return TransitionCallbackReturn.FAILURE
            self.health.update(problem="", lifecycle="inactive")
        self.get_logger().info(f"configured for model {self.health.snapshot().model}")
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_activate(state)
        with self._lock:
            self._accepting = True
        self.health.update(lifecycle="active")
        with self._lock:
            configured = self._configured
        self._readiness.start(None if configured is None else configured.policy)
        self.get_logger().info("active: accepting act goals")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_goals(StopCause.DEACTIVATED)
        self.health.update(lifecycle="inactive")
        self.get_logger().info("inactive: act goals are rejected until activated again")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown(destroy=True)
        self.health.update(lifecycle="unconfigured")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        # The goal ends held on the driving thread; its result leaves when this callback has
        # returned and the executor resumes the goal's execute (the act server stays).
        self._stop_goals(StopCause.SHUT_DOWN)
        self._teardown(destroy=True)
        self.health.update(lifecycle="finalized")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_goals(StopCause.IN_ERROR)
        self._teardown(destroy=True)
        self.health.update(lifecycle="unconfigured")
        return TransitionCallbackReturn.SUCCESS

    def shut_down_now(self) -> None:
        """End any goal with a hold and release the configuration; for process exit and tests.

        Safe from any thread, also while an executor spins the node: what an executor takes
        from is left to `destroy_node()` (gated off meanwhile)."""
        self._configuring.abort(_STOP_TIMEOUT_S)
        self._stop_goals(StopCause.SHUT_DOWN)
        self._teardown(destroy=False)
        self.health.update(lifecycle="finalized")

    def destroy_node(self) -> None:
        self._diagnostics.destroy()
        super().destroy_node()

    def finish_goals(self, spin_once: Callable[[float], None], timeout_s: float) -> bool:
        """End every goal held and spin (`spin_once(timeout_s)`, on the thread that spins the
        node) until their results have been sent; for process exit. False if one was not."""
        self._stop_goals(StopCause.SHUT_DOWN)
        deadline = time.monotonic() + timeout_s
        while self._executes_open() and time.monotonic() < deadline:
            spin_once(0.05)
        # rclpy sends a result from a task it queues when execute returns.
        flush_until = min(deadline, time.monotonic() + _RESULT_FLUSH_S)
        while time.monotonic() < flush_until:
            spin_once(0.02)
        return not self._executes_open()

    def _executes_open(self) -> bool:
        with self._lock:
            return self._open_executes > 0

    # ----- configure -----

    def _configure(self) -> None:
        self._destroy_orphans()
        # joint_names may have changed since construction: their joint_limits.* too.
        spec_table.declare_joint_limits(self, list(self.get_parameter("joint_names").value))
        # Read within configure_timeout_s on a thread of its own; a bad file fails configure.
        self._limits_file.load(self.get_parameter("configure_timeout_s").value)
        config = spec_table.read_config(self, self._limits_file)
        configured = configure(
            self, config, health=self.health, on_warming=self._on_warming,
            probe=self._configuring,
            wake=self._wake_guard.trigger,
            live_config=lambda: spec_table.read_config(self, self._limits_file),
        )
        with self._lock:
            self._configured = configured
        # Changes to the file are read on the watch's thread, and a bad edit keeps the limits.
        self._limits_file.watch()
        # On the executor's thread (a lifecycle callback), where cancel and reset are safe.
        if config.hold_republish_hz > 0:
            self._republish_timer.timer_period_ns = round(1e9 / config.hold_republish_hz)
            self._republish_timer.reset()
        else:
            self._republish_timer.cancel()
        # Looked at twice a control period: a missing heartbeat stops a goal within one.
        topic = self.resolve_topic_name(config.enable_topic) if config.enable_topic else ""
        self._enable.watch(topic, config.enable_timeout_s, configured.period_s / 2)

    def _teardown(self, *, destroy: bool) -> None:
        """Release the configuration. `destroy`: also destroy the entities an executor takes
        from — only on the thread that spins the node (a lifecycle callback), else they are
        left, gated off, to `destroy_node()`."""
        with self._lock:
            self._accepting = False
            parts, self._configured = self._configured, None
        # The republish timer is left running: teardown may run off the executor's thread, where
        # a cancel can kill the executor on rclpy 7.1 (rclpy#1485); unconfigured, it sends nothing.
        self._limits_file.stop()
        self._orphans.append(self._enable.stop_watching())
        self._readiness.stop()
        if parts is not None:
            parts.runner.close(_STOP_TIMEOUT_S)
            # The last goals' episode files, still being closed on their writer threads.
            parts.episodes.close(_STOP_TIMEOUT_S)
            parts.cameras.destroy()
            # After the runner: a goal's last hold is checked against fresh joints (or pose).
            parts.joints.destroy()
            if parts.poses is not None:
                parts.poses.destroy()
            self._orphans.append(parts.gate.destroy)
        if destroy:
            self._destroy_orphans()
        if parts is not None:
            parts.policy.close()

    def _destroy_orphans(self) -> None:
        orphans, self._orphans = self._orphans, []
        for destroy in orphans:
            destroy()

    # ----- goals -----

    def _on_goal(self, goal: Act.Goal) -> GoalResponse:
        with self._lock:
            accepting = self._accepting and self._configured is not None
        if not accepting:
            state = self.health.snapshot().lifecycle
            self.get_logger().warning(
                f"act goal {shown(goal.instruction)} rejected: the node is {state}; goals are "
                "accepted only while it is active (configure, then activate)"
            )
            return GoalResponse.REJECT
        blocked = self._enable.blocked()
        problem = blocked[1] if blocked is not None else goal_problem(
            goal, spec_table.read_config(self, self._limits_file).max_instruction_chars
        )
        if not problem and (runner := self._runner()) is not None:
            problem = runner.handover_problem(goal)
        if problem:
            self.get_logger().warning(f"act goal {shown(goal.instruction)} rejected: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        self._goal_clients.accepted(bytes(handle.goal_id.uuid))
        runner = self._runner()
        if runner is not None:
            runner.accept(handle)
        else:
            # Deactivated between the goal's acceptance and this call: it ends unstarted.
            handle.execute()

    async def _execute(self, handle: ServerGoalHandle) -> Act.Result:
        """Await the goal's end on the driving thread; the executor's thread never blocks."""
        with self._lock:
            runner = None if self._configured is None else self._configured.runner
            if runner is not None:
                self._open_executes += 1
        if runner is None:
            # Deactivated between acceptance and this call: the stop policy's ending, unstarted.
            return unstarted(StopCause.DEACTIVATED).conclude(handle)
        try:
            ended = await runner.result_of(handle)
            return ended.conclude(handle)
        finally:
            with self._lock:
                self._open_executes -= 1

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        runner = self._runner()
        if runner is not None:
            runner.cancel(handle)
        return CancelResponse.ACCEPT

    def _stop_goals(self, cause: StopCause) -> None:
        with self._lock:
            self._accepting = False
            runner = None if self._configured is None else self._configured.runner
        self._readiness.stop()
        if runner is not None and not runner.stop_all(cause, _STOP_TIMEOUT_S):
            self.get_logger().error(f"a goal did not stop within {_STOP_TIMEOUT_S:g} s")

    def _stop_blocked(self, cause: Blocked) -> None:
        """Motion is blocked: end every goal (without waiting: called from the service, the
        heartbeat callback and the enable watcher), each held, with the cause's ending."""
        runner = self._runner()
        if runner is not None:
            runner.stop_all(StopCause(cause.value), 0.0)

    def _on_warming(self, waited_s: float, eta_s: float | None) -> None:
        self.health.update(ready=False, warming_eta_s=eta_s)
        runner = self._runner()
        if runner is not None and eta_s is not None:
            runner.set_warming(max(0.0, eta_s - waited_s))

    # ----- readiness and diagnostics -----

    def _republish_hold(self) -> None:
        with self._lock:
            configured = self._configured if self._accepting else None
        if configured is None:
            return
        gate = configured.gate
        # joint_limits_file's table in force: nothing is read here.
        config = spec_table.read_config(self, self._limits_file)
        if not config.hold_between_goals:
            return
        try:
            rules = MotionRules.from_config(config)
        except ValueError as exc:
            # Limits changed into nonsense since configure (a joint_limits_file edited): no
            # hold is sent on them; a goal would end with the same reason.
            self.get_logger().warning(
                f"the idle hold is not republished: {exc}", throttle_duration_sec=60.0
            )
            return
        gate.republish_hold(rules)

    def _runner(self) -> GoalRunner | None:
        with self._lock:
            return None if self._configured is None else self._configured.runner

    def _end_overdue(self) -> None:
        runner = self._runner()
        if runner is not None:
            runner.end_overdue()
        self._goal_clients.end_orphans(runner)

    def _configured_parts(self) -> Configured | None:
        with self._lock:
            return self._configured

    def _configured_as(self) -> str | None:
        """The lifecycle state while parameters read at configure are in use, else None."""
        state = self.health.snapshot().lifecycle
        return state if state in ("inactive", "active") else None

    def _parameter_values(self) -> dict[str, Any]:
        return {name: self.get_parameter(name).value for name in spec_table.SPECS}


def _nothing() -> None:
    """The wake guard's callback: waking the executor is all it is for."""


def _answer_goals(
    node: SequenceAiNode | None, executor: SingleThreadedExecutor | None, logger: Any
) -> None:
    """After a callback raised out of the spin: end every goal held and send its result."""
    if node is None or executor is None:
        return
    try:
        spin_once = executor.spin_once
        if not node.finish_goals(lambda t: spin_once(timeout_sec=t), _STOP_TIMEOUT_S):
            logger.error("a goal's result could not be sent before exit")
    except BaseException as exc:  # noqa: BLE001 - exiting anyway; say why
        logger.fatal(f"ending the goals failed: {type(exc).__name__}: {exc}")


def main(args: list[str] | None = None) -> int:
    """`ros2 run sequence_ai_ros sequence_ai_node --ros-args --params-file droid.yaml`.

    Exit status 0 after SIGINT/SIGTERM, 1 when anything raised (logged with its traceback).
    """
    # rclpy's own handler would shut the context down before the arm is held: a signal only
    # ends the spin, then running goals end held and their results are sent (bounded by
    # _STOP_TIMEOUT_S). Further signals — a terminal's Ctrl-C reaches the whole process group,
    # then launch forwards its own SIGINT and later SIGTERM — change nothing.
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sys.setswitchinterval(_GIL_SWITCH_S)
    logger: Any = rclpy.logging.get_logger(NODE_NAME)
    executor: SingleThreadedExecutor | None = None
    node: SequenceAiNode | None = None
    status = 0
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        executor = SingleThreadedExecutor()
        node = SequenceAiNode()
        logger = node.get_logger()
        executor.add_node(node)
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=_SIGNAL_POLL_S)
        spin_once = executor.spin_once
        if not node.finish_goals(lambda t: spin_once(timeout_sec=t), _STOP_TIMEOUT_S):
            logger.error("a goal's result could not be sent before exit")
    except ExternalShutdownException:
        pass
    except BaseException as exc:  # noqa: BLE001 - logged, and the exit status says so
        status = 1
        logger.fatal(f"the node failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        _answer_goals(node, executor, logger)
    finally:
        try:
            if node is not None:
                node.shut_down_now()
                if executor is not None:
                    executor.remove_node(node)
                node.destroy_node()
        except BaseException as exc:  # noqa: BLE001 - exiting anyway; say why
            status = 1
            logger.fatal(f"shutting the node down failed: {type(exc).__name__}: {exc}")
        if executor is not None:
            executor.shutdown(timeout_sec=_STOP_TIMEOUT_S)
        rclpy.try_shutdown()
        # Exiting: interpreter shutdown puts the default handlers back (a signal then kills the
        # process, status -2 or -15) — but leaves an ignored signal ignored.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
