"""The simulated robots, one room each (`sim_robot`, `sim_cartesian`, `sim_bimanual`), and the
arm model, camera canvas and process helpers they share (`shared`)."""
