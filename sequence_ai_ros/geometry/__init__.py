"""Pose math and the command frame (coordinate frames only)."""
