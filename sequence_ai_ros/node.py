"""The `sequence_ai` lifecycle node: cameras and joints in, joint commands out, `act` goals."""

from __future__ import annotations

import math
import os
import signal
import stat
import sys
import threading
from typing import Any

import rclpy
from action_msgs.msg import GoalStatusArray
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import qos_profile_action_status_default, qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from sensor_msgs.msg import CompressedImage, Image, JointState

import sequence_ai
from sequence_ai_interfaces.action import Act
from sequence_ai_ros import parameters
from sequence_ai_ros.arm import ArmGate, MotionRules
from sequence_ai_ros.commands import CommandMode, CommandPublisher
from sequence_ai_ros.diagnostics import HealthRecord, build_array
from sequence_ai_ros.goals import GoalRunner, ResultReason, StopCause, goal_problem
from sequence_ai_ros.model_fit import controller_for, fit_problems
from sequence_ai_ros.observations import ObservationCache
from sequence_ai_ros.parameters import NodeConfig

NODE_NAME = "sequence_ai"
# A running goal stops within one control period plus one interruptible wait.
_STOP_TIMEOUT_S = 5.0
_READY_POLL_S = 1.0
# Goal execution, preemption waits, cancels, sensors, lifecycle services and timers all need
# a thread of their own at the same time.
_EXECUTOR_THREADS = 8


class ConfigureError(RuntimeError):
    """A parameter, the key, the service or the model does not allow configuring."""


class SequenceAiNode(LifecycleNode):
    """Drives an arm with a cloud VLA model; see docs/node.md.

    Lifecycle callbacks run one at a time (the node's default, mutually exclusive group) and
    own every field. `_lock` guards the ones other threads read: `_accepting`, `_runner`,
    `_cache`, `_gate` (the goal, sensor, cancel, diagnostics and idle-hold callbacks).

    The readiness thread (from activate until the model is loaded) shares the goals' Policy:
    it reads only its `policy` argument, calling `Policy.ready()`, which the client makes safe
    from any thread beside a running goal (the Session keeps its state under its own lock,
    the transport's connection pool is thread-safe); it writes only `health` (own lock) and
    waits on `_ready_stop`. `_ready_thread` belongs to the lifecycle callbacks.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        parameters.declare(self)
        self.add_on_set_parameters_callback(
            parameters.validation_callback(self._parameter_values, self._configured_as)
        )
        self._sensor_group = ReentrantCallbackGroup()
        self._goal_group = ReentrantCallbackGroup()
        self._timer_group = MutuallyExclusiveCallbackGroup()
        self.health = HealthRecord()
        self._lock = threading.Lock()
        self._accepting = False
        self._runner: GoalRunner | None = None
        self._cache: ObservationCache | None = None
        # The only publisher of arm commands: it owns the CommandPublisher.
        self._gate: ArmGate | None = None
        self._policy: sequence_ai.Policy | None = None
        self._subscriptions: list[Subscription] = []
        self._ready_stop = threading.Event()
        self._ready_thread: threading.Thread | None = None
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
            callback_group=self._goal_group,
        )
        # rclpy marks a goal CANCELING after the cancel callback returns and tells no one but
        # this topic; the runner waits for that mark before it ends a goal canceled.
        self._goal_statuses = self.create_subscription(
            GoalStatusArray,
            "act/_action/status",
            self._on_goal_statuses,
            qos_profile_action_status_default,
            callback_group=self._sensor_group,
        )
        # Diagnostics run in every state so a failed configure is visible too.
        self._diagnostics = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diagnostics_timer = self.create_timer(
            1.0, self._publish_diagnostics, callback_group=self._timer_group
        )
        # The hold is one volatile message: a controller that (re)connects after a goal never
        # hears it, so an idle node sends it again (the gate decides whether it may). Made for
        # the node's life, at the rate configure reads; stopped until then.
        self._republish_timer = self.create_timer(
            1.0, self._republish_hold, callback_group=self._timer_group
        )
        self._republish_timer.cancel()

    # ----- lifecycle -----

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as exc:  # noqa: BLE001 - every failure is logged with its reason
            self._teardown()
            detail = str(exc) if isinstance(exc, ConfigureError) else f"{type(exc).__name__}: {exc}"
            problem = f"configure failed: {detail}"
            self.health.update(problem=problem)
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
        self._ready_stop.clear()
        self._ready_thread = threading.Thread(
            target=self._watch_readiness,
            args=(self._policy,),
            name="sequence_ai-readiness",
            daemon=True,
        )
        self._ready_thread.start()
        self.get_logger().info("active: accepting act goals")
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_goals(StopCause.DEACTIVATED)
        self.health.update(lifecycle="inactive")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._teardown()
        self.health.update(lifecycle="unconfigured")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.shut_down_now()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_goals(StopCause.IN_ERROR)
        self._teardown()
        self.health.update(lifecycle="unconfigured")
        return TransitionCallbackReturn.SUCCESS

    def shut_down_now(self) -> None:
        """End any goal with a hold, then release everything; for process exit and tests."""
        self._stop_goals(StopCause.SHUT_DOWN)
        self._teardown()
        self.health.update(lifecycle="finalized")

    # ----- configure -----

    def _configure(self) -> None:
        config = NodeConfig.from_node(self)
        problems = parameters.check_config(config)
        if problems:
            raise ConfigureError("; ".join(problems))
        api_key = self._read_api_key(config.api_key_file)
        try:
            with self._connect(config, api_key, control_hz=None) as probe:
                model = probe.spec()
        except (sequence_ai.SequencesError, ValueError) as exc:
            raise ConfigureError(f"{type(exc).__name__}: {exc}") from exc
        if model is None:
            raise ConfigureError(
                f"model {config.model!r} is not in the service's catalogue of act models"
            )
        problems = fit_problems(config, model)
        controller, _ = controller_for(config, model)
        if problems or controller is None:
            raise ConfigureError("; ".join(problems))
        if not model.control_hz or model.control_hz <= 0:
            raise ConfigureError(f"model {model.short_id} has no control_hz in its catalogue row")
        # Played at the catalogue's rate, the rate every step is checked at, whatever a chunk
        # says about itself.
        self._policy = self._connect(config, api_key, control_hz=model.control_hz)
        self.health.update(model=model.short_id)

        cache = ObservationCache(config.camera_views, config.joint_names, config.gripper_joint)
        for view, topic, transport in zip(
            config.camera_views, config.camera_topics, config.camera_transports
        ):
            msg_type = CompressedImage if transport == "compressed" else Image
            self._subscriptions.append(
                self.create_subscription(
                    msg_type,
                    topic,
                    lambda msg, view=view: cache.store_image(view, msg),
                    qos_profile_sensor_data,
                    callback_group=self._sensor_group,
                )
            )
        self._subscriptions.append(
            self.create_subscription(
                JointState,
                config.joint_states_topic,
                cache.store_joint_state,
                qos_profile_sensor_data,
                callback_group=self._sensor_group,
            )
        )
        # The catalogue's period, fixed here: the step check and trajectory timing use it.
        period_s = 1.0 / model.control_hz
        gate = ArmGate(
            CommandPublisher(
                self,
                joint_names=config.joint_names,
                interface=config.command_interface,
                command_topic=config.command_topic,
                command_type=config.command_type,
                gripper_topic=config.gripper_command_topic,
                period_s=period_s,
            ),
            cache,
            joints=len(config.joint_names),
            period_s=period_s,
            log=self.get_logger(),
            mode=CommandMode(parameters.command_mode(config)),
        )
        runner = GoalRunner(
            policy=self._policy,
            model=model,
            controller=controller,
            cache=cache,
            gate=gate,
            health=self.health,
            live_config=lambda: NodeConfig.from_node(self),
            log=self.get_logger(),
        )
        with self._lock:
            self._cache, self._gate, self._runner = cache, gate, runner
        if config.hold_republish_hz > 0:
            self._republish_timer.timer_period_ns = round(1e9 / config.hold_republish_hz)
            self._republish_timer.reset()

    def _connect(
        self, config: NodeConfig, api_key: str | None, control_hz: float | None
    ) -> sequence_ai.Policy:
        return sequence_ai.connect(
            config.model,
            api_key=api_key,
            base_url=config.base_url or None,
            validate=config.validate_mode,
            control_hz=control_hz,
            startup_timeout_s=config.startup_timeout_s,
            on_warming=self._on_warming,
        )

    def _read_api_key(self, path: str) -> str | None:
        """The key from api_key_file; None lets the client read SEQUENCES_API_KEY.

        Like ssh with a private key, a file that group or others may access is refused.
        """
        if not path:
            return None
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as handle:
                mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
                if mode & 0o077:
                    raise ConfigureError(
                        f"api_key_file {path!r} is accessible by group or others (mode "
                        f"{mode:04o}); the key must be private to its owner: chmod 600 {path}"
                    )
                key = handle.read().strip()
        except OSError as exc:
            raise ConfigureError(f"api_key_file {path!r} cannot be read: {exc.strerror}") from exc
        if not key:
            raise ConfigureError(f"api_key_file {path!r} is empty; expected the API key")
        return key

    def _teardown(self) -> None:
        with self._lock:
            self._accepting = False
            gate = self._gate
            self._runner = self._cache = self._gate = None
        self._republish_timer.cancel()
        self._stop_readiness()
        for subscription in self._subscriptions:
            self.destroy_subscription(subscription)
        self._subscriptions = []
        if gate is not None:
            gate.destroy()
        if self._policy is not None:
            self._policy.close()
            self._policy = None

    # ----- goals -----

    def _on_goal(self, goal: Act.Goal) -> GoalResponse:
        with self._lock:
            accepting = self._accepting and self._runner is not None
        if not accepting:
            state = self.health.snapshot().lifecycle
            self.get_logger().warning(
                f"act goal {goal.instruction!r} rejected: the node is {state}; goals are "
                "accepted only while it is active (configure, then activate)"
            )
            return GoalResponse.REJECT
        problem = goal_problem(goal)
        if problem:
            self.get_logger().warning(f"act goal {goal.instruction!r} rejected: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        with self._lock:
            runner = self._runner
        if runner is not None:
            runner.accept(handle)
        else:
            # Deactivated between the goal's acceptance and this call: it ends unstarted.
            handle.execute()

    def _execute(self, handle: ServerGoalHandle) -> Act.Result:
        with self._lock:
            runner = self._runner
        if runner is not None:
            return runner.execute(handle)
        handle.abort()
        return Act.Result(
            reason=ResultReason.INTERRUPTED.value,
            stopped_early=True,
            max_seam_jump=math.nan,
            message="the node stopped being active before the goal started",
        )

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        with self._lock:
            runner = self._runner
        if runner is not None:
            runner.cancel(handle)
        return CancelResponse.ACCEPT

    def _on_goal_statuses(self, _msg: GoalStatusArray) -> None:
        with self._lock:
            runner = self._runner
        if runner is not None:
            runner.goal_states_changed()

    def _stop_goals(self, cause: StopCause) -> None:
        with self._lock:
            self._accepting = False
            runner = self._runner
        self._stop_readiness()
        if runner is not None and not runner.stop_all(cause, _STOP_TIMEOUT_S):
            self.get_logger().error(f"a goal did not stop within {_STOP_TIMEOUT_S:g} s")

    def _on_warming(self, waited_s: float, eta_s: float | None) -> None:
        self.health.update(ready=False, warming_eta_s=eta_s)
        with self._lock:
            runner = self._runner
        if runner is not None and eta_s is not None:
            runner.set_warming(max(0.0, eta_s - waited_s))

    # ----- readiness and diagnostics -----

    def _watch_readiness(self, policy: sequence_ai.Policy | None) -> None:
        """Bring the model up in the background once active; progress goes to diagnostics.

        The readiness thread; it may run beside a goal on the same Policy (see the class).
        """
        last_problem = ""
        while policy is not None and not self._ready_stop.is_set():
            try:
                ready, eta_s = policy.ready()
            except sequence_ai.SequencesError as exc:
                self.health.update(ready=None, readiness_error=f"{type(exc).__name__}: {exc}")
                # Once per distinct failure: a service that stays down must not flood the log.
                if str(exc) != last_problem:
                    last_problem = str(exc)
                    self.get_logger().warning(f"readiness check failed: {exc}")
            else:
                self.health.update(
                    readiness_error="", ready=bool(ready), warming_eta_s=None if ready else eta_s
                )
                if ready:
                    return
            self._ready_stop.wait(_READY_POLL_S)

    def _stop_readiness(self) -> None:
        self._ready_stop.set()
        thread, self._ready_thread = self._ready_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_STOP_TIMEOUT_S)

    def _republish_hold(self) -> None:
        with self._lock:
            gate = self._gate if self._accepting else None
        if gate is None:
            return
        config = NodeConfig.from_node(self)
        if config.hold_between_goals:
            gate.republish_hold(MotionRules.from_config(config))

    def _publish_diagnostics(self) -> None:
        with self._lock:
            cache, gate = self._cache, self._gate
        self._diagnostics.publish(
            build_array(
                self.health,
                node_name=self.get_fully_qualified_name(),
                ages=cache.ages() if cache is not None else {},
                missing=cache.missing() if cache is not None else [],
                stamp_skew_s=cache.stamp_skew_s() if cache is not None else None,
                command_rate_hz=gate.command_rate_hz() if gate is not None else 0.0,
                stamp=self.get_clock().now().to_msg(),
            )
        )

    def _configured_as(self) -> str | None:
        """The lifecycle state while parameters read at configure are in use, else None."""
        state = self.health.snapshot().lifecycle
        return state if state in ("inactive", "active") else None

    def _parameter_values(self) -> dict[str, Any]:
        return {name: self.get_parameter(name).value for name in parameters.SPECS}


def main(args: list[str] | None = None) -> None:
    """`ros2 run sequence_ai_ros sequence_ai_node --ros-args --params-file droid.yaml`."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    # SIGINT/SIGTERM end the spin in this thread while the context still works, so the arm
    # can be held before the node goes away.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    node = SequenceAiNode()
    executor = MultiThreadedExecutor(num_threads=_EXECUTOR_THREADS)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.shut_down_now()
        executor.shutdown(timeout_sec=_STOP_TIMEOUT_S)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main(sys.argv)
