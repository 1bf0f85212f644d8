"""The gateway's state and its control API (faults, counters, latency, warmth, keys)."""

from __future__ import annotations

import asyncio
import math
import random
import threading
from enum import Enum
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
)

from sequence_ai_gateway import DEVELOPMENT_KEY
from sequence_ai_gateway.faults.book import Fault, FaultBook, make_fault
from sequence_ai_gateway.models.catalogue import Catalogue, complete_row, short_id
from sequence_ai_gateway.models.planner_model import SimulatedPlanner
from sequence_ai_gateway.models.vision_policies import builtin_policies
from sequence_ai_gateway.service.admission import Admission
from sequence_ai_gateway.service.serving import (
    NETWORK_MS,
    NETWORK_SPREAD,
    PER_KB_MS,
    LatencySettings,
    ModelServer,
    WarmthSettings,
)
from sequence_ai_gateway.service.training import (
    DEFAULT_BALANCE_USD,
    DEFAULT_TRAIN_SECONDS,
    Trainer,
    TrainJob,
    tuned_row,
)

if TYPE_CHECKING:
    from sequence_ai_gateway.platform.service import Platform

ENDPOINT_COUNTERS = ("health", "models", "ready", "act", "chat")
# Used when the ``warming`` fault names no duration and the gateway has no cold start.
DEFAULT_FORCED_WARMING_S = 1.0


class KeyStatus(str, Enum):
    MISSING = "missing"
    UNKNOWN = "unknown"
    BROKE = "broke"  # valid, out of credit
    OK = "ok"


def _non_negative(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{name}={value!r}: expected a finite number >= 0")
    return float(value)


class Gateway:
    """Everything the HTTP routes serve from; safe to drive from another thread."""

    def __init__(
        self,
        *,
        policies: Optional[Sequence[Any]] = None,
        extra_policies: Iterable[Any] = (),
        api_keys: Optional[Sequence[str]] = None,
        broke_keys: Optional[Sequence[str]] = None,
        latency_ms: Optional[float] = None,
        jitter_ms: float = 0.0,
        scale: float = 1.0,
        network_ms: float = NETWORK_MS,
        per_kb_ms: float = PER_KB_MS,
        spread: float = NETWORK_SPREAD,
        workers: int = 1,
        cold_start_s: float = 0.0,
        keep_warm_s: float = 600.0,
        seed: int = 0,
        train_executor: str = "manual",
        train_seconds: float = DEFAULT_TRAIN_SECONDS,
        train_balance_usd: float = DEFAULT_BALANCE_USD,
    ) -> None:
        if policies is None:
            policies = [*builtin_policies(), SimulatedPlanner()]
        served = list(policies) + list(extra_policies)
        rows = [complete_row(p.row) for p in served]
        self.catalogue = Catalogue(rows)
        self.api_keys: List[str] = list(api_keys) if api_keys else [DEVELOPMENT_KEY]
        self.broke_keys: List[str] = list(broke_keys or [])
        self.latency = LatencySettings()
        self.set_latency(latency_ms=latency_ms, jitter_ms=jitter_ms, scale=scale,
                         network_ms=network_ms, per_kb_ms=per_kb_ms, spread=spread)
        self._initial_latency = dict(self.latency.__dict__)
        self.warmth = WarmthSettings(
            cold_start_s=_non_negative("cold_start_s", cold_start_s) or 0.0,
            keep_warm_s=_non_negative("keep_warm_s", keep_warm_s) or 0.0,
        )
        rng = random.Random(seed)
        self.servers: Dict[str, ModelServer] = {
            row["id"]: ModelServer(row, policy, self.latency, self.warmth, rng, workers)
            for row, policy in zip(rows, served)
        }
        self.faults = FaultBook()
        self.admission = Admission()
        self.training = Trainer(executor=train_executor, seconds=train_seconds,
                                balance_usd=train_balance_usd, broke_keys=self.broke_keys,
                                on_success=lambda job: _serve_tuned(self, job))
        # _lock guards the counters below and _waits; routes run on the server's event loop,
        # the control API on any thread.
        self._lock = threading.Lock()
        self._requests = {name: 0 for name in ENDPOINT_COUNTERS}
        self._bytes_received = 0
        self._connections = 0
        self._fresh: Set[Any] = set()  # peers of accepted connections with no request yet
        # Stalled, held and trickling requests, each woken through its own loop; the
        # generation counts releases, so a wait that starts after one it belongs to ends at once.
        self._waits: Set[Tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._release_generation = 0
        # Set by stop() from any thread, cleared by the serving thread when it starts again.
        self.stopping = False
        # Today's platform (deployments over the direct-worker protocol), when it is served.
        self.platform: Optional[Platform] = None

    # --- keys ---------------------------------------------------------------------------------
    def key_status(self, key: Optional[str]) -> KeyStatus:
        if not key:
            return KeyStatus.MISSING
        if key in self.broke_keys:
            return KeyStatus.BROKE
        if key in self.api_keys:
            return KeyStatus.OK
        return KeyStatus.UNKNOWN

    # --- counters -----------------------------------------------------------------------------
    def count_request(self, endpoint: str) -> None:
        with self._lock:
            self._requests[endpoint] += 1

    def count_body(self, size: int) -> None:
        """Bytes of an act request's body, whatever becomes of the request."""
        with self._lock:
            self._bytes_received += size

    def connection_opened(self, peer: Any) -> None:
        with self._lock:
            self._connections += 1
            self._fresh.add(peer)

    def connection_closed(self, peer: Any) -> None:
        with self._lock:
            self._fresh.discard(peer)

    def first_request(self, peer: Any, control: bool) -> None:
        """A connection opened only to reach the control endpoints (the test fixture's own
        client) is not counted, so ``connections`` measures the clients under test."""
        with self._lock:
            if peer in self._fresh:
                self._fresh.discard(peer)
                if control:
                    self._connections -= 1

    def counters(self) -> Dict[str, Any]:
        with self._lock:
            out: Dict[str, Any] = {
                "connections": self._connections,
                "requests": dict(self._requests),
                "bytes_received": self._bytes_received,
            }
        models = {short_id(k): s.counters() for k, s in list(self.servers.items())}
        out["queue_depth"] = {name: m["queue_depth"] for name, m in models.items()}
        out["max_queue_depth"] = {name: m["max_queue_depth"] for name, m in models.items()}
        out["models"] = models
        return out

    # --- control ------------------------------------------------------------------------------
    def server_for(self, model: str) -> ModelServer:
        self.training.settle()
        row = self.catalogue.find(model)
        if row is None:
            raise ValueError(
                f"model={model!r} is not served here; served: {', '.join(self.catalogue.ids())}"
            )
        return self.servers[row["id"]]

    def inject(
        self,
        fault: str,
        *,
        count: int = 1,
        model: Optional[str] = None,
        seconds: Optional[float] = None,
        status: Optional[int] = None,
        fields: Optional[Mapping[str, Any]] = None,
        rows: Optional[int] = None,
    ) -> Fault:
        if model is not None:
            model = self.server_for(model).row["id"]
        made = make_fault(fault, count=count, model=model, seconds=seconds, status=status,
                          fields=fields, rows=rows)
        self.faults.add(made)
        return made

    def clear_faults(self) -> None:
        """Drop pending faults and release every stalled, held or trickling request."""
        self.faults.clear()
        self._release_waits()

    def stop(self) -> None:
        """The server is stopping: release every waiting request, now and from now on."""
        self.stopping = True
        self._release_waits()

    def set_latency(
        self,
        *,
        latency_ms: Optional[float] = None,
        jitter_ms: Optional[float] = None,
        scale: Optional[float] = None,
        network_ms: Optional[float] = None,
        per_kb_ms: Optional[float] = None,
        spread: Optional[float] = None,
    ) -> None:
        """Change only the settings given (all checked first); applies to the transport and
        inference phases that start afterwards. ``latency_ms`` sets the flat override; only
        ``reset`` returns from it to the model."""
        given = {"latency_ms": latency_ms, "jitter_ms": jitter_ms, "scale": scale,
                 "network_ms": network_ms, "per_kb_ms": per_kb_ms, "spread": spread}
        checked = {name: _non_negative(name, value) for name, value in given.items()}
        for name, value in checked.items():
            if value is not None:
                setattr(self.latency, name, value)

    def force_cold(self, model: str) -> None:
        self.server_for(model).force_cold()

    def forced_warming_s(self, seconds: Optional[float]) -> float:
        if seconds is not None:
            return seconds
        return self.warmth.cold_start_s or DEFAULT_FORCED_WARMING_S

    def reset(self) -> None:
        """Back to the state just after start: no faults, zero counters, initial latency and
        warmth. Lets one gateway process serve many tests in turn."""
        self.clear_faults()
        self.latency.__dict__.update(self._initial_latency)
        with self._lock:
            self._requests = {name: 0 for name in ENDPOINT_COUNTERS}
            self._bytes_received = 0
            self._connections = 0
        for model_id in self.training.reset():  # the tuned models go with their jobs
            self.catalogue.remove(model_id)
            self.servers.pop(model_id, None)
        for server in self.servers.values():
            server.reset_warmth()
            server.reset_counters()

    def reset_after_restart(self) -> None:
        """A restarted server is a fresh process: models back to their initial warmth."""
        self.stopping = False
        for server in self.servers.values():
            server.reset_warmth()

    @property
    def release_generation(self) -> int:
        """Taken when a fault is taken: its waits end at once if a release came since."""
        with self._lock:
            return self._release_generation

    async def wait_stall(self, seconds: Optional[float], since: Optional[int] = None) -> bool:
        """Hold a request for ``seconds`` (None: forever) unless faults are cleared or the
        server stops (since generation ``since``); True when it was released early."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waits.add(entry)
            released = since is not None and self._release_generation != since
        try:
            # Checked after registering: a release in between has either seen this wait or
            # changed the generation (or set the flag) first.
            if released or self.stopping:
                return True
            await asyncio.wait_for(entry[1].wait(), seconds)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            with self._lock:
                self._waits.discard(entry)

    def _release_waits(self) -> None:
        with self._lock:
            self._release_generation += 1
            waits = list(self._waits)
        for loop, event in waits:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop has closed: nothing is waiting on it any more
                pass


def _serve_tuned(gateway: Gateway, job: TrainJob) -> None:
    """A succeeded job's model: the base's row and simulated policy under the job's id."""
    base = gateway.servers[job.base_model]
    row = tuned_row(base.row, job)
    gateway.servers[row["id"]] = ModelServer(row, base.policy, gateway.latency, gateway.warmth,
                                             random.Random(job.id), base.workers)
    gateway.catalogue.add(row)
