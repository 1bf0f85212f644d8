"""The service's state: keys and counters (`state.Gateway`), serving (latency model, queues,
workers, warmth) and training (jobs and balances per key)."""
