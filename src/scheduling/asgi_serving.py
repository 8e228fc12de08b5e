"""uvicorn serving shared by the HTTP and the MCP edge (sibling edges may not import
each other, so the one copy lives below both): a server that leaves the process's
signals to the caller, ``running`` on a loopback (or given) socket inside the caller's
event loop, and ``serve_until`` a stop event.

uvicorn's own access log stays off (it prints raw paths and queries; the HTTP edge logs
route templates) and so does the ASGI lifespan (the caller owns the app's life)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn


class Server(uvicorn.Server):
    """uvicorn without its own signal handling: the caller owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """The edges' uvicorn settings; ``options`` are an edge's own (``ws``, timeouts)."""
    return uvicorn.Config(
        app, host=host, port=port, access_log=False, log_config=None, lifespan="off", **options
    )


@contextlib.asynccontextmanager
async def running(app: Any, host: str, port: int, **options: Any) -> AsyncIterator[int]:
    """Serve ``app`` on ``host:port`` (0: an ephemeral port) until the block exits;
    yields the bound port once the server has started."""
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets whose proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = int(sock.getsockname()[1])
    server = Server(config(app, host, bound, **options))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # startup failed: raise its error
            await asyncio.sleep(0.01)
        yield bound
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()


async def serve_until(
    app: Any,
    host: str,
    port: int,
    stop: asyncio.Event,
    sock: socket.socket | None = None,
    **options: Any,
) -> None:
    """Serve until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it); on
    ``sock`` when given (a socket worker processes share), else on ``host:port``."""
    server = Server(config(app, host, port, **options))
    task = asyncio.create_task(server.serve(sockets=None if sock is None else [sock]))
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    waiter.cancel()
    await task
