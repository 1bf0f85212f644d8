"""`sim_bimanual`: two 6-joint arms and two grippers behind one joint state."""
