"""Request bodies as the routes parse them (PROTOCOL §1.3) and the documented error answers."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


# Nested optionals accept explicit null like absent.
class ImageFrameIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    view: str
    data: str
    timestamp_ms: Optional[int] = None


class ProprioceptionIn(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    joint_positions: List[float]
    joint_velocities: Optional[List[float]] = None
    end_effector_pose: Optional[List[float]] = None
    gripper: Optional[List[float]] = None


class ObservationIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    images: List[ImageFrameIn]
    proprioception: ProprioceptionIn
    instruction: str


class ActRequest(BaseModel):
    # Pass-through options (action_horizon, robot, ...) are accepted at the top level.
    model_config = ConfigDict(extra="allow")
    model: str
    observation: ObservationIn
    seed: Optional[int] = None


# Strict (no "3" for 3, no 2.0 for a count) and closed: an unknown key is a 422 (§1.7).
class TrainConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    epochs: Optional[float] = Field(None, gt=0, le=100)
    frames: Optional[int] = Field(None, ge=1, le=1_000_000_000)
    rank: Optional[int] = Field(None, ge=1, le=256)
    steps: Optional[int] = Field(None, ge=1, le=1_000_000)
    learning_rate: Optional[float] = Field(None, gt=0, lt=1)


class TrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    base_model: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    method: Literal["lora"]
    config: Optional[TrainConfigIn] = None


class ErrorBody(BaseModel):
    """Every error answer (§1.9): a string, an object (warming 503) or a list (422)."""

    detail: Any


_ERROR_MEANING = {
    400: "observation refused: a declared view missing, a frame that does not decode or is "
         "outside the trained aspect ratio, or a model served on another endpoint",
    401: "API key missing or unknown",
    402: "balance exhausted",
    404: "unknown model, or a training job unknown to this key",
    409: "the training job already ended (succeeded, failed or cancelled)",
    413: "request body over 2 MB, or a frame whose header declares more pixels than the limit",
    422: "request body refused by its schema (an unknown key, a value out of range), or a "
         "training request on a base that is not fine-tunable, an unusable dataset or a field "
         "past its bound (the detail names it)",
    429: "the key (or the gateway) has as many act requests in progress, or training jobs "
         "queued or running, as it may (Retry-After)",
    503: "model warming up (detail.status 'warming_up' and Retry-After) or unavailable; on "
         "/v1/train, every dataset reader busy",
    504: "upstream timed out",
}


def error_responses(*statuses: int) -> Dict[Union[int, str], Dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer, so /openapi.json lists them."""
    return {s: {"model": ErrorBody, "description": _ERROR_MEANING[s]} for s in statuses}
