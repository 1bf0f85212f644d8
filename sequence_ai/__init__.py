"""Python client for the Sequences robot-inference API.

``connect()`` a model, then drive a robot with ``predict``/``next_action`` or the built-in
prefetching loop ``run``/``act``. httpx is the only hard dependency.
"""

from . import errors, events, recipes
from .actions import prepare, to_joint_positions
from .calls import CallHandle
from .catalogue import Model, models
from .errors import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    RateLimited,
    SequencesError,
    Unavailable,
)
from .observation import encode, observation
from .outcome import Ending, RunOutcome, RunProgress
from .playback import InstalledRows
from .policy import Policy, connect
from .status import RunStatus
from .types import ActionChunk, ImageFrame, Observation, Prediction, Proprioception

__version__ = "0.1.0"

__all__ = [
    "connect",
    "models",
    "Model",
    "observation",
    "encode",
    "Policy",
    "RunOutcome",
    "RunProgress",
    "InstalledRows",
    "Ending",
    "RunStatus",
    "CallHandle",
    "Prediction",
    "ActionChunk",
    "Observation",
    "ImageFrame",
    "Proprioception",
    "prepare",
    "to_joint_positions",
    "recipes",
    "errors",
    "events",
    "SequencesError",
    "AuthError",
    "OutOfCredit",
    "InvalidRequest",
    "Unavailable",
    "RateLimited",
    "ChunkExhausted",
    "InvalidResponse",
    "__version__",
]
