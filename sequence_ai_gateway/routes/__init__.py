"""One router per resource: health, models, ready, act, and the loopback control endpoints."""
