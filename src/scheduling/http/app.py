"""The app factory: ``create_app(plane)`` over a ``Plane`` (``bootstrap.build_http_app``
builds it over ``bootstrap.build_control_plane``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response

from scheduling import __version__
from scheduling.http.auth import SECURITY_SCHEME
from scheduling.http.codes import NOT_READY
from scheduling.http.errors import error_response, install_error_handlers
from scheduling.http.metrics import RequestMetrics, render
from scheduling.http.middleware import EdgeMiddleware
from scheduling.http.models import ErrorEnvelope, Health, Readiness
from scheduling.http.plane import Plane
from scheduling.http.routes import router

MAX_BODY_BYTES = 64 * 1024
"""Request bodies above this answer 413 (ADR 1502): the largest legal definition
(20,000-character instruction, 366 yearly dates) fits well inside it."""


def _request_ids() -> Callable[[], str]:
    # Per-process prefix plus a counter: unique, cheap, and not a random-UUID draw.
    prefix = os.urandom(4).hex()
    counter = itertools.count(1)
    return lambda: f"{prefix}-{next(counter):x}"


def create_app(
    plane: Plane,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    observe: Callable[[str, str, int, float], None] | None = None,
    extra_routes: Callable[[FastAPI], None] | None = None,
) -> FastAPI:
    app = FastAPI(
        title="scheduling control plane",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.plane = plane
    requests = RequestMetrics()
    app.state.requests = requests
    install_error_handlers(app)
    app.include_router(router)

    @app.get(
        "/healthz",
        response_model=Health,
        summary="The process is up",
        openapi_extra={"security": [], "x-required-scopes": []},
    )
    async def healthz() -> Health:
        return Health(status="ok")

    @app.get(
        "/readyz",
        response_model=Readiness,
        summary="The database answers and its schema is at the migration head",
        responses={503: {"model": ErrorEnvelope, "description": "not ready"}},
        openapi_extra={"security": [], "x-required-scopes": []},
    )
    async def readyz(request: Request) -> Readiness | JSONResponse:
        problems = await plane.readiness.problems()
        if problems:
            codes = [p.split(":", 1)[0] for p in problems]
            return error_response(503, NOT_READY, "not ready", {"problems": codes})
        return Readiness(status="ready")

    @app.get(
        "/metrics",
        summary="Prometheus metrics (tenant-safe labels; no identifiers or text)",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        openapi_extra={"security": [], "x-required-scopes": []},
    )
    async def metrics() -> Response:
        snapshot = None if plane.telemetry is None else await plane.telemetry.snapshot()
        return Response(render(snapshot, requests), media_type="text/plain; version=0.0.4")

    def observed(method: str, route: str, status: int, seconds: float) -> None:
        requests.observe(method, route, status, seconds)
        if observe is not None:
            observe(method, route, status, seconds)

    if extra_routes is not None:
        extra_routes(app)
    app.add_middleware(
        EdgeMiddleware,
        max_body_bytes=max_body_bytes,
        new_request_id=_request_ids(),
        observe=observed,
    )

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, description=__doc__
            )
            components = schema.setdefault("components", {})
            components["securitySchemes"] = {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token from `scheduling tokens add`; scopes come from"
                    " the principal directory, listed per operation in x-required-scopes.",
                }
            }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
