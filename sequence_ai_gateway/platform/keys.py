"""The platform's keys: ``seq_live_`` keys act for the whole account, ``seq_robot_`` keys drive
one deployment only. The account key authenticates the gateway and is never taken by a worker."""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional

from sequence_ai_gateway.platform.errors import ErrorCode, PlatformError

ACCOUNT_PREFIX = "seq_live_"
ROBOT_PREFIX = "seq_robot_"
# The defaults when none is given: printed at start, documented in docs/gateway.md.
DEFAULT_ACCOUNT_KEY = "seq_live_local_gateway"


def default_robot_key(deployment: str) -> str:
    return f"{ROBOT_PREFIX}local_{deployment}"


class Keys:
    def __init__(self, account_keys: Iterable[str], robot_keys: Mapping[str, str]) -> None:
        self.account_keys = list(account_keys)
        self.robot_keys: Dict[str, str] = dict(robot_keys)
        for key in self.account_keys:
            if not key.startswith(ACCOUNT_PREFIX):
                raise ValueError(f"account key {key[:12]!r}...: expected the prefix "
                                 f"{ACCOUNT_PREFIX}")
        for key in self.robot_keys:
            if not key.startswith(ROBOT_PREFIX):
                raise ValueError(f"robot key {key[:12]!r}...: expected the prefix {ROBOT_PREFIX}")

    def check(self, key: Optional[str], deployment: Optional[str]) -> None:
        """401 for a missing or unknown key; 403 for a robot key used on another deployment
        (``deployment`` None: a call about no one deployment, which a robot key may not make)."""
        if not key:
            raise PlatformError(ErrorCode.UNAUTHENTICATED,
                                "missing API key: send the header 'Authorization: Bearer <key>'",
                                hint="set SEQUENCES_API_KEY to a seq_live_ or seq_robot_ key")
        if key in self.account_keys:
            return
        bound = self.robot_keys.get(key)
        if bound is None:
            raise PlatformError(ErrorCode.UNAUTHENTICATED,
                                "API key not recognised (unknown, revoked or expired)")
        if bound != deployment:
            raise PlatformError(
                ErrorCode.FORBIDDEN,
                f"this robot key drives {bound!r} only, not {deployment!r}",
                details={"resource": "deployment", "name": deployment, "key_deployment": bound})
