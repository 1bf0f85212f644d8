"""`make demo`, its plot, the launcher for machines without `ros2 launch`, the planner helper."""
