"""Local gateway: the Sequences HTTP API served on this machine with simulated models.

Importing this package pulls in nothing beyond the standard library, so
``sequence_ai.gateway.testing`` works in a venv without FastAPI. The server itself
(``python -m sequence_ai.gateway``) needs the ``gateway`` extra: fastapi, uvicorn, Pillow, numpy.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
# Documented development key, used when no key is configured (see docs/gateway.md).
DEVELOPMENT_KEY = "seq_dev_local_gateway"
