"""A role's ``GET /metrics`` on its own port: a minimal ASGI app on uvicorn (the stack the
API already runs), so a scrape can await the role's scrape-time gauges on the role's
event loop. Anything but ``GET /metrics`` is a 404; a failed gauge read is logged and
the in-process families are still served."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Protocol

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

_log = logging.getLogger(__name__)

ROLE_LABELS = frozenset({"tenant", "disposition", "status", "window", "lane", "le"})
"""Every label a role's metrics may carry (a test scrapes both roles and checks it)."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class Exported(Protocol):
    registry: CollectorRegistry

    async def refresh(self) -> None:
        """Read the scrape-time gauges (may fail: the scrape still answers)."""
        ...


def metrics_app(exported: Exported) -> App:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "GET" or scope["path"] != "/metrics":
            await _respond(send, 404, b"not found\n", b"text/plain")
            return
        try:
            await exported.refresh()
        except Exception:
            _log.warning("metrics gauges unavailable for this scrape", exc_info=True)
        await _respond(send, 200, generate_latest(exported.registry), CONTENT_TYPE_LATEST.encode())

    return app


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the role's CLI owns SIGINT/SIGTERM."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serving_metrics(exported: Exported, host: str, port: int) -> AsyncIterator[int]:
    """Serve ``exported`` on ``host:port`` (``0``: an ephemeral port) while inside;
    yields the bound port. The socket is bound here, so a port in use is an ``OSError``
    before anything runs. The server stops on exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    config = uvicorn.Config(
        metrics_app(exported),
        log_level="warning",
        log_config=None,
        lifespan="off",
        ws="none",
        access_log=False,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # uvicorn offers no started event
            if task.done():
                task.result()  # startup failed: raise its error
            await asyncio.sleep(0.01)
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        sock.close()
