"""Pure ASGI middleware: request id, access log, body size limit.

One access-log line per request: method, route template, status, latency, request id
(and the non-secret token id when one authenticated). Never a body, a query string,
an instruction or a token. A line whose request id the server generated holds no client
text at all (an unknown method is written ``-``), so it is logged ``safe_fields`` and
skips the log handler's secret scan; a client-offered request id is client text, and
its line is scanned as every other line is (ADR 2300). Bodies above the byte limit
answer 413 before the route runs, whether the client declared Content-Length or
streamed chunks.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scheduling.http.auth import RELEASE_KEY, release
from scheduling.http.codes import BODY_TOO_LARGE, INTERNAL
from scheduling.http.errors import TOO_LARGE_FLAG, envelope, route_template
from scheduling.logs import safe_fields
from scheduling.ports.unit_of_work import UnitOfWork

access_log = logging.getLogger("scheduling.http.access")
_log = logging.getLogger("scheduling.http")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The methods an access line names; any other (a client's token) is written ``-``."""


class _TooLarge(Exception):
    pass


def _headers(scope: Scope) -> tuple[str | None, str | None]:
    """The request's first ``x-request-id`` and ``content-length``, in one pass over its
    headers (two looks walked them twice, ADR 2660)."""
    offered = declared = None
    for key, value in scope.get("headers", ()):
        if key == b"x-request-id" and offered is None:
            offered = str(value.decode("latin-1"))
        elif key == b"content-length" and declared is None:
            declared = str(value.decode("latin-1"))
    return offered, declared


_ACCESS_LINE = "%s %s %d %.1fms request_id=%s%s"
_LOG_SITE = (__file__, 0, "EdgeMiddleware._log")
"""Where an access record says it was made: ``Logger.info`` would find this out per line
by walking the stack (``findCaller``, 2-3 µs of every request, ADR 2660); the record is
made here instead, so the site is stated once."""


class EdgeMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        new_request_id: Callable[[], str],
        observe: Callable[[str, str, int, float], None] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.new_request_id = new_request_id
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        offered, declared = _headers(scope)
        accepted = offered if offered and _REQUEST_ID.match(offered) else None
        generated = accepted is None
        request_id = self.new_request_id() if accepted is None else accepted
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        # The units of work guarded routes open (auth.guarded): closed before the
        # response starts, so the client never sees a byte before the rollback.
        held: list[UnitOfWork] = []
        state[RELEASE_KEY] = held
        status = 500
        sent_start = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                if held:
                    await release(held)
                status = int(message["status"])
                sent_start = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                raise _TooLarge
            await self.app(scope, self._limited(scope, receive), send_with_id)
        except _TooLarge:
            if not sent_start:
                await self._too_large(send_with_id)
        except Exception as exc:
            # Caught here, not by Starlette's outermost catch-all, which re-raises after
            # answering so that uvicorn logs the traceback: exception text, SQL, bound
            # values, even a presented token. The type is all that is logged.
            _log.error(
                "unhandled %s on %s %s",
                type(exc).__name__,
                scope.get("method", "?"),
                route_template(scope),
            )
            if not sent_start:
                if scope["state"].get(TOO_LARGE_FLAG) is not None:
                    await self._too_large(send_with_id)
                else:
                    await self._internal(send_with_id)
        finally:
            try:
                if held:  # ended without a response: nothing was sent after all
                    await release(held)
            finally:
                self._log(scope, status, started, request_id, generated=generated)

    def _limited(self, scope: Scope, receive: Receive) -> Receive:
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    # The framework may wrap our exception while reading the body; the
                    # flag lets its error handler answer 413 all the same.
                    scope["state"][TOO_LARGE_FLAG] = self.max_body_bytes
                    raise _TooLarge
            return message

        return limited

    async def _too_large(self, send: Send) -> None:
        detail = {"max_bytes": self.max_body_bytes}
        message = f"the request body exceeds {self.max_body_bytes} bytes"
        body = json.dumps(envelope(BODY_TOO_LARGE, message, detail)).encode()
        await _send_json(send, 413, body)

    async def _internal(self, send: Send) -> None:
        message = "the server failed; the request may be retried"
        # The bytes the framework's JSONResponse renders for the same envelope.
        body = json.dumps(envelope(INTERNAL, message), separators=(",", ":")).encode()
        await _send_json(send, 500, body)

    def _log(
        self, scope: Scope, status: int, started: float, request_id: str, *, generated: bool
    ) -> None:
        route = route_template(scope)
        elapsed = time.perf_counter() - started
        method = scope.get("method", "?")
        method = method if method in _METHODS else "-"
        state: dict[str, Any] = scope.get("state", {})
        token = state.get("token_id")
        if access_log.isEnabledFor(logging.INFO):
            # What ``access_log.info`` does (``Logger._log``) without its stack walk:
            # the same record (message, arguments, ``extra``), through the same
            # ``handle`` (the logger's filters, its handlers and its parents').
            path, line, function = _LOG_SITE
            args = (
                method,
                route,
                status,
                elapsed * 1000,
                request_id,
                f" token_id={token}" if token else "",
            )
            extra = safe_fields() if generated else None
            record = access_log.makeRecord(
                access_log.name, logging.INFO, path, line, _ACCESS_LINE, args, None, function, extra
            )
            access_log.handle(record)
        if self.observe is not None:
            self.observe(method, route, status, elapsed)


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
