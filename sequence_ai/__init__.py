"""Python client for the Sequences robot-inference API.

``connect()`` a model, then drive a robot with ``predict``/``next_action`` or the built-in
prefetching loop ``run``/``act``. httpx is the only hard dependency.

Everything public is importable from here (docs/client.md, "The public API"); the modules
under ``sequence_ai._*`` are the implementation and may change without notice.
"""

from . import errors, events, recipes
from ._model.actions import (
    angle_columns,
    gripper_columns,
    gripper_dims,
    prepare,
    to_joint_positions,
)
from ._model.catalogue import Model, find_model, models
from ._model.controllers import Controller, joint_position_problem
from ._model.observation import DEFAULT_QUALITY as DEFAULT_JPEG_QUALITY
from ._model.observation import encode, observation
from ._model.text import is_blank
from ._platform.adapter import Adapter, AdapterError, load_adapter
from ._playback.playback import InstalledRows
from ._playback.speed import AUTO as AUTO_SPEED
from ._playback.speed import MIN_SPEED
from ._requests.calls import CallHandle
from ._requests.session import VALIDATE_MODES, ValidateMode
from ._run.run_stats import RunStats
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
from ._transport.connection import Connection
from ._transport.deadline import Exchange
from ._transport.transport import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, MAX_IN_FLIGHT
from .errors import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    PinMismatch,
    RateLimited,
    SequencesError,
    Unavailable,
)
from .options import RunOptions, SeamLimits
from .outcome import Ending, RunOutcome, RunProgress
from .policy import Policy, connect
from .types import ActionChunk, ImageFrame, Observation, Prediction, Proprioception

__version__ = "0.1.0"

__all__ = [
    "connect",
    "Connection",
    "RunOptions",
    "SeamLimits",
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
    "PinMismatch",
    "Adapter",
    "AdapterError",
    "load_adapter",
    "Controller",
    "joint_position_problem",
    "find_model",
    "gripper_dims",
    "gripper_columns",
    "angle_columns",
    "is_blank",
    "ValidateMode",
    "VALIDATE_MODES",
    "AUTO_SPEED",
    "MIN_SPEED",
    "MAX_IN_FLIGHT",
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "Exchange",
    "RunStats",
    "__version__",
]
