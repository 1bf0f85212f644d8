"""Robots described as data: one folder per robot (``franka_droid/robot.json`` and its README),
read by the node's configuration, the simulator and the gateway; no code of its own."""
