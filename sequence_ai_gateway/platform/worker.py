"""A worker: the data plane on its own HTTPS port, reached straight by the robot.

``POST /observe`` takes an episode's observations (msgpack), ``POST /act`` calls the
deployment's act function on the newest of them, ``POST /act/episode_end`` frees an episode,
``GET /ping`` says what the worker reads. Every call carries ``Authorization: Bearer
<direct_secret>`` from its lease; the account key is refused here.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import uvicorn
from pydantic import ValidationError
from sequence_base import msgpack_io
from sequence_base.contract.observe import FRAMES_MISSING, ObserveRequest, ObserveResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sequence_ai_gateway.platform.deployments import (
    Deployment,
    echo_outputs,
    looking_outputs,
    policy_observation,
)
from sequence_ai_gateway.platform.episodes import EpisodeBook
from sequence_ai_gateway.platform.errors import ErrorCode, PlatformError, error_response, request_id
from sequence_ai_gateway.platform.faults import PlatformFaults
from sequence_ai_gateway.platform.keys import ACCOUNT_PREFIX, ROBOT_PREFIX
from sequence_ai_gateway.platform.seats import Seat, Seats
from sequence_ai_gateway.platform.tls import WorkerCertificate, make_certificate
from sequence_ai_gateway.platform.wire import (
    FORMATS,
    FORMATS_HEADER,
    MSGPACK_MEDIA_TYPE,
    REQUEST_ID_HEADER,
)
from sequence_ai_gateway.service.serving import ModelServer

# How long an act waits for the observations numbered before it to arrive before it answers
# 409 frames_missing (the robot then posts them again).
FRAMES_WAIT_S = 5.0
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class WorkerParts:
    """What a worker serves from, shared with the control plane."""

    seats: Seats
    faults: PlatformFaults
    deployments: Mapping[str, Deployment]
    make_server: Callable[[Deployment], ModelServer]
    on_death: Callable[[Worker], None]


def _listening_socket(host: str) -> socket.socket:
    """A bound, listening socket on a free port. IPPROTO_TCP: asyncio sets TCP_NODELAY only on
    sockets that say they are TCP (without it an answer can wait ~40 ms for a delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind((host, 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _plain(value: Any) -> Any:
    """``value`` as JSON carries it: arrays as lists, bytes refused by the encoder."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


class Worker:
    """One worker generation: its certificate, its episodes, its server thread."""

    def __init__(self, generation: int, parts: WorkerParts, host: str = "127.0.0.1") -> None:
        self.generation = generation
        self.host = host
        self.parts = parts
        self.draining = False
        self._tls_dir = tempfile.mkdtemp(prefix="sequence-ai-worker-")
        self.certificate: WorkerCertificate = make_certificate(self._tls_dir, host)
        self.episodes = EpisodeBook()
        self.servers: Dict[str, ModelServer] = {
            name: parts.make_server(d) for name, d in parts.deployments.items() if d.looks}
        self._running: Dict[str, float] = {}  # request id -> when its act began
        self.app = Starlette(routes=[
            Route("/ping", self.ping, methods=["GET"]),
            Route("/act", self.act, methods=["POST"]),
            Route("/observe", self.observe, methods=["POST"]),
            Route("/act/episode_end", self.episode_end, methods=["POST"]),
        ])
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    # --- serving ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> None:
        sock = _listening_socket(self.host)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, ws="none", lifespan="off", log_level="warning",
                                ssl_certfile=self.certificate.cert_file,
                                ssl_keyfile=self.certificate.key_file)
        server = uvicorn.Server(config)
        self._server = server

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(server.serve(sockets=[sock]))
            finally:
                for task in asyncio.all_tasks(loop):
                    task.cancel()
                loop.run_until_complete(asyncio.sleep(0))
                loop.close()

        self._thread = threading.Thread(target=run, name=f"worker:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        try:
            while not server.started:
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"worker on port {self.port} did not start")
                time.sleep(0.01)
        finally:
            # The key and certificate are read once, at start: nothing of them stays on disk.
            shutil.rmtree(self._tls_dir, ignore_errors=True)

    def stop(self, *, abort: bool = False) -> None:
        """Stop serving; ``abort`` drops every open connection without an answer first."""
        server, loop = self._server, self._loop
        if server is None:
            return
        if abort and loop is not None and not loop.is_closed():
            def drop() -> None:
                for connection in list(server.server_state.connections):
                    transport = getattr(connection, "transport", None)
                    if transport is not None:
                        transport.abort()
                server.force_exit = True
                server.should_exit = True

            try:
                loop.call_soon_threadsafe(drop)
            except RuntimeError:  # the loop closed meanwhile
                pass
        server.should_exit = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._server = None

    # --- the guard -------------------------------------------------------------------------
    def _seat(self, request: Request) -> Seat:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise PlatformError(ErrorCode.UNAUTHENTICATED,
                                "missing direct secret: send the header "
                                "'Authorization: Bearer <direct_secret>'")
        if token.startswith((ACCOUNT_PREFIX, ROBOT_PREFIX)):
            raise PlatformError(ErrorCode.UNAUTHENTICATED,
                                "an API key is never taken by a worker: send the direct_secret "
                                "POST /v1/act/connect returned")
        seat = self.parts.seats.holder(token, self.generation)
        if seat is None:
            raise PlatformError(ErrorCode.UNAUTHENTICATED,
                                "direct secret not valid on this worker (rotated, or its lease "
                                "expired): POST /v1/act/connect again",
                                details={"reason": "stale_epoch"})
        if self.draining:
            raise PlatformError(ErrorCode.UNAVAILABLE, "this worker is draining: connect again",
                                retry_after_s=0.0, details={"reason": "draining"})
        return seat

    async def _answer(self, request: Request, handler: Callable[[Request], Any]) -> Response:
        rid = request_id(request)
        try:
            body = await handler(request)
        except PlatformError as exc:
            return error_response(exc, rid, worker=True)
        headers = {FORMATS_HEADER: FORMATS, REQUEST_ID_HEADER: rid}
        if MSGPACK_MEDIA_TYPE in request.headers.get("accept", ""):
            return Response(msgpack_io.pack(body), media_type=MSGPACK_MEDIA_TYPE, headers=headers)
        return Response(json.dumps(_plain(body), separators=(",", ":")).encode(),
                        media_type="application/json", headers=headers)

    async def _body(self, request: Request) -> Any:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise PlatformError(ErrorCode.PAYLOAD_TOO_LARGE,
                                f"body of {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
        try:
            if request.headers.get("content-type", "").startswith(MSGPACK_MEDIA_TYPE):
                return msgpack_io.unpack(raw)
            return json.loads(raw or b"{}")
        except (msgpack_io.MsgpackError, ValueError) as exc:
            raise PlatformError(ErrorCode.INVALID_REQUEST, f"body unreadable: {exc}") from None

    # --- routes ----------------------------------------------------------------------------
    async def ping(self, request: Request) -> Response:
        async def pong(request: Request) -> Dict[str, Any]:
            asked = request.query_params.get("act")
            if asked is None:
                return {"ok": True}
            began = self._running.get(asked)
            return {"act": {"running": began is not None,
                            "for_s": None if began is None else time.monotonic() - began}}

        return await self._answer(request, pong)

    async def episode_end(self, request: Request) -> Response:
        async def end(request: Request) -> Dict[str, Any]:
            self._seat(request)
            body = await self._body(request)
            episode = body.get("episode_id") if isinstance(body, dict) else None
            if not isinstance(episode, str) or not episode:
                raise PlatformError(ErrorCode.INVALID_REQUEST,
                                    f"episode_id: {episode!r}; expected a non-empty string")
            return {"ended": self.episodes.end(episode)}

        return await self._answer(request, end)

    async def observe(self, request: Request) -> Response:
        async def take(request: Request) -> Dict[str, Any]:
            self._seat(request)
            try:
                posted = ObserveRequest.model_validate(await self._body(request))
            except ValidationError as exc:
                raise PlatformError(ErrorCode.INVALID_REQUEST,
                                    f"observe body: {exc.errors()[0]['loc']}: "
                                    f"{exc.errors()[0]['msg']}") from None
            through = self.episodes.observe(
                posted.episode_id, {f.seq: f.inputs for f in posted.frames}, set(posted.skipped))
            return ObserveResponse(through=through).model_dump()

        return await self._answer(request, take)

    async def act(self, request: Request) -> Response:
        return await self._answer(request, self._act)

    async def _act(self, request: Request) -> Dict[str, Any]:
        began = time.monotonic()
        seat = self._seat(request)
        payload = await self._body(request)
        if not isinstance(payload, dict):
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"act body: {type(payload).__name__}; expected a map")
        deployment = self.parts.deployments[seat.deployment]
        retry = self.parts.faults.take_busy(deployment.name)
        if retry is not None:
            raise PlatformError(ErrorCode.BUSY, "every copy of the policy is busy with other acts",
                                retry_after_s=retry, details={"reason": "busy"})
        if self.parts.faults.take_die(deployment.name):
            # The worker's machine goes away mid-act: this connection drops unanswered.
            threading.Thread(target=self.parts.on_death, args=(self,), daemon=True).start()
            await asyncio.Event().wait()
        rid = request_id(request)
        self._running[rid] = began
        try:
            stall = self.parts.faults.take_stall(deployment.name)
            if stall is not None:
                await asyncio.sleep(stall)
            inputs = await self._inputs(payload)
            outputs, perf, notes = await self._run(deployment, inputs, payload.get("seed"))
        finally:
            self._running.pop(rid, None)
        perf["handler_ms"] = round((time.monotonic() - began) * 1000.0, 3)
        return {"outputs": outputs, "perf": perf, "warnings": notes}

    async def _inputs(self, payload: Dict[str, Any]) -> Any:
        """The observation the act function reads: the act's own inputs, else the newest of its
        episode once every one numbered before the act has arrived."""
        episode_id = payload.get("episode_id")
        if "inputs" in payload:
            return payload["inputs"]
        if not isinstance(episode_id, str) or not episode_id:
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"episode_id: {episode_id!r}; expected a non-empty string")
        seq = payload.get("seq")
        episode = self.episodes.get(episode_id)
        if isinstance(seq, int) and not isinstance(seq, bool):
            deadline = time.monotonic() + FRAMES_WAIT_S
            while episode.through < seq - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PlatformError(
                        ErrorCode.CONFLICT,
                        f"observations from number {episode.through + 1} of episode "
                        f"{episode_id!r} never arrived: post them again",
                        details={"reason": FRAMES_MISSING, "from": episode.through + 1})
                try:
                    await asyncio.wait_for(episode.arrived.wait(), left)
                except asyncio.TimeoutError:
                    pass
        if episode.latest is None:
            raise PlatformError(ErrorCode.INVALID_REQUEST,
                                f"episode {episode_id!r} has no observation yet: "
                                "observe() before act()")
        return episode.latest

    async def _run(self, deployment: Deployment, inputs: Any,
                   seed: Any) -> tuple[Dict[str, Any], Dict[str, Any], List[str]]:
        if not deployment.looks:
            return echo_outputs(inputs), {"inference_ms": 0.0, "queue_ms": 0.0}, []
        observation = policy_observation(inputs, seed if isinstance(seed, int) else None)
        try:
            result = await self.servers[deployment.name].infer(observation)
        except PlatformError:
            raise
        except Exception as exc:  # the policy raised
            raise PlatformError(ErrorCode.POLICY_ERROR, f"the act function of "
                                f"{deployment.name} raised: {exc}",
                                details={"exception": type(exc).__name__}) from None
        perf = {"inference_ms": round(result.inference_ms, 3),
                "queue_ms": round(result.queue_ms, 3)}
        outputs = looking_outputs(deployment, result.rows, observation.joint_positions)
        return outputs, perf, list(result.notes)
