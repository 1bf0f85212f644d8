"""Evaluation: seeded, interleaved trials per condition, judged, with intervals and a report."""
