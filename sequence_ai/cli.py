"""``sequence-ai``: the catalogue as a table, ``doctor`` for setup problems, and the
fine-tuning verbs (training_cli.py)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional, TextIO

from ._model.catalogue import Model, models
from ._services import training_cli
from ._transport.connection import Connection
from ._transport.transport import (
    API_KEY_ENV,
    BASE_URL_ENV,
    Transport,
    check_base_url,
    resolve_api_key,
    resolve_base_url,
    user_agent,
)
from .errors import AuthError, InvalidRequest, OutOfCredit, SequencesError

__all__ = ["PROBE_BODY", "main"]

# Schema-valid and aimed at a model that cannot exist: the gateway checks key, then credit,
# then the model, so a 404 proves key and credit without running (or billing) inference.
PROBE_BODY: dict[str, Any] = {
    "model": "accounts/sequences/models/__doctor_probe__",
    "observation": {
        "images": [{"view": "exterior_1", "data": "Zm9v"}],
        "proprioception": {"joint_positions": [0.0]},
        "instruction": "doctor probe",
    },
}


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--base-url",
        default=None,
        help=f"gateway URL (default: ${BASE_URL_ENV}, else production)",
    )
    common.add_argument(
        "--ca-bundle", default=None, metavar="PEM", help="CA bundle to verify the gateway's TLS"
    )
    common.add_argument(
        "--allow-insecure",
        action="store_true",
        help="allow plain http:// to a host that is not this machine",
    )
    common.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="per-request timeout (s)"
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="sequence-ai", description="Sequences robot-inference API: catalogue and setup check."
    )
    parser.add_argument("--version", action="version", version=user_agent())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    listing = commands.add_parser("models", parents=[common], help="print the model catalogue")
    listing.add_argument("--endpoint", default=None, help="only act, chat or perceive models")
    doctor = commands.add_parser(
        "doctor", parents=[common], help="check key, gateway, auth and connection latency"
    )
    doctor.add_argument(
        "--samples", type=int, default=5, help="requests per latency measurement (default 5)"
    )
    training_cli.add_commands(commands)
    return parser


def _transport(args: argparse.Namespace, *, keyed: bool) -> Transport:
    where = Connection(
        base_url=args.base_url,
        timeout_s=args.timeout,
        verify=args.ca_bundle or True,
        allow_insecure=args.allow_insecure,
    )
    return where.transport(keyed=keyed)


def _state(model: Model) -> str:
    if model.state_dim is None:
        return "-"
    layout = model.state_layout or {}
    parts = [str(layout[k]) for k in ("joint_positions", "gripper") if layout.get(k)]
    return f"{model.state_dim} ({'+'.join(parts)})" if len(parts) > 1 else str(model.state_dim)


def _table(rows: list[Model]) -> list[str]:
    header = ("MODEL", "ENDPOINT", "ACTION SPACE", "DIM", "STATE", "HZ", "STEPS", "REPLAN", "VIEWS")
    body = [
        (
            m.short_id,
            m.endpoint or "-",
            m.action_space or "-",
            "-" if m.action_dim is None else str(m.action_dim),
            _state(m),
            "-" if m.control_hz is None else f"{m.control_hz:g}",
            "-" if m.action_horizon is None else str(m.action_horizon),
            "-" if m.open_loop_horizon is None else str(m.open_loop_horizon),
            ",".join(m.camera_views) or "-",
        )
        for m in rows
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]
    ]


def _models(args: argparse.Namespace, out: TextIO) -> int:
    with _transport(args, keyed=False) as transport:
        rows = models(args.endpoint, transport=transport)
    if not rows:
        print(
            "the catalogue is empty"
            + (f" for endpoint {args.endpoint!r}" if args.endpoint else ""),
            file=out,
        )
        return 0
    for line in _table(rows):
        print(line, file=out)
    return 0


class _Report:
    """Collects doctor's verdicts so the exit status reflects every failed check."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.failed = 0

    def line(self, verdict: str, what: str, detail: str) -> None:
        if verdict == "FAIL":
            self.failed += 1
        print(f"[{verdict:>4}] {what:<12} {detail}", file=self.out)


def _median_ms(call: Callable[[], object], samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def _probe(args: argparse.Namespace, report: _Report) -> None:
    try:
        with _transport(args, keyed=True) as transport:
            transport.post("/v1/act", PROBE_BODY)
    except AuthError:
        report.line("FAIL", "auth", "the gateway refused the API key (401)")
    except OutOfCredit:
        report.line("FAIL", "auth", "the key is valid but the account has no credit (402)")
    except InvalidRequest as exc:
        if exc.status == 404:
            report.line("ok", "auth", "key accepted and credit available (probe answered 404)")
        else:
            report.line("FAIL", "auth", f"unexpected answer to the probe: {exc}")
    except SequencesError as exc:
        report.line("FAIL", "auth", f"probe failed: {exc}")
    else:
        report.line("warn", "auth", "the probe was answered 200; this gateway skips the check")


def _latency(args: argparse.Namespace, report: _Report) -> None:
    samples = max(1, args.samples)

    def fresh() -> None:
        with _transport(args, keyed=False) as transport:
            transport.get("/v1/models")

    try:
        new_ms = _median_ms(fresh, samples)
        with _transport(args, keyed=False) as transport:
            transport.get("/v1/models")  # opens the connection the samples then reuse
            reused_ms = _median_ms(lambda: transport.get("/v1/models"), samples)
    except SequencesError as exc:
        report.line("FAIL", "latency", f"catalogue requests failed: {exc}")
        return
    report.line(
        "ok",
        "latency",
        f"GET /v1/models median of {samples}: new connection {new_ms:.1f} ms, "
        f"reused {reused_ms:.1f} ms (handshake ~ {max(0.0, new_ms - reused_ms):.1f} ms)",
    )


def _doctor(args: argparse.Namespace, out: TextIO) -> int:
    report = _Report(out)
    source = (
        "--base-url"
        if args.base_url
        else (BASE_URL_ENV if os.environ.get(BASE_URL_ENV) else "default")
    )
    url = resolve_base_url(args.base_url)
    try:
        check_base_url(url, allow_insecure=args.allow_insecure)
    except ValueError as exc:
        report.line("FAIL", "gateway", str(exc))
        return 1
    report.line("ok", "gateway", f"{url} (from {source})")
    has_key = resolve_api_key(None) is not None
    if has_key:
        report.line("ok", "api key", f"set (from {API_KEY_ENV})")
    else:
        report.line("FAIL", "api key", f"not set: export {API_KEY_ENV}=... (inference needs it)")
    try:
        with _transport(args, keyed=False) as transport:
            health = transport.get("/v1/health")
    except SequencesError as exc:
        report.line("FAIL", "reachable", str(exc))
        return 1
    if isinstance(health, dict):
        detail = ", ".join(f"{k} {v}" for k, v in health.items() if k in ("backend", "auth"))
    else:
        detail = repr(health)
    report.line("ok", "reachable", f"/v1/health answered ({detail or 'no details'})")
    if has_key:
        _probe(args, report)
    else:
        report.line("skip", "auth", "no API key to check")
    _latency(args, report)
    print("no problems found" if not report.failed else f"{report.failed} problem(s)", file=out)
    return 1 if report.failed else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``sequence-ai`` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    handler = {"models": _models, "doctor": _doctor, **training_cli.HANDLERS}[args.command]
    try:
        return handler(args, sys.stdout)
    except (SequencesError, ValueError, TypeError) as exc:
        print(f"sequence-ai {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
