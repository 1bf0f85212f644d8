"""The data plane's wire facts: headers, formats and the msgpack media type."""

from __future__ import annotations

from sequence_base.msgpack_io import FORMAT as MSGPACK_FORMAT
from sequence_base.msgpack_io import MEDIA_TYPE as MSGPACK_MEDIA_TYPE

FORMATS_HEADER = "X-Seq-Act-Formats"
REQUEST_ID_HEADER = "X-Seq-Request-Id"
SESSION_HEADER = "X-Seq-Session"
# What this worker reads besides JSON: msgpack bodies, observations posted one by one
# (/observe) and acts that carry no data (the policy's act function called).
OBSERVE_FORMAT = "x-seq-observe/1"
CALL_FORMAT = "x-seq-call/1"
FORMATS = ", ".join((MSGPACK_FORMAT, OBSERVE_FORMAT, CALL_FORMAT))

__all__ = ["CALL_FORMAT", "FORMATS", "FORMATS_HEADER", "MSGPACK_FORMAT", "MSGPACK_MEDIA_TYPE",
           "OBSERVE_FORMAT", "REQUEST_ID_HEADER", "SESSION_HEADER"]
