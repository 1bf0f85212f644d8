"""`sim_robot`: the joint-commanded arm, its physics world, task, trajectory controller and
parameters."""
