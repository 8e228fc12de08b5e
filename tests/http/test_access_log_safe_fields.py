"""The access line skips the log handler's secret scan only when it holds no client text
(ADR 2300), and a secret a client puts in the path, the query, a header, the method or
the request id still never reaches it.

The app runs in-process over a stub plane that knows no token (every guarded route
answers 401 before any service), with the process's own log handler on the access
logger, so what is asserted is the line as written, redaction included. The scans are
counted at the scanner's class. A test of the exemption itself shows that a marked line
is written unscanned, so the middleware's choice of which lines to mark is what the
guarantee rests on.
"""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest

from scheduling.domain.secrets import SecretScanner
from scheduling.http.app import create_app
from scheduling.http.plane import Plane
from scheduling.logs import ProcessLogHandler, safe_fields
from scheduling.ports.tokens import TokenIdentity

PRODUCT_TOKEN = "sch_0123456789abcdef_" + "Zq8" * 10
GITHUB_TOKEN = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"


class _NoTokens:
    def authenticate(self, presented: str) -> TokenIdentity | None:
        return None


@dataclass
class _Plane:
    authenticator: Any = None
    service: Any = None
    principals: Any = None
    views: Any = None
    runs: Any = None
    sessions: Any = None
    readiness: Any = None
    telemetry: Any = None


@dataclass
class Edge:
    client: httpx.AsyncClient
    stream: io.StringIO
    scans: list[str]

    def lines(self) -> list[str]:
        return [line for line in self.stream.getvalue().splitlines() if line]


@pytest.fixture
def handler() -> Iterator[tuple[ProcessLogHandler, io.StringIO]]:
    stream = io.StringIO()
    handler = ProcessLogHandler(stream)
    access = logging.getLogger("scheduling.http.access")
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        yield handler, stream
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
        handler.close()


@pytest.fixture
async def edge(
    handler: tuple[ProcessLogHandler, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Edge]:
    scans: list[str] = []
    original = SecretScanner.scan

    def counting(self: SecretScanner, text: str, *args: Any, **kwargs: Any) -> Any:
        scans.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(SecretScanner, "scan", counting)
    app = create_app(cast(Plane, _Plane(authenticator=_NoTokens())))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
        yield Edge(client, handler[1], scans)


async def test_a_line_of_generated_fields_is_written_without_a_scan(edge: Edge) -> None:
    answer = await edge.client.get("/v1/schedules")
    assert answer.status_code == 401
    [line] = edge.lines()
    assert "scheduling.http.access: GET /v1/schedules 401 " in line
    assert f"request_id={answer.headers['x-request-id']}" in line
    assert edge.scans == []


async def test_secrets_in_path_query_and_headers_never_reach_the_line(edge: Edge) -> None:
    headers = {
        "Authorization": f"Bearer {PRODUCT_TOKEN}",
        "X-Api-Key": GITHUB_TOKEN,
        "Cookie": f"session={PRODUCT_TOKEN}",
        "User-Agent": GITHUB_TOKEN,
    }
    await edge.client.get(
        f"/v1/schedules/{PRODUCT_TOKEN}/occurrences",
        params={"cursor": GITHUB_TOKEN, "q": PRODUCT_TOKEN},
        headers=headers,
    )
    await edge.client.get("/v1/schedules", params={"cursor": PRODUCT_TOKEN}, headers=headers)
    await edge.client.get(f"/nowhere/{GITHUB_TOKEN}?token={PRODUCT_TOKEN}", headers=headers)
    lines = edge.lines()
    assert len(lines) == 3
    for line in lines:
        assert PRODUCT_TOKEN not in line
        assert GITHUB_TOKEN not in line
        assert "Zq8Zq8" not in line
        assert "aB3dE5" not in line
    assert " GET /v1/schedules/{schedule_id}/occurrences " in lines[0]
    assert " GET - 404 " in lines[2]  # an unmatched path is never written


async def test_a_method_outside_the_known_set_is_written_as_a_dash(edge: Edge) -> None:
    method = PRODUCT_TOKEN.upper()
    await edge.client.request(method, "/v1/schedules")
    [line] = edge.lines()
    assert method not in line
    assert "scheduling.http.access: - " in line
    assert edge.scans == []


async def test_an_offered_request_id_is_client_text_and_is_scanned(edge: Edge) -> None:
    for offered in (PRODUCT_TOKEN, GITHUB_TOKEN):
        answer = await edge.client.get("/v1/schedules", headers={"X-Request-Id": offered})
        assert answer.headers["x-request-id"] == offered  # the client's own id, echoed
    lines = edge.lines()
    assert len(lines) == 2
    assert PRODUCT_TOKEN not in lines[0]
    assert "[redacted schedule_api_token]" in lines[0]
    assert GITHUB_TOKEN not in lines[1]
    assert "[redacted " in lines[1]
    assert len(edge.scans) == 2  # one per line that held client text
    edge.scans.clear()
    await edge.client.get("/v1/schedules", headers={"X-Request-Id": "order-42"})
    assert "request_id=order-42" in edge.lines()[-1]
    assert len(edge.scans) == 1


# ------------------------------------------------------------------ the exemption


def _written(stream: io.StringIO, **kwargs: Any) -> str:
    logging.getLogger("scheduling.http.access").info("token %s", PRODUCT_TOKEN, **kwargs)
    return stream.getvalue().splitlines()[-1]


def test_the_exemption_is_real_so_only_safe_lines_may_carry_it(
    handler: tuple[ProcessLogHandler, io.StringIO],
) -> None:
    stream = handler[1]
    # Marked: written as given (the scan is skipped) - the reason the middleware marks
    # only lines without client text, which the tests above hold it to.
    assert PRODUCT_TOKEN in _written(stream, extra=safe_fields())
    assert PRODUCT_TOKEN not in _written(stream)
    # A traceback or an extra on a marked record is still scanned.
    try:
        raise RuntimeError(PRODUCT_TOKEN)
    except RuntimeError:
        logging.getLogger("scheduling.http.access").exception("failed", extra=safe_fields())
    assert PRODUCT_TOKEN not in stream.getvalue().split("failed", 1)[1]
    assert PRODUCT_TOKEN not in _written(stream, extra={**safe_fields(), "code": PRODUCT_TOKEN})


def test_the_json_format_honours_the_same_exemption() -> None:
    stream = io.StringIO()
    handler = ProcessLogHandler(stream, kind="json")
    logger = logging.getLogger("scheduling.http.access.json-test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info("token %s", PRODUCT_TOKEN)
        logger.info("token %s", PRODUCT_TOKEN, extra=safe_fields())
    finally:
        logger.removeHandler(handler)
        handler.close()
    scanned, marked = stream.getvalue().splitlines()
    assert PRODUCT_TOKEN not in scanned
    assert PRODUCT_TOKEN in marked
