"""Private: what a model is and what its data mean — the catalogue, observations and their
encoding, action post-processing, controllers (action space to joint targets)."""
