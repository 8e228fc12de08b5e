"""uvicorn serving of the MCP edge's streamable HTTP app.

``serving`` serves on a loopback (or given) socket inside the caller's event loop and
yields the endpoint URL (tests, gates, the transcript); ``serve_until`` serves until
the CLI's stop event is set. The uvicorn mechanics (no signal handling of its own, no
access log) are shared with the HTTP edge (``scheduling.asgi_serving``). A client that
keeps its event stream open cannot hold shutdown for longer than
``GRACEFUL_SHUTDOWN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from scheduling import asgi_serving
from scheduling.mcp.edge import McpEdge

PATH = "/mcp/"
GRACEFUL_SHUTDOWN_SECONDS = 3
OPTIONS: dict[str, Any] = {"ws": "none", "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS}


@contextlib.asynccontextmanager
async def serving(edge: McpEdge, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``edge`` on ``host:port`` (0: an ephemeral port) until the block exits;
    yields the endpoint URL (``http://host:port/mcp/``)."""
    async with edge.running() as app, asgi_serving.running(app, host, port, **OPTIONS) as bound:
        yield f"http://{host}:{bound}{PATH}"


async def serve_until(edge: McpEdge, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it)."""
    async with edge.running() as app:
        await asgi_serving.serve_until(app, host, port, stop, None, **OPTIONS)
