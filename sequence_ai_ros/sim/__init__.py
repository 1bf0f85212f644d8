"""The simulated DROID Franka: arm dynamics, camera renderer and the `sim_robot` node."""
