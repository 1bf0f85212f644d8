"""The local gateway for tests and benchmarks: ``run_gateway`` and the pytest fixtures
``gateway`` and ``gateway_factory`` (registered by test/conftest.py).

Imports only the standard library and httpx, so it also works in a venv without the gateway's
dependencies: there the gateway runs as a subprocess of the interpreter named by the environment
variable ``SEQUENCE_AI_GATEWAY_PYTHON``. Where FastAPI is importable it runs in-process, in a
thread, on an ephemeral loopback port.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import shutil
import ssl
import subprocess as sp
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import httpx

PYTHON_ENV = "SEQUENCE_AI_GATEWAY_PYTHON"
GATEWAY_PACKAGE = "sequence_ai_gateway"
# The fixture's own keys, given to every gateway it starts (never the gateway's development key).
TEST_API_KEY = "seq_test_local_gateway"
TEST_BROKE_KEY = "seq_test_out_of_credit"
START_TIMEOUT_S = 60.0
# The timing, warmth and fine-tuning options, as Gateway keywords and command-line flags.
_TIMING_FLAGS = {
    "latency_ms": "--latency-ms", "jitter_ms": "--jitter-ms", "scale": "--scale",
    "network_ms": "--network-ms", "per_kb_ms": "--per-kb-ms", "spread": "--spread",
    "workers": "--workers", "cold_start_s": "--cold-start-s", "keep_warm_s": "--keep-warm-s",
    "train_executor": "--train-executor", "train_seconds": "--train-seconds",
    "train_balance_usd": "--train-balance-usd",
}


@dataclass(frozen=True)
class GatewayOptions:
    """What ``run_gateway`` starts. A timing option left None is the gateway's own default
    (PROTOCOL-calibrated latency model; see docs/gateway.md); ``scale`` 0 switches all
    simulated time off, as tests want."""

    latency_ms: Optional[float] = None
    jitter_ms: float = 0.0
    scale: float = 0.0
    network_ms: Optional[float] = None
    per_kb_ms: Optional[float] = None
    spread: Optional[float] = None
    workers: int = 1
    cold_start_s: float = 0.0
    keep_warm_s: float = 600.0
    # Fine-tuning: None is the gateway's default (manual executor, its balance, 60 s runs).
    train_executor: Optional[str] = None
    train_seconds: Optional[float] = None
    train_balance_usd: Optional[float] = None
    tls: bool = False
    api_keys: Sequence[str] = (TEST_API_KEY,)
    broke_keys: Sequence[str] = (TEST_BROKE_KEY,)
    policies: Sequence[str] = ()
    # Also serve today's platform (deployments, a worker on its own HTTPS port): the handle's
    # platform_key is its account key, inject_platform arms its faults.
    platform: bool = False

    def timing(self) -> Dict[str, Any]:
        """The timing, warmth and fine-tuning options that are set, by name."""
        values = {name: getattr(self, name) for name in _TIMING_FLAGS}
        return {name: value for name, value in values.items() if value is not None}


def _options(api_keys: Optional[Sequence[str]] = None, broke_keys: Optional[Sequence[str]] = None,
             policies: Sequence[str] = (), **given: Any) -> GatewayOptions:
    # None or empty keys: the fixture's own.
    return GatewayOptions(api_keys=tuple(api_keys or (TEST_API_KEY,)),
                          broke_keys=tuple(broke_keys or (TEST_BROKE_KEY,)),
                          policies=tuple(policies), **given)


class GatewayHandle:
    """A running local gateway: where it is, which keys work, and how to disturb it."""

    url: str
    api_key: str
    broke_key: str
    ca_bundle: Optional[str]
    platform_key: Optional[str] = None

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
    ) -> None:
        """Apply ``fault`` to the next ``count`` valid POST /v1/act calls (of ``model``).

        Bad arguments raise ValueError naming the field, the value and what was expected.
        """
        raise NotImplementedError

    def clear_faults(self) -> None:
        """Drop pending faults and release stalled or held requests."""
        raise NotImplementedError

    def inject_platform(self, kind: str, **options: Any) -> None:
        """Arm a platform fault (sequence_ai_gateway/platform/faults.py lists the kinds;
        options: deployment, count, seconds, retry_after_s)."""
        raise NotImplementedError

    def counters(self) -> Dict[str, Any]:
        raise NotImplementedError

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
        """Change the given timing settings (None: unchanged); ``reset`` undoes them all."""
        raise NotImplementedError

    def reset(self) -> None:
        """Back to the start state: no faults, zero counters, the initial timing and warmth."""
        raise NotImplementedError

    def force_cold(self, model: str) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        """Stop abruptly, dropping open connections; the port is kept for ``restart``."""
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


def fastapi_available() -> bool:
    """Whether the gateway can run in this interpreter (else it runs as a subprocess)."""
    needed = (GATEWAY_PACKAGE, "fastapi", "uvicorn", "PIL")
    return all(importlib.util.find_spec(m) is not None for m in needed)


def gateway_source() -> Optional[str]:
    """The directory this interpreter imports ``sequence_ai_gateway`` from, found without
    importing it (None when it is not importable here). A subprocess gateway is given it first
    on its path, so it serves the same code as an in-process one would."""
    spec = importlib.util.find_spec(GATEWAY_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))


class _InProcessGateway(GatewayHandle):
    def __init__(self, options: GatewayOptions) -> None:
        from sequence_ai_gateway.http.server import GatewayServer
        from sequence_ai_gateway.policies import load_policy
        from sequence_ai_gateway.service.state import Gateway

        self._gateway = Gateway(
            extra_policies=[load_policy(spec) for spec in options.policies],
            api_keys=options.api_keys,
            broke_keys=options.broke_keys,
            **options.timing(),
        )
        if options.platform:
            from sequence_ai_gateway.platform.service import Platform

            self._gateway.platform = Platform(self._gateway.latency, self._gateway.warmth)
            self._gateway.platform.start()
            self.platform_key = self._gateway.platform.account_key
        self._server = GatewayServer(self._gateway, tls=options.tls, log_level="warning")
        self.api_key = options.api_keys[0]
        self.broke_key = options.broke_keys[0]
        self._running = False
        try:
            self._server.start()
        except BaseException:
            self._server.cleanup()
            raise
        self._running = True
        self.url = self._server.url
        self.ca_bundle = self._server.ca_bundle

    def inject(self, fault: str, *, count: int = 1, model: Optional[str] = None,
               seconds: Optional[float] = None, status: Optional[int] = None,
               fields: Optional[Mapping[str, Any]] = None, rows: Optional[int] = None) -> None:
        self._gateway.inject(fault, count=count, model=model, seconds=seconds, status=status,
                             fields=fields, rows=rows)

    def clear_faults(self) -> None:
        self._gateway.clear_faults()
        if self._gateway.platform is not None:
            self._gateway.platform.clear_faults()

    def inject_platform(self, kind: str, **options: Any) -> None:
        assert self._gateway.platform is not None, "run_gateway(platform=True) serves the platform"
        self._gateway.platform.inject(kind, **options)

    def counters(self) -> Dict[str, Any]:
        return self._gateway.counters()

    def set_latency(self, **settings: Optional[float]) -> None:
        self._gateway.set_latency(**settings)

    def reset(self) -> None:
        self._gateway.reset()

    def force_cold(self, model: str) -> None:
        self._gateway.force_cold(model)

    def kill(self) -> None:
        if self._running:
            self._server.kill()
            self._running = False

    def restart(self) -> None:
        if self._running:
            self._server.stop()
        self._server.restart()
        self._running = True

    def stop(self) -> None:
        if self._running:
            self._server.stop()
            self._running = False
        self._server.cleanup()
        if self._gateway.platform is not None:
            self._gateway.platform.stop()

    @property
    def alive(self) -> bool:
        return self._running


class _SubprocessGateway(GatewayHandle):
    def __init__(self, options: GatewayOptions, python: str) -> None:
        self._python = python
        self._options = options
        self.api_key = options.api_keys[0]
        self.broke_key = options.broke_keys[0]
        self._tmp = tempfile.mkdtemp(prefix="sequence-ai-gateway-")
        self._proc: Optional[sp.Popen] = None
        self._port = 0
        self.ca_bundle = None
        self._launch()
        self._control = httpx.Client(
            base_url=self.url, verify=_verify(self.ca_bundle), trust_env=False, timeout=30.0
        )

    def _command(self) -> List[str]:
        o = self._options
        cmd = [self._python, "-m", GATEWAY_PACKAGE, "--host", "127.0.0.1",
               "--port", str(self._port), "--log-level", "warning"]
        for name, value in o.timing().items():
            cmd += [_TIMING_FLAGS[name], str(value)]
        if o.tls:
            cmd += ["--tls", "--tls-dir", os.path.join(self._tmp, "tls")]
        for key in o.api_keys:
            cmd += ["--api-key", key]
        for key in o.broke_keys:
            cmd += ["--broke-key", key]
        for spec in o.policies:
            cmd += ["--policy", spec]
        if o.platform:
            cmd += ["--platform"]
        return cmd

    def _launch(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (gateway_source(), env.get("PYTHONPATH", "")) if p
        )
        env.pop("SEQUENCES_GATEWAY_KEYS", None)  # keys come from the options only
        stderr_path = os.path.join(self._tmp, "stderr.log")
        with open(stderr_path, "ab") as stderr:
            self._proc = sp.Popen(self._command(), stdout=sp.PIPE, stderr=stderr, env=env,
                                  cwd=self._tmp, text=True)
        lines: queue.Queue[Optional[str]] = queue.Queue()
        threading.Thread(target=_pump, args=(self._proc.stdout, lines), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        url = None
        while url is None:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self._terminate()
                with open(stderr_path, errors="replace") as f:
                    tail = f.read()[-2000:]
                raise RuntimeError(f"gateway subprocess did not start ({self._command()}): {tail}")
            key, _, value = line.strip().partition("=")
            if key == "SEQUENCES_CA_BUNDLE":
                self.ca_bundle = value
            elif key == "SEQUENCES_PLATFORM_KEY":
                self.platform_key = value
            elif key == "SEQUENCES_BASE_URL":
                url = value
        self.url = url
        self._port = int(url.rsplit(":", 1)[1])
        _wait_healthy(url, self.ca_bundle, deadline)

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        response = self._control.request(method, path, json=body)
        if response.status_code in (404, 422):
            raise ValueError(response.json().get("detail"))
        response.raise_for_status()
        return response.json()

    def inject(self, fault: str, *, count: int = 1, model: Optional[str] = None,
               seconds: Optional[float] = None, status: Optional[int] = None,
               fields: Optional[Mapping[str, Any]] = None, rows: Optional[int] = None) -> None:
        self._call("POST", "/_control/faults", {
            "fault": fault, "count": count, "model": model, "seconds": seconds,
            "status": status, "fields": None if fields is None else dict(fields), "rows": rows,
        })

    def clear_faults(self) -> None:
        self._call("DELETE", "/_control/faults")
        if self._options.platform:
            self._call("DELETE", "/_control/platform/faults")

    def inject_platform(self, kind: str, **options: Any) -> None:
        self._call("POST", "/_control/platform/faults", {"kind": kind, **options})

    def counters(self) -> Dict[str, Any]:
        return self._call("GET", "/_control/counters")

    def set_latency(self, **settings: Optional[float]) -> None:
        self._call("POST", "/_control/latency", settings)

    def force_cold(self, model: str) -> None:
        self._call("POST", "/_control/cold", {"model": model})

    def _terminate(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except sp.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def reset(self) -> None:
        self._call("POST", "/_control/reset")

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def restart(self) -> None:
        """A fresh process on the same port; counters start again from zero."""
        self._terminate()
        self._launch()

    def stop(self) -> None:
        self._terminate()
        self._control.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


def _verify(ca_bundle: Optional[str]) -> Any:
    return ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True


def _pump(stream: Any, lines: queue.Queue[Optional[str]]) -> None:
    # Drains the child's stdout so it never blocks; None marks its end.
    for line in stream:
        lines.put(line)
    lines.put(None)


def _wait_healthy(url: str, ca_bundle: Optional[str], deadline: float) -> None:
    # The socket listens before the URL line is printed, so this request waits in its backlog
    # until the server runs. The control path, so the gateway's request counters stay at zero.
    timeout = max(1.0, deadline - time.monotonic())
    with httpx.Client(verify=_verify(ca_bundle), trust_env=False, timeout=timeout) as client:
        try:
            answer = client.get(url + "/_control/counters")
        except httpx.TransportError as exc:
            raise RuntimeError(f"gateway at {url} did not answer: {exc}") from None
    if answer.status_code != 200:
        raise RuntimeError(f"gateway at {url} answered {answer.status_code} to its first call")


@contextlib.contextmanager
def run_gateway(*, subprocess: Optional[bool] = None, **options: Any) -> Iterator[GatewayHandle]:
    """Serve a local gateway on an ephemeral loopback port for the duration of the block.

    ``options`` are those of ``GatewayOptions`` (an unknown one is a TypeError); ``policies``
    adds plug-in policies (``"package.module:factory"``) to the built-in models. ``subprocess``
    None runs it in-process where FastAPI is importable.
    """
    checked = _options(**options)
    in_process = fastapi_available() if subprocess is None else not subprocess
    handle = _InProcessGateway(checked) if in_process else _start_subprocess(checked)
    try:
        yield handle
    finally:
        handle.stop()


def _start_subprocess(options: GatewayOptions) -> _SubprocessGateway:
    python = os.environ.get(PYTHON_ENV) or sys.executable
    # The child runs in its own temporary directory: a relative path must not change meaning.
    python = os.path.abspath(python) if os.sep in python else shutil.which(python) or python
    if python == sys.executable and not fastapi_available():
        raise RuntimeError(
            f"the gateway needs fastapi, uvicorn and Pillow; set {PYTHON_ENV} to a Python "
            "that has them (make setup does) to run it as a subprocess"
        )
    return _SubprocessGateway(options, python)


try:
    import pytest
except ImportError:  # usable outside pytest; the fixtures just are not defined
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def _sequence_ai_gateway_pool() -> Iterator[List[_SubprocessGateway]]:
        # Starting a subprocess gateway costs about a second, so the default-option one is
        # shared across tests and reset between them.
        pool: List[_SubprocessGateway] = []
        yield pool
        for handle in pool:
            handle.stop()

    @pytest.fixture(scope="session")
    def _sequence_ai_in_process_pool() -> Iterator[List[_InProcessGateway]]:
        # Stopping an in-process server waits out uvicorn's 0.1 s tick: shared and reset too.
        pool: List[_InProcessGateway] = []
        yield pool
        for handle in pool:
            handle.stop()

    @pytest.fixture
    def gateway(
        _sequence_ai_gateway_pool: List[_SubprocessGateway],
        _sequence_ai_in_process_pool: List[_InProcessGateway],
    ) -> Iterator[GatewayHandle]:
        """A gateway with no simulated latency and warm models, in the state just after its
        start (one gateway serves the tests in turn, reset between them)."""
        pool: List[Any]
        if fastapi_available():
            pool = _sequence_ai_in_process_pool
            if not pool or not pool[0].alive:
                while pool:
                    pool.pop().stop()
                pool.append(_InProcessGateway(_options()))
        else:
            pool = _sequence_ai_gateway_pool
            if not pool or not pool[0].alive:
                while pool:
                    pool.pop().stop()
                pool.append(_start_subprocess(_options()))
        shared = pool[0]
        shared.reset()
        yield shared
        if not shared.alive:  # killed and not restarted by the test
            pool.remove(shared)
            shared.stop()

    @pytest.fixture
    def gateway_factory() -> Iterator[Callable[..., GatewayHandle]]:
        """``gateway_factory(**options)`` starts a gateway that is stopped at teardown."""
        with contextlib.ExitStack() as stack:

            def start(**options: Any) -> GatewayHandle:
                return stack.enter_context(run_gateway(**options))

            yield start
