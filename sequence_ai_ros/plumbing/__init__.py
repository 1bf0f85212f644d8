"""ROS plumbing: executors and spin threads, lifecycle service calls and guards, the `act`
action's client side. Imports no other room of the node but `core/`."""
