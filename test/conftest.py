"""Shared test setup: the local gateway fixtures ``gateway`` and ``gateway_factory``."""

pytest_plugins = ("gateway_fixture",)
