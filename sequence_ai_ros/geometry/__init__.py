"""The command frame (coordinate frames only; the pose math is in core/)."""
