"""uvicorn serving of the MCP edge's streamable HTTP app.

``serving`` serves on a loopback (or given) socket inside the caller's event loop and
yields the endpoint URL (tests, gates, the transcript); ``serve_until`` serves until
the CLI's stop event is set. uvicorn's own signal handling stays off (the caller owns
the process's signals) and so does its access log (it prints raw paths). A client that
keeps its event stream open cannot hold shutdown for longer than
``GRACEFUL_SHUTDOWN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn

from scheduling.mcp.edge import McpEdge

PATH = "/mcp/"
GRACEFUL_SHUTDOWN_SECONDS = 3


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _server(app: object, host: str, port: int) -> _Server:
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        access_log=False,
        log_config=None,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    return _Server(config)


@contextlib.asynccontextmanager
async def serving(edge: McpEdge, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``edge`` on ``host:port`` (0: an ephemeral port) until the block exits;
    yields the endpoint URL (``http://host:port/mcp/``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    async with edge.running() as app:
        server = _server(app, host, bound)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started:
                if task.done():
                    task.result()  # startup failed: raise its error
                await asyncio.sleep(0.01)
            yield f"http://{host}:{bound}{PATH}"
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
            sock.close()


async def serve_until(edge: McpEdge, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it)."""
    async with edge.running() as app:
        server = _server(app, host, port)
        task = asyncio.create_task(server.serve())
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        waiter.cancel()
        await task
