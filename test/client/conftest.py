"""Fixtures of the client tests: one gateway per module, seen per test; no SEQUENCES_* env."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from support.gateway_fixture import run_gateway
from support.policy_support import PerTestGateway


@pytest.fixture(scope="module")
def shared_gateway() -> Iterator[Any]:
    """One gateway per module: starting one per test costs seconds under the 3.9 subprocess."""
    with run_gateway() as handle:
        yield handle


@pytest.fixture
def gw(shared_gateway: Any) -> Iterator[PerTestGateway]:
    """The module's gateway with no faults pending and counters relative to this test."""
    shared_gateway.clear_faults()
    yield PerTestGateway(shared_gateway)
    shared_gateway.clear_faults()


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the API key nor the base URL comes from the environment."""
    monkeypatch.delenv("SEQUENCES_API_KEY", raising=False)
    monkeypatch.delenv("SEQUENCES_BASE_URL", raising=False)
