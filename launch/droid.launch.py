"""Start the sequence_ai lifecycle node for a DROID Franka; `sim:=true` adds a simulated one.

    ros2 launch sequence_ai_ros droid.launch.py                       # real robot, hosted API
    ros2 launch sequence_ai_ros droid.launch.py sim:=true             # sim arm + local gateway
    ros2 launch sequence_ai_ros droid.launch.py namespace:=robot2 \
        sim:=true base_url:=http://127.0.0.1:8787                     # a second robot

Arguments: model, base_url, namespace, sim (default false), autostart (default true:
configure, then activate). With sim:=true and no base_url, a local gateway is started on
127.0.0.1:8787 and the node uses it with the gateway's development key; a given base_url is used
as is (a second simulated robot shares the first one's gateway that way). Where `ros2 launch` is
not available, `python -m sequence_ai_ros.launcher` takes the same arguments.
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_prefix, get_package_share_directory
from launch.action import Action
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessIO
from launch.events import matches_action
from launch.events.process import ProcessIO
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

from sequence_ai_gateway import DEVELOPMENT_KEY

PACKAGE = "sequence_ai_ros"
LOCAL_GATEWAY_URL = "http://127.0.0.1:8787"


def _true(text: str) -> bool:
    return text.strip().lower() in ("true", "1", "yes", "on")


def _actions(context: LaunchContext) -> list[Action]:
    model = LaunchConfiguration("model").perform(context)
    base_url = LaunchConfiguration("base_url").perform(context)
    namespace = LaunchConfiguration("namespace").perform(context)
    sim = _true(LaunchConfiguration("sim").perform(context))
    autostart = _true(LaunchConfiguration("autostart").perform(context))
    params_file = os.path.join(get_package_share_directory(PACKAGE), "config", "droid.yaml")

    actions: list[Action] = []
    env: dict[str, str] = {}
    gateway_process: ExecuteProcess | None = None
    if sim:
        actions.append(
            Node(
                package=PACKAGE,
                executable="sim_robot",
                name="sim_robot",
                namespace=namespace,
                output="screen",
            )
        )
        if not base_url:
            base_url = LOCAL_GATEWAY_URL
            # The local gateway's development key: a real key never goes to the simulation.
            env["SEQUENCES_API_KEY"] = DEVELOPMENT_KEY
            gateway = os.path.join(
                get_package_prefix(PACKAGE), "lib", PACKAGE, "sequence-ai-gateway"
            )
            gateway_process = ExecuteProcess(
                cmd=[gateway, "--host", "127.0.0.1", "--port", "8787"],
                name="sequence_ai_gateway",
                output="screen",
            )
            actions.append(gateway_process)

    overrides: dict[str, str] = {"model": model}
    if base_url:
        overrides["base_url"] = base_url
    node = LifecycleNode(
        package=PACKAGE,
        executable="sequence_ai_node",
        name="sequence_ai",
        namespace=namespace,  # Humble's LifecycleNode requires it, even when empty
        parameters=[params_file, overrides],
        additional_env=env,
        output="screen",
    )
    actions.append(node)
    if autostart:
        # configure now; activate once the node reports `inactive` (a failed configure stops here).
        actions.append(
            RegisterEventHandler(
                OnStateTransition(
                    target_lifecycle_node=node,
                    # Only after configuring: a later deactivate must not re-activate the node.
                    start_state="configuring",
                    goal_state="inactive",
                    entities=[
                        EmitEvent(
                            event=ChangeState(
                                lifecycle_node_matcher=matches_action(node),
                                transition_id=Transition.TRANSITION_ACTIVATE,
                            )
                        )
                    ],
                )
            )
        )
        configure = EmitEvent(
            event=ChangeState(
                lifecycle_node_matcher=matches_action(node),
                transition_id=Transition.TRANSITION_CONFIGURE,
            )
        )
        if gateway_process is None:
            actions.append(configure)
        else:
            # Configure connects to the service: wait until the local gateway says it serves.
            def when_serving(event: ProcessIO) -> list[Action] | None:
                return [configure] if b"SEQUENCES_BASE_URL=" in event.text else None

            actions.append(
                RegisterEventHandler(
                    OnProcessIO(target_action=gateway_process, on_stdout=when_serving)
                )
            )
    return actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "model", default_value="pi05-droid", description="catalogue model id"
            ),
            DeclareLaunchArgument(
                "base_url",
                default_value="",
                description="API base URL; empty = environment / hosted API "
                "(sim:=true: a local gateway)",
            ),
            DeclareLaunchArgument(
                "namespace",
                default_value="",
                description="namespace of the node and its topics (one per robot)",
            ),
            DeclareLaunchArgument(
                "sim",
                default_value="false",
                description="also start sim_robot (and a local gateway when base_url is empty)",
            ),
            DeclareLaunchArgument(
                "autostart",
                default_value="true",
                description="configure and activate the node at start",
            ),
            OpaqueFunction(function=_actions),
        ]
    )
