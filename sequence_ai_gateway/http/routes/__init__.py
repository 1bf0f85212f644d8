"""One router per resource: health, models, ready, act, train, and the loopback control
endpoints."""
