"""Python client for the Sequences robot-inference API.

``connect()`` a model, then drive a robot with ``predict``/``next_action`` or the built-in
prefetching loop ``run``/``act``. httpx is the only hard dependency.
"""

from . import errors, events, recipes
from .actions import prepare, to_joint_positions
from .calls import CallHandle
from .catalogue import Model, models
from .chat import ChatReply, chat, image_block
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
from .observation import DEFAULT_QUALITY as DEFAULT_JPEG_QUALITY
from .observation import encode, observation
from .outcome import Ending, RunOutcome, RunProgress
from .playback import InstalledRows
from .policy import Policy, connect
from .status import RunStatus
from .training import (
    TERMINAL_STATUSES,
    TrainingJob,
    cancel_training,
    estimate_training_cost,
    train,
    training_job,
    training_jobs,
)
from .transport import DEFAULT_BASE_URL
from .types import ActionChunk, ImageFrame, Observation, Prediction, Proprioception

__version__ = "0.1.0"

__all__ = [
    "connect",
    "models",
    "Model",
    "chat",
    "ChatReply",
    "image_block",
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
    "train",
    "training_job",
    "training_jobs",
    "cancel_training",
    "estimate_training_cost",
    "TrainingJob",
    "TERMINAL_STATUSES",
    "DEFAULT_BASE_URL",
    "DEFAULT_JPEG_QUALITY",
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
