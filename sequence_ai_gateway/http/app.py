"""The FastAPI application: the routers of PROTOCOL §1 and the loopback control endpoints."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from sequence_ai_gateway.http.middleware import BodyLimitAndCounters
from sequence_ai_gateway.http.responses import AsciiJSONResponse, http_error, validation_error
from sequence_ai_gateway.http.routes import act, chat, control, health, models, ready, train
from sequence_ai_gateway.service.state import Gateway


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
    if gateway.platform is not None:
        from sequence_ai_gateway.platform import control as platform
        from sequence_ai_gateway.platform.errors import PlatformError, platform_error

        app.include_router(platform.router)
        app.include_router(platform.control)
        app.add_exception_handler(PlatformError, platform_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_middleware(BodyLimitAndCounters, gateway=gateway)
    return app
