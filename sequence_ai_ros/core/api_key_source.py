"""Where the node's API key comes from: the `api_key_file` parameter, else SEQUENCES_API_KEY.

The key is never a parameter. Like ssh with a private key, a file that group or others may
access is refused.
"""

from __future__ import annotations

import os
import stat

from sequence_ai import API_KEY_ENV


class ApiKeyError(ValueError):
    """No usable key; the message says where one is looked for and what to do."""


def read_api_key(path: str) -> str | None:
    """The key from `path`; None (empty path) lets the client read SEQUENCES_API_KEY, which
    must then be set."""
    if not path:
        if not os.environ.get(API_KEY_ENV, "").strip():
            # Short enough that `ros2 topic echo /diagnostics` (128 characters) shows it whole.
            raise ApiKeyError(
                f"no API key: set {API_KEY_ENV} in the node's environment or its api_key_file "
                "parameter"
            )
        return None
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            if mode & 0o077:
                raise ApiKeyError(
                    f"api_key_file {path!r} is accessible by group or others (mode "
                    f"{mode:04o}); the key must be private to its owner: chmod 600 {path}"
                )
            key = handle.read().strip()
    except OSError as exc:
        raise ApiKeyError(f"api_key_file {path!r} cannot be read: {exc.strerror}") from exc
    if not key:
        raise ApiKeyError(f"api_key_file {path!r} is empty; expected the API key")
    return key
