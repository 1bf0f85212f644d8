"""Bring-up: configure, readiness, lifecycle services, the side executor, diagnostics and the
API key source."""
