"""The lab: the simulated robots, the demo, the evaluation and the episode tools. Not shipped to
a robot: it may import the node and the client, and neither imports anything of it."""
