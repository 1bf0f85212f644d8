"""Injected faults as data: their kinds, the checks of their arguments and the book that queues
them (what a fault does to a call lives with the HTTP routes)."""
