"""The simulated models: the catalogue, the looking act policies, the scene vision they share,
the simulated planner, and the checks of an observation."""
