"""Private: one model's requests — the session that lives across calls, call handles, fetch
threads, the first (warm-up) request, predict."""
