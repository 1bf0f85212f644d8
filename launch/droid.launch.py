"""Start the sequence_ai lifecycle node for a DROID Franka; `sim:=true` adds a simulated one.

    ros2 launch sequence_ai_ros droid.launch.py                       # real robot, hosted API
    ros2 launch sequence_ai_ros droid.launch.py sim:=true             # sim arm + local gateway
    ros2 launch sequence_ai_ros droid.launch.py sim:=true namespace:=robot2   # a second one
    ros2 launch sequence_ai_ros droid.launch.py controller:=joint_trajectory  # chunk trajectories
    ros2 launch sequence_ai_ros droid.launch.py sim:=true model:=cosmos3-edge-policy-droid

Arguments: model, base_url, namespace, sim (default false), autostart (default true:
configure, then activate), controller (forward: config/droid.yaml; joint_trajectory:
config/droid_jtc.yaml), params_file. A model other than pi05-droid adds its overlay
(config/<model>.yaml, loaded after the controller's file) or brings its robot's own file;
params_file:= replaces them all. The processes come from `sequence_ai_ros.params.launch`, which
`python -m sequence_ai_lab.demo.launcher` (for machines without `ros2 launch`) reads too: with
sim:=true and no base_url, each launch starts a local gateway of its own on a free port with a
random key, and its node uses both.
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

from sequence_ai_ros.params import launch as node_launch
from sequence_ai_ros.params.launch import GATEWAY_READY_PREFIX, PACKAGE

PARAMS_FILE = "params_file"


def _change_state(node: LifecycleNode, transition: int) -> EmitEvent:
    return EmitEvent(
        event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition)
    )


def _actions(context: LaunchContext) -> list[Action]:
    launch = node_launch.launch_for(
        {name: LaunchConfiguration(name).perform(context) for name in node_launch.ARGUMENTS}
    )
    # params_file:= one file (a copy of config/droid.yaml with `record: goals`, say) instead of
    # all the launch's files, as the launcher for machines without ros2 launch takes it.
    given = LaunchConfiguration(PARAMS_FILE).perform(context)
    share = get_package_share_directory(PACKAGE)
    params_files = [given] if given else [os.path.join(share, f) for f in launch.params_files]
    actions: list[Action] = []
    gateway: ExecuteProcess | None = None
    node: LifecycleNode | None = None
    for process in launch.processes:
        if not process.node_name:
            executable = os.path.join(get_package_prefix(PACKAGE), "lib", PACKAGE,
                                      process.executable)
            gateway = ExecuteProcess(
                cmd=[executable, *process.arguments],
                name=process.label,
                additional_env=process.env,
                output="screen",
            )
            actions.append(gateway)
            continue
        parameters: list[str | dict[str, str]] = list(params_files) if process.params_file else []
        if process.parameters:
            parameters.append(dict(process.parameters))
        action = (LifecycleNode if process.lifecycle else Node)(
            package=PACKAGE,
            executable=process.executable,
            name=process.node_name,
            namespace=launch.namespace,  # Humble's LifecycleNode requires it, even when empty
            parameters=parameters,
            additional_env=process.env,
            output="screen",
        )
        if process.lifecycle:
            node = action
        actions.append(action)
    if node is None or not launch.autostart:
        return actions
    # Configure now (or once the local gateway serves); activate once the node reports
    # `inactive` after configuring. A failed configure stops here, and a later deactivate does
    # not re-activate the node.
    actions.append(
        RegisterEventHandler(
            OnStateTransition(
                target_lifecycle_node=node,
                start_state="configuring",
                goal_state="inactive",
                entities=[_change_state(node, Transition.TRANSITION_ACTIVATE)],
            )
        )
    )
    configure = _change_state(node, Transition.TRANSITION_CONFIGURE)
    if gateway is None:
        actions.append(configure)
    else:

        def when_serving(event: ProcessIO) -> list[Action] | None:
            return [configure] if GATEWAY_READY_PREFIX.encode() in event.text else None

        actions.append(
            RegisterEventHandler(OnProcessIO(target_action=gateway, on_stdout=when_serving))
        )
    return actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                name, default_value=argument.default, description=argument.description
            )
            for name, argument in node_launch.ARGUMENTS.items()
        ]
        + [
            DeclareLaunchArgument(
                PARAMS_FILE, default_value="",
                description="parameters file of the node, instead of all the model's; empty = "
                "the controller's config file, then the model's overlay (config/<model>.yaml)",
            )
        ]
        + [OpaqueFunction(function=_actions)]
    )
