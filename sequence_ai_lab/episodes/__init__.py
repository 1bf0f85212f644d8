"""The episode tools: list, show, plot, frames, repair, replay and export recorded episodes."""
