"""Private: one run()/act() — the control loop, when requests start, observations taken off
the driving thread, hand-over, the run's statistics and status."""
