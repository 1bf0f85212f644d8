"""Private: the HTTP layer — kept-alive connections, whole-request deadlines, response bodies,
status-to-error mapping, the API key."""
