"""uvicorn serving of the HTTP app: ``serve_until`` for the CLI and ``running`` (an
async context manager) that serves on a loopback socket inside the caller's event loop,
for development stacks, tests, gates and benchmarks. The uvicorn mechanics are shared
with the MCP edge (``scheduling.asgi_serving``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

from fastapi import FastAPI

from scheduling import asgi_serving


@contextlib.asynccontextmanager
async def running(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: an ephemeral port) until the block exits;
    yields the base URL."""
    async with asgi_serving.running(app, host, port) as bound:
        yield f"http://{host}:{bound}"


async def serve_until(
    app: FastAPI, host: str, port: int, stop: asyncio.Event, sock: socket.socket | None = None
) -> None:
    """Serve until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it); on
    ``sock`` when given (a socket the worker processes share), else on ``host:port``."""
    await asgi_serving.serve_until(app, host, port, stop, sock)
