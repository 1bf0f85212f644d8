"""`sim_cartesian`: the Cartesian-commanded arm, its camera view and the Panda's kinematics."""
