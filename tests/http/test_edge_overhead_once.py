"""The edge's per-request work is done once per request (ADR 2660).

Each test counts one repetition ADR 2660 removed and fails if it comes back: the
access line's stack walk (``Logger.findCaller``, which ``Logger.info`` runs for every
line), a second pass over the request's headers, and a second ``plane_of`` in the
guarded dependency. The app runs in-process over a stub plane; nothing here needs a
database. What the access record holds is asserted too, so a cheaper record that lost a
field fails.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from scheduling.http import auth
from scheduling.http.app import create_app
from scheduling.http.middleware import EdgeMiddleware
from scheduling.http.plane import Plane
from scheduling.ports.tokens import TokenIdentity

TOKEN = "sch_0123456789abcdef_" + "Zq8" * 10
SCHEDULE = "00000000-0000-4000-8000-000000000009"


class _Tokens:
    def authenticate(self, presented: str) -> TokenIdentity | None:
        if presented != TOKEN:
            return None
        return TokenIdentity("tok_0123456789abcdef", "acme", "alice")


class _Uow:
    principals: Any = None

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Unit:
    async def __aenter__(self) -> _Uow:
        return _Uow()


class _Service:
    def reading(self, tenant_id: str, principal_id: str) -> _Unit:
        return _Unit()


class _Nobody:
    """A principal directory that knows no one: every guarded request is a 403 after
    its principal read, so the whole guard runs and the route does not."""

    def joined(self, principals: Any) -> _Nobody:
        return self

    async def current(self, tenant_id: str, principal_id: str) -> None:
        return None


@dataclass
class _Plane:
    authenticator: Any = field(default_factory=_Tokens)
    service: Any = field(default_factory=_Service)
    principals: Any = field(default_factory=_Nobody)
    views: Any = None
    runs: Any = None
    sessions: Any = None
    readiness: Any = None
    telemetry: Any = None


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[_Records]:
    handler = _Records()
    access = logging.getLogger("scheduling.http.access")
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        access.removeHandler(handler)
        access.setLevel(level)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cast(Plane, _Plane()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://edge") as c:
        yield c


async def test_an_access_line_walks_no_stack(
    client: httpx.AsyncClient, records: _Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks: list[str] = []
    original = logging.Logger.findCaller

    def counting(self: logging.Logger, *args: Any, **kwargs: Any) -> Any:
        walks.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(logging.Logger, "findCaller", counting)
    auth_header = {"Authorization": f"Bearer {TOKEN}"}
    generated = await client.get(f"/v1/schedules/{SCHEDULE}", headers=auth_header)
    offered = await client.get(
        f"/v1/schedules/{SCHEDULE}", headers={**auth_header, "X-Request-Id": "client-7"}
    )
    assert (generated.status_code, offered.status_code) == (403, 403)
    assert [w for w in walks if w == "scheduling.http.access"] == []
    first, second = records.records
    # The record Logger.info made, field for field (the site is stated, not found).
    for record, request_id in ((first, generated.headers["x-request-id"]), (second, "client-7")):
        assert record.name == "scheduling.http.access"
        assert record.levelno == logging.INFO
        assert record.msg == "%s %s %d %.1fms request_id=%s%s"
        method, route, status, _ms, rid, token = record.args  # type: ignore[misc]
        assert (method, route, status, rid) == ("GET", "/v1/schedules/{schedule_id}", 403, rid)
        assert rid == request_id
        assert token == " token_id=tok_0123456789abcdef"
        assert record.funcName == "EdgeMiddleware._log"
        assert record.pathname.endswith("scheduling/http/middleware.py")
        assert record.exc_info is None
    # A generated request id is safe fields (unscanned); a client's one is not (ADR 2300).
    assert getattr(first, "safe_fields", False) is True
    assert not hasattr(second, "safe_fields")


class _CountedHeaders:
    """A scope's header list that counts the passes over it."""

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers, self.passes = headers, 0

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        self.passes += 1
        return iter(self.headers)


async def test_the_middleware_reads_the_headers_in_one_pass() -> None:
    seen: dict[str, Any] = {}

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen["request_id"] = scope["state"]["request_id"]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    headers = _CountedHeaders(
        [
            (b"x-request-id", b"first-1"),
            (b"content-length", b"0"),
            (b"x-request-id", b"second-2"),
            (b"content-length", b"999999"),
        ]
    )
    edge = EdgeMiddleware(inner, max_body_bytes=10, new_request_id=lambda: "gen-1")
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await edge(scope, receive, send)
    assert headers.passes == 1
    # The first of each header counts, as before: the request id is the client's
    # first, and the declared length is the first (0), so no 413.
    assert seen["request_id"] == "first-1"
    assert sent[0]["status"] == 204
    assert (b"x-request-id", b"first-1") in sent[0]["headers"]


async def test_the_guard_looks_the_plane_up_once(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = auth.plane_of

    def counting(request: Any) -> Any:
        calls.append(1)
        return original(request)

    monkeypatch.setattr(auth, "plane_of", counting)
    answer = await client.get(
        f"/v1/schedules/{SCHEDULE}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "schedule.auth.principal_unavailable"
    assert len(calls) == 1
