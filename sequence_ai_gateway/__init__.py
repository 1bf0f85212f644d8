"""Local gateway: the Sequences HTTP API served on this machine with simulated models.

A service of its own beside the client: it shares no code with ``sequence_ai`` and speaks to it
only over HTTP. It needs the ``gateway`` extra (fastapi, uvicorn, Pillow, numpy); this package's
own import pulls in only the standard library. Run it with ``python -m sequence_ai_gateway`` or
``sequence-ai-gateway``.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
# The gateway's own key when none is configured (see docs/gateway.md); never a client's default.
DEVELOPMENT_KEY = "seq_dev_local_gateway"
