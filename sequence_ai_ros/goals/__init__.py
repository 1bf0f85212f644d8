"""The `act` goal state machine: the runner, each goal's state, the driver interface and its
driving thread, results, feedback, take-over and the stop policy."""
