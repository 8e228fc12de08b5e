"""uvicorn serving of the app: a blocking ``serve`` for the CLI and ``running`` (an
async context manager) that serves on a loopback socket inside the caller's event loop,
for development stacks, tests, gates and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn
from fastapi import FastAPI


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the caller owns the process's signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def config(app: FastAPI, host: str, port: int, *, access_log: bool = False) -> uvicorn.Config:
    # uvicorn's own access log prints the raw path and query; ours logs the route
    # template only (scheduling.http.middleware), so uvicorn's stays off.
    return uvicorn.Config(
        app, host=host, port=port, access_log=access_log, log_config=None, lifespan="off"
    )


@contextlib.asynccontextmanager
async def running(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: an ephemeral port) until the block exits;
    yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = _Server(config(app, host, bound))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # startup failed: raise its error
            await asyncio.sleep(0.01)
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()


async def serve_until(
    app: FastAPI, host: str, port: int, stop: asyncio.Event, sock: socket.socket | None = None
) -> None:
    """Serve until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it); on
    ``sock`` when given (a socket the worker processes share), else on ``host:port``."""
    server = _Server(config(app, host, port))
    task = asyncio.create_task(server.serve(sockets=None if sock is None else [sock]))
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    waiter.cancel()
    await task
