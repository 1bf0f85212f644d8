"""The FastAPI application: the routers of PROTOCOL §1 and the loopback control endpoints."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from sequence_ai_gateway.core import Gateway
from sequence_ai_gateway.middleware import BodyLimitAndCounters
from sequence_ai_gateway.responses import AsciiJSONResponse, http_error, validation_error
from sequence_ai_gateway.routes import act, chat, control, health, models, ready, train


def create_app(gateway: Gateway) -> FastAPI:
    app = FastAPI(
        title="Sequences robot-inference API (local gateway)",
        description="Simulated models served on this machine; see docs/gateway.md.",
        version="1",
        default_response_class=AsciiJSONResponse,
    )
    app.state.gateway = gateway
    # Inclusion order is the order of /openapi.json's paths.
    for module in (health, models, ready, act, chat, train, control):
        app.include_router(module.router)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_middleware(BodyLimitAndCounters, gateway=gateway)
    return app
