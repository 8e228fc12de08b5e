"""The HTTP edge served: the only bootstrap module importing FastAPI and uvicorn."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI

from scheduling.bootstrap.control_plane import ControlPlane
from scheduling.http.app import create_app
from scheduling.http.serving import running, serve_until

# ------------------------------------------------------------------ the HTTP edge
# The CLI starts the HTTP server through these, never by importing the edge: the edges
# (cli, http, mcp) stay independent; the composition root is the one place joining them.


def build_http_app(
    plane: ControlPlane,
    *,
    observe: Callable[[str, str, int, float], None] | None = None,
    extra_routes: Callable[[FastAPI], None] | None = None,
) -> FastAPI:
    """The HTTP edge's ASGI app over ``plane`` (``build_control_plane``)."""
    return create_app(plane, observe=observe, extra_routes=extra_routes)


async def serve_http(
    plane: ControlPlane,
    host: str,
    port: int,
    stop: asyncio.Event,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``plane`` over HTTP (uvicorn) until ``stop`` is set; on ``sock`` (one of
    ``serve --workers N``'s processes sharing the parent's socket) when given."""
    app = build_http_app(plane)
    settle_heap()
    await serve_until(app, host, port, stop, sock)


def settle_heap() -> None:
    """Move what startup built (modules, the app, its routes and schemas) out of the
    collector's sight: a full collection otherwise walks it all again and again under
    load, a pause that showed in the read p99 (ADR 2300)."""
    gc.collect()
    gc.freeze()


def running_http(
    plane: ControlPlane, host: str = "127.0.0.1", port: int = 0
) -> AbstractAsyncContextManager[str]:
    """Serve ``plane`` on ``host:port`` (0: ephemeral) inside the caller's event loop
    until the block exits; yields the base URL."""
    return running(build_http_app(plane), host, port)
