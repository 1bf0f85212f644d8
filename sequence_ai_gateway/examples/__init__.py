"""Example plug-in policies for ``sequence-ai-gateway --policy``."""
