"""The ground floor: the node's plain shared values (configuration, command kinds, readings,
freshness, poses, joint limits, the chunk trajectory, the health record). Imports no ROS and no
other room of the node."""
