"""Benchmarks of the client loop, the gateway round trip and the ROS node (``make bench``)."""
