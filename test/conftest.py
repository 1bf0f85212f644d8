"""Shared test setup: the local gateway fixtures ``gateway`` and ``gateway_factory``."""

pytest_plugins = ("support.gateway_fixture",)
