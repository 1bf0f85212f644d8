"""The platform's deployment protocol (connect, a pinned worker, msgpack); docs/client.md."""
