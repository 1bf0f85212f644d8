"""Python client for the Sequences robot-inference API.

``connect()`` a model, then drive a robot with ``predict``/``next_action`` or the built-in
prefetching loop ``run``/``act``. httpx is the only hard dependency.
"""

from . import errors, events, recipes
from ._model.actions import prepare, to_joint_positions
from ._model.catalogue import Model, models
from ._model.observation import DEFAULT_QUALITY as DEFAULT_JPEG_QUALITY
from ._model.observation import encode, observation
from ._playback.playback import InstalledRows
from ._requests.calls import CallHandle
from ._run.status import RunStatus
from ._services.chat import ChatReply, chat, image_block
from ._services.training import (
    TERMINAL_STATUSES,
    TrainingJob,
    cancel_training,
    estimate_training_cost,
    train,
    training_job,
    training_jobs,
)
from ._transport.transport import DEFAULT_BASE_URL
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
from .outcome import Ending, RunOutcome, RunProgress
from .policy import Policy, connect
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
