"""``python -m sequence_ai_gateway`` / ``sequence-ai-gateway``: serve the local gateway."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional, Sequence

from sequence_ai_gateway import DEFAULT_HOST, DEFAULT_PORT, DEVELOPMENT_KEY
from sequence_ai_gateway.service.serving import NETWORK_MS, NETWORK_SPREAD, PER_KB_MS
from sequence_ai_gateway.service.training import (
    DEFAULT_BALANCE_USD,
    DEFAULT_TRAIN_SECONDS,
    EXECUTORS,
)

KEYS_ENV = "SEQUENCES_GATEWAY_KEYS"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sequence-ai-gateway",
        description="Serve the Sequences robot-inference API locally with simulated models.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="bind address (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="port; 0 picks a free one (default %(default)s)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow binding a non-loopback address")
    parser.add_argument("--tls", action="store_true",
                        help="serve HTTPS with a certificate generated at start")
    parser.add_argument("--tls-dir", default=None, metavar="DIR",
                        help="keep the generated CA and certificate in DIR (reused if present)")
    parser.add_argument("--api-key", action="append", default=[], metavar="KEY",
                        help=f"accepted Bearer key (repeatable; else ${KEYS_ENV}, comma-separated;"
                             f" else the development key {DEVELOPMENT_KEY})")
    parser.add_argument("--broke-key", action="append", default=[], metavar="KEY",
                        help="a key that authenticates but is out of credit (402); repeatable")
    timing = parser.add_argument_group(
        "simulated time", "per request: network base (lognormal) + body kB x per-kB cost, then "
        "the model's queue and one of its workers for the inference (docs/gateway.md)")
    timing.add_argument("--network-ms", type=float, default=NETWORK_MS,
                        help="median network base per request (default %(default)s)")
    timing.add_argument("--per-kb-ms", type=float, default=PER_KB_MS,
                        help="network time per kB (1000 bytes) of request body "
                             "(default %(default)s)")
    timing.add_argument("--spread", type=float, default=NETWORK_SPREAD,
                        help="lognormal sigma of the network base (default %(default)s)")
    timing.add_argument("--workers", type=int, default=1,
                        help="workers per model, each one inference at a time (default 1)")
    timing.add_argument("--latency-ms", type=float, default=None,
                        help="flat override: every request takes this long on its model's "
                             "worker, no network, whatever its size (default: the model above)")
    timing.add_argument("--jitter-ms", type=float, default=0.0,
                        help="lognormal spread, in ms at the median, of the worker time: the "
                             "flat latency or the model's inference (default 0)")
    timing.add_argument("--scale", type=float, default=1.0,
                        help="multiplies every simulated time; 0 for tests (default 1)")
    parser.add_argument("--cold-start-s", type=float, default=0.0,
                        help="model load time; 0 = models start warm (default 0)")
    parser.add_argument("--keep-warm-s", type=float, default=600.0,
                        help="idle time after which a model goes cold (default 600)")
    training = parser.add_argument_group(
        "fine-tuning", "/v1/train jobs, kept per key (docs/gateway.md)")
    training.add_argument("--train-executor", choices=EXECUTORS, default="manual",
                          help="manual: jobs stay queued, as the service picks them up by hand; "
                               "sim: queued -> running -> succeeded over --train-seconds, then "
                               "the tuned model is served (default %(default)s)")
    training.add_argument("--train-seconds", type=float, default=DEFAULT_TRAIN_SECONDS,
                          metavar="S", help="length of a simulated run (default %(default)s)")
    training.add_argument("--train-balance-usd", type=float, default=DEFAULT_BALANCE_USD,
                          metavar="USD", help="each key's starting balance; a succeeded job "
                          "spends its quote, and at zero a submit is refused 402 "
                          "(--broke-key keys start at zero; default %(default)s)")
    parser.add_argument("--platform", action="store_true",
                        help="also serve today's platform: deployments driven over the direct-"
                             "worker protocol, a worker on its own HTTPS port (docs/gateway.md)")
    parser.add_argument("--platform-key", action="append", default=[], metavar="KEY",
                        help="accepted platform account key (seq_live_...; repeatable; default "
                             "seq_live_local_gateway)")
    parser.add_argument("--policy", action="append", default=[], metavar="MODULE:FACTORY",
                        help="serve a plug-in policy as well (repeatable)")
    parser.add_argument("--log-level", default="info",
                        choices=("critical", "error", "warning", "info", "debug"))
    return parser


def resolve_keys(given: Sequence[str]) -> Optional[List[str]]:
    if given:
        return list(given)
    from_env = [k.strip() for k in os.environ.get(KEYS_ENV, "").split(",") if k.strip()]
    return from_env or None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from sequence_ai_gateway.http.server import GatewayServer, is_loopback
    from sequence_ai_gateway.policies import load_policy
    from sequence_ai_gateway.service.state import Gateway

    if not is_loopback(args.host) and not args.allow_remote:
        print(f"sequence-ai-gateway: --host {args.host} is not a loopback address; "
              "pass --allow-remote to serve other machines", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"sequence-ai-gateway: --port {args.port}: expected 0..65535", file=sys.stderr)
        return 2
    keys = resolve_keys(args.api_key)
    try:
        extra = [load_policy(spec) for spec in args.policy]
        gateway = Gateway(
            extra_policies=extra,
            api_keys=keys,
            broke_keys=args.broke_key,
            latency_ms=args.latency_ms,
            jitter_ms=args.jitter_ms,
            scale=args.scale,
            network_ms=args.network_ms,
            per_kb_ms=args.per_kb_ms,
            spread=args.spread,
            workers=args.workers,
            cold_start_s=args.cold_start_s,
            keep_warm_s=args.keep_warm_s,
            train_executor=args.train_executor,
            train_seconds=args.train_seconds,
            train_balance_usd=args.train_balance_usd,
        )
        if args.platform:
            from sequence_ai_gateway.platform.service import Platform

            gateway.platform = Platform(gateway.latency, gateway.warmth,
                                        account_keys=args.platform_key, host=args.host)
            gateway.platform.start()
        server = GatewayServer(gateway, host=args.host, port=args.port, tls=args.tls,
                               tls_dir=args.tls_dir, log_level=args.log_level)
    except (ValueError, ImportError, OSError) as exc:
        print(f"sequence-ai-gateway: {exc}", file=sys.stderr)
        return 2
    # Parseable lines (KEY=value) first, so scripts and the test fixture can read them.
    if server.ca_bundle:
        print(f"SEQUENCES_CA_BUNDLE={server.ca_bundle}")
    if keys is None:
        print(f"SEQUENCES_API_KEY={DEVELOPMENT_KEY}")
    if gateway.platform is not None:
        print(f"SEQUENCES_PLATFORM_KEY={gateway.platform.account_key}")
    print(f"SEQUENCES_BASE_URL={server.url}")
    if keys is None:
        print("sequence-ai-gateway: no --api-key or $SEQUENCES_GATEWAY_KEYS given: "
              "accepting the development key above")
    print(f"sequence-ai-gateway: serving {len(gateway.servers)} simulated model(s) on "
          f"{server.url}; Ctrl-C stops", flush=True)
    # uvicorn raises the signal that stopped it again once it has shut down: SIGTERM too must
    # end here, with status 0, not kill the process.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has shut down cleanly.
        pass
    finally:
        if gateway.platform is not None:
            gateway.platform.stop()
    # Exiting: interpreter shutdown puts the default handlers back (a signal then kills the
    # process, status -2 or -15) — but leaves an ignored signal ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
