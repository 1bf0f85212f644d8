"""The parameter table and its checks, model fit, preflight and the launch arguments."""
