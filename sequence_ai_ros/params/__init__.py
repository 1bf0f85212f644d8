"""The parameter table, NodeConfig and its checks, model fit, preflight and the launch arguments."""
