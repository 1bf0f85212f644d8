"""The ``POST /v1/chat`` request body (PROTOCOL §8): OpenAI-shaped messages, strict schema.

Every object forbids keys it does not declare and takes JSON types as they are (no string to
number coercion), so a stray or mistyped key is a 422 naming it.
"""

from __future__ import annotations

from typing import Annotated, Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

MAX_MESSAGES = 256
DEFAULT_MAX_TOKENS = 1024

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class TextBlock(BaseModel):
    model_config = _STRICT
    type: Literal["text"]
    text: str


class ImageBlock(BaseModel):
    """A frame as ``encode()`` makes it: base64 (standard alphabet, no ``data:`` prefix)."""

    model_config = _STRICT
    type: Literal["image"]
    data: str
    media_type: Literal["image/jpeg"] = "image/jpeg"


Block = Annotated[Union[TextBlock, ImageBlock], Field(discriminator="type")]


class FunctionCall(BaseModel):
    model_config = _STRICT
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCall(BaseModel):
    model_config = _STRICT
    id: str
    type: Literal["function"]
    function: FunctionCall


class MessageIn(BaseModel):
    model_config = _STRICT
    role: Literal["system", "user", "assistant", "tool"]
    content: Union[str, List[Block], None] = None
    name: Optional[str] = None
    tool_calls: Optional[List[ToolCall]] = None
    tool_call_id: Optional[str] = None

    def text(self) -> str:
        """The message's text: the string, or its text blocks one per line."""
        if isinstance(self.content, str):
            return self.content
        blocks = self.content or []
        return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))

    def images(self) -> List[ImageBlock]:
        if isinstance(self.content, list):
            return [b for b in self.content if isinstance(b, ImageBlock)]
        return []


class FunctionSpec(BaseModel):
    model_config = _STRICT
    name: str = Field(min_length=1, max_length=64)
    description: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None


class ToolIn(BaseModel):
    model_config = _STRICT
    type: Literal["function"]
    function: FunctionSpec


class ChatRequest(BaseModel):
    model_config = _STRICT
    model: str
    messages: List[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, ge=1)
    temperature: Optional[float] = Field(None, ge=0.0, le=2.0)
    tools: Optional[List[ToolIn]] = None
