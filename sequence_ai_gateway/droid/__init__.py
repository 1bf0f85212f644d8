"""The simulated DROID robot: the Panda's kinematics, the three cameras' calibration and the
end-effector pose arithmetic."""
