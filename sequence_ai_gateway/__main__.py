"""``python -m sequence_ai_gateway`` / ``sequence-ai-gateway``: serve the local gateway."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

from sequence_ai_gateway import DEFAULT_HOST, DEFAULT_PORT, DEVELOPMENT_KEY

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
    parser.add_argument("--latency-ms", type=float, default=None,
                        help="median simulated inference time for every model "
                             "(default: each model's own)")
    parser.add_argument("--jitter-ms", type=float, default=0.0,
                        help="lognormal spread of the inference time (default 0)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies every simulated time; 0 for tests (default 1)")
    parser.add_argument("--cold-start-s", type=float, default=0.0,
                        help="model load time; 0 = models start warm (default 0)")
    parser.add_argument("--keep-warm-s", type=float, default=600.0,
                        help="idle time after which a model goes cold (default 600)")
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
    from sequence_ai_gateway.core import Gateway
    from sequence_ai_gateway.policies import load_policy
    from sequence_ai_gateway.server import GatewayServer, is_loopback

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
            cold_start_s=args.cold_start_s,
            keep_warm_s=args.keep_warm_s,
        )
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
    print(f"SEQUENCES_BASE_URL={server.url}")
    if keys is None:
        print("sequence-ai-gateway: no --api-key or $SEQUENCES_GATEWAY_KEYS given: "
              "accepting the development key above")
    print(f"sequence-ai-gateway: serving {len(gateway.servers)} simulated model(s) on "
          f"{server.url}; Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        # uvicorn re-raises the Ctrl-C it handled once it has shut down cleanly.
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
