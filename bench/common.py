"""What the sections share: the run context, observations, request timing and small helpers."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from support.gateway_fixture import GatewayHandle

import sequence_ai
from sequence_ai import Exchange, Model, Observation, Policy

ROOT = Path(__file__).resolve().parent.parent
PI05 = "pi05-droid"
COSMOS3 = "cosmos3-edge-policy-droid"
ORDER_ECHO = "bench-order-echo-droid"
ORDER_POLICY_SPEC = "bench.order_policy:make_policy"
# Lognormal spread of the simulated inference time, as a fraction of its median (sigma 0.3).
JITTER_FRACTION = 0.3

perf = time.perf_counter


@dataclass
class Context:
    """Everything a section needs from the run: mode, output place and the shared gateway."""

    quick: bool
    out_dir: Path
    gateway: GatewayHandle
    models: dict[str, Model]
    log_dir: Path
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    def command(self, key: str) -> str:
        quick = " QUICK=1" if self.quick else ""
        return f"make bench{quick} ARGS='--only {key}'"

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full

    def connect(self, model: str, **kwargs: Any) -> Policy:
        kwargs.setdefault("validate", "warn")
        return sequence_ai.connect(
            model, api_key=self.gateway.api_key, base_url=self.gateway.url, **kwargs
        )

    def latency(self, median_ms: float, jitter_fraction: float = JITTER_FRACTION) -> None:
        """Simulated inference time of every model from now on (lognormal around the median)."""
        self.gateway.set_latency(
            latency_ms=median_ms, jitter_ms=median_ms * jitter_fraction, scale=1.0
        )


def droid_parameters() -> dict[str, Any]:
    """The node's parameters from config/droid.yaml, as the shipped node runs them."""
    import yaml

    document = yaml.safe_load((ROOT / "config" / "droid.yaml").read_text(encoding="utf-8"))
    return dict(document["/**/sequence_ai"]["ros__parameters"])


class NullOutput:
    """A CommandOutput that keeps nothing: the gate's own cost is what is timed."""

    def __init__(self, interface: Any) -> None:
        self.interface = interface

    def publish_arm(self, values: list[float]) -> None:
        pass

    def publish_trajectory(self, plan: Any) -> None:
        pass

    def publish_gripper(self, values: list[float]) -> None:
        pass

    def command_rate_hz(self) -> float:
        return 0.0

    def destroy(self) -> None:
        pass


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def rendered_frame(view: str, width: int, height: int) -> np.ndarray:
    """A frame of the simulated arm's scene (what sim_robot publishes), RGB uint8."""
    from sequence_ai_lab.robots.shared.arm import HOME
    from sequence_ai_lab.robots.shared.render import SceneRenderer

    return SceneRenderer(view, width, height).render(HOME.copy(), 0.0)


def noisy(frame: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """The frame with Gaussian sensor noise: a real camera's JPEG is larger than a render's."""
    generator = np.random.default_rng(seed)
    noise = generator.normal(0.0, sigma, frame.shape)
    return np.clip(frame.astype(np.float32) + noise, 0, 255).astype(np.uint8)


def jpeg_bytes(frame: np.ndarray, width: int, quality: int = 95) -> bytes:
    """``frame`` resized to ``width`` at 16:9 and JPEG-encoded as the client encodes."""
    import io

    from PIL import Image

    height = max(1, round(width * 9 / 16))
    image = Image.fromarray(frame).resize((width, height), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality, optimize=True)
    return buffer.getvalue()


def request_bytes(model: Model, observation: Observation) -> int:
    """Size of the POST /v1/act body the client sends for ``observation``."""
    # Compact JSON, as the client encodes it.
    body = {"model": model.id, "observation": observation.to_wire()}
    return len(json.dumps(body, separators=(",", ":")).encode("utf-8"))


def sized_observation(model: Model, body_bytes: int) -> Observation:
    """An observation of the simulated scene (with sensor noise) whose request body is within
    a few bytes of ``body_bytes``: the frames' width is searched, every view the same."""
    from sequence_ai_lab.robots.shared.arm import HOME

    frame = noisy(rendered_frame("exterior_1", 1280, 720), 3.0)

    def build(width: int) -> Observation:
        data = jpeg_bytes(frame, width)
        return sequence_ai.observation(
            model, images={view: data for view in model.camera_views}, joints=list(HOME),
            gripper=[0.0], instruction="put the cup in the sink",
        )

    low, high = 16, 1280
    while high - low > 1:
        middle = (low + high) // 2
        if request_bytes(model, build(middle)) <= body_bytes:
            low = middle
        else:
            high = middle
    return build(low)


def fixed_observation(
    model: Model, instruction: str = "put the cup in the sink", joints: list[float] | None = None
) -> Observation:
    """An observation with every declared view, encoded once so observe() costs nothing."""
    frame = rendered_frame("exterior_1", 1280, 720)
    encoded = sequence_ai.encode(frame, model)
    from sequence_ai_lab.robots.shared.arm import HOME

    return sequence_ai.observation(
        model,
        images={view: encoded for view in model.camera_views},
        joints=list(HOME) if joints is None else joints,
        gripper=[0.0],
        instruction=instruction,
    )


class TrackingArm:
    """observe()/act() pair for an arm that reaches every commanded joint target at once.

    Observations carry the last commanded joints, so a chunk requested mid-playback starts
    from where the arm really was at request time (what a seam jump is measured against).
    """

    def __init__(
        self,
        model: Model,
        instruction: str = "put the cup in the sink",
        first: Observation | None = None,
    ) -> None:
        from sequence_ai_lab.robots.shared.arm import HOME

        first = first or fixed_observation(model, instruction)
        self._model = model
        self._images = {frame.view: frame.data for frame in first.images}
        self._instruction = instruction
        self.joints = [float(q) for q in HOME]
        self.times: list[float] = []
        self.rows: list[list[float]] = []

    def observe(self) -> Observation:
        return sequence_ai.observation(
            self._model, images=self._images, joints=list(self.joints), gripper=[0.0],
            instruction=self._instruction,
        )

    def act(self, row: list[float]) -> None:
        self.times.append(perf())
        self.rows.append(row)
        self.joints = [float(v) for v in row[:7]]


def accept(row: list[float]) -> bool:
    """validate= for benches: every row passes (the bench measures the loop, not safety)."""
    return True


class RequestClock:
    """Start and end time of every POST /v1/act a Policy makes (bench instrumentation).

    Wraps the Policy's transport ``post``: the client has no public hook for this.
    """

    def __init__(self, policy: Policy) -> None:
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        transport = policy._session.transport
        original = transport.post

        def timed(
            path: str, body: Any, *, timeout: float | None = None,
            exchange: Exchange | None = None,
        ) -> Any:
            start = perf()
            try:
                return original(path, body, timeout=timeout, exchange=exchange)
            finally:
                with self._lock:
                    self.spans.append((start, perf()))

        transport.post = timed  # type: ignore[method-assign]


class ActClock:
    """act= for benches: records when each row was handed over."""

    def __init__(self, record_rows: bool = False) -> None:
        self.times: list[float] = []
        self.rows: list[list[float]] = []
        self._record_rows = record_rows

    def __call__(self, row: list[float]) -> None:
        self.times.append(perf())
        if self._record_rows:
            self.rows.append(row)


def busy(seconds: float) -> None:
    """Spend ``seconds`` of CPU on this thread (a stand-in for an observe() that encodes)."""
    end = perf() + seconds
    while perf() < end:
        pass


@contextmanager
def in_thread(target: Callable[[], Any]) -> Iterator[dict[str, Any]]:
    """Run ``target`` on a thread for the block; the result or error lands in the dict."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = target()
        except BaseException as exc:  # handed to the caller through the box
            box["error"] = exc

    thread = threading.Thread(target=work, name="bench-driver", daemon=True)
    thread.start()
    try:
        yield box
    finally:
        thread.join(60.0)
        box["alive"] = thread.is_alive()
