"""ROS 2 side of sequence_ai: the lifecycle node that drives an arm with a cloud VLA model."""
