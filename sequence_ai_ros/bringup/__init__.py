"""Bring-up: configure, readiness, diagnostics as messages and their output."""
