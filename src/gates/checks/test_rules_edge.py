"""Spec rules of the HTTP edge beyond the gates, over a real uvicorn server against
PostgreSQL (API role, forced RLS, the durable principal directory, the token file):

* ``rule.http.bearer``: only the whole token names a caller. A right token id with a
  wrong, shortened or extended secret, the right token under another scheme than
  Bearer, or any token once the token file cannot be read, answers the same 401 as an
  unknown token; the
  presented token is compared through ``hmac.compare_digest`` with every entry's
  digest (constant time, no early exit); a disabled principal can do nothing on any
  route (its session's erasure, which needs no scope, included); no token reaches a
  stored row.
* ``rule.http.scope_matrix``: every route of the app accepts exactly its declared scope
  and refuses every other single scope (403 ``schedule.auth.scope_required``, nothing
  changed in any table); the OpenAPI document declares that scope per route.
* ``rule.http.error_envelope``: planted internal failures (an exception naming the
  presented token, a driver error carrying SQL and bound values, a real database error
  quoting the row's title) answer the generic envelope, and no log line of the process
  holds the exception text, SQL, bound values, the instruction or the token; the edge's
  own answers and lines (a streamed body past the limit, a malformed request id, the
  access line's route and a credential offered as the request id) say only what they
  should. Each client mistake answers its own code and the status of its kind (a
  stale revision and an illegal transition 409, a non-JSON body 400, a text/plain body
  415, an unserved method 405 with every served method in Allow, an unknown path 404),
  and client text in details (a credential-shaped or lowercase hex key or scope) is
  withheld; each SQLSTATE PostgreSQL raises (a trigger on the create's insert) answers
  its ADR 2220 / 0302 code: connection faults 503 with Retry-After, rejected statements
  a 4xx without it, a row-level-security denial the not-found status, a value the
  database cannot hold (class 22) the 422 ``invalid_value``.

Tests of the test: ``scheduling-gates mutate`` (mutants ``bearer.token_id_only``,
``bearer.digest_equality``, ``bearer.any_scheme``,
``auth.unscoped_route_skips_directory``, ``scopes.write_implies_cancel``,
``scopes.write_implies_read``, ``envelope.unavailable_message_leaks``,
``edge.streamed_body_unlimited``, ``edge.request_id_unvalidated``,
``edge.offered_id_unscanned``, ``edge.raw_path_logged``,
``envelope.unhandled_error_escapes``; and edge2's ``envelope.*``, ``pgerrors.*``,
``faults.too_many_clients_not_refusing``, ``envelope.no_bearer_challenge``).
"""

from __future__ import annotations

import hmac
import json
import os
import re
from datetime import datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from sqlalchemy.exc import OperationalError

from gates.checks.edge_support import (
    AUTH_CODES,
    PUBLIC_ROUTES,
    ROUTE_SCOPES,
    SERVER_LOGGERS,
    VOCABULARY,
    captured_logs,
    dump,
    error_code,
    fingerprint,
    set_enabled,
    set_scopes,
    tables,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling.bootstrap import ControlPlane
from scheduling.http.app import MAX_BODY_BYTES, create_app
from scheduling.logs import formatter
from scheduling.testing import digest_of, issue_token, read_entries
from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

OTHER = principal("edge-other", scopes=OWNER.scopes)


def answer(response: httpx.Response) -> tuple[int, str, str | None, bytes]:
    return (
        response.status_code,
        response.headers.get("content-type", ""),
        response.headers.get("www-authenticate"),
        response.content,
    )


async def materialized(world: HttpWorld) -> dict[str, str]:
    """One schedule with a materialized run: its id, run id and session id."""
    created = await world.create("edge-one", title="Edge")
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
    world.clock.advance(1)
    assert (await world.scheduler().worker.run_once()).errors == {}
    rows = await world.sql(
        "SELECT run_id AS id, session_id FROM schedule_occurrences WHERE schedule_id = :s", s=sid
    )
    assert len(rows) == 1, rows
    return {"schedule": sid, "run": str(rows[0]["id"]), "session": str(rows[0]["session_id"])}


# ------------------------------------------------------------------ bearer


class DigestSpy:
    """Records every ``hmac.compare_digest`` call while installed (the stdlib function,
    not a private attribute of the product)."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes | str, bytes | str]] = []
        self._real = hmac.compare_digest

    def __call__(self, a: Any, b: Any) -> bool:
        self.calls.append((a, b))
        return self._real(a, b)


def forgeries(token: str) -> dict[str, str]:
    """Tokens with the right id and a wrong secret (``sch_<id>_<secret>``)."""
    head, secret = token[:21], token[21:]
    flipped = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    return {
        "wrong_secret_same_length": head + flipped,
        "secret_shortened": head + secret[:-1],
        "secret_extended": token + "x",
        "secret_prefix": head + secret[:8],
        "secret_empty": head,
        "id_only": head[:-1],
        "secret_case_changed": head + secret.swapcase(),
    }


async def bearer(world: HttpWorld, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    token = world.tokens[(OWNER.tenant_id, OWNER.principal_id)]
    ok = await world.client.get("/v1/schedules", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200, ok.text
    unknown = await world.client.get(
        "/v1/schedules", headers={"Authorization": "Bearer sch_0123456789abcdef_" + "x" * 43}
    )
    assert unknown.status_code == 401, unknown.text
    assert error_code(unknown.json()) == "schedule.http.unauthenticated"
    # Every 401 names the scheme it takes (RFC 6750 section 3): the same challenge below.
    assert unknown.headers.get("www-authenticate") == "Bearer", dict(unknown.headers)
    baseline = answer(unknown)
    other = world.tokens[(OTHER.tenant_id, OTHER.principal_id)]
    cases = {**forgeries(token), "other_id_my_secret": other[:21] + token[21:]}
    digest = read_entries(world.token_path)[0].digest
    cases["stored_digest"] = digest
    for name, forged in cases.items():
        assert forged != token
        for path in ("/v1/schedules", "/v1/runs/00000000-0000-4000-8000-000000000001"):
            refused = await world.client.get(path, headers={"Authorization": f"Bearer {forged}"})
            assert answer(refused) == baseline, (name, path, refused.text)

    # Only the Bearer scheme carries a token: the right token under another scheme, or
    # with none, is the same 401 as an unknown token.
    schemes = {"basic": f"Basic {token}", "token": f"Token {token}", "bare": token}
    for name, header in schemes.items():
        refused = await world.client.get("/v1/schedules", headers={"Authorization": header})
        assert answer(refused) == baseline, (name, refused.text)

    # Two credentials name nobody, in either order and even when both are the caller's:
    # which header counts must not depend on the order a proxy left them in.
    pairs = {
        "own_then_unknown": (token, cases["wrong_secret_same_length"]),
        "unknown_then_own": (cases["wrong_secret_same_length"], token),
        "own_twice": (token, token),
        "own_then_other": (token, other),
    }
    for name, (first, second) in pairs.items():
        sent = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
        refused = await world.client.get("/v1/schedules", headers=sent)
        assert answer(refused) == baseline, (name, refused.text)

    # Constant time: every entry's digest is compared with the presented token's digest
    # through hmac.compare_digest, for a right and for a wrong token alike.
    entries = read_entries(world.token_path)
    for presented in (token, cases["wrong_secret_same_length"]):
        spy = DigestSpy()
        monkeypatch.setattr(hmac, "compare_digest", spy)
        try:
            await world.client.get(
                "/v1/schedules", headers={"Authorization": f"Bearer {presented}"}
            )
        finally:
            monkeypatch.undo()
        offered = digest_of(presented).encode()
        assert sorted(spy.calls) == sorted((offered, e.digest.encode()) for e in entries), (
            "the secret is not compared through hmac.compare_digest with every digest"
        )

    # A token file that can no longer be read authenticates nobody (not the entries it
    # held before): the same 401, and the repaired file serves again.
    kept = world.token_path.read_bytes()
    broken = world.token_path.with_suffix(".broken")
    broken.write_text('{"tokens": [', encoding="utf-8")
    os.replace(broken, world.token_path)
    try:
        refused = await world.client.get(
            "/v1/schedules", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer(refused) == baseline, ("broken_token_file", refused.text)
    finally:
        broken.write_bytes(kept)
        os.replace(broken, world.token_path)
    assert (await world.call("GET", "/v1/schedules")).status_code == 200

    # A disabled principal can do nothing, whatever it holds, on any route: each request
    # is one the owner could make on its own schedule, run and session (the session's
    # erasure, which needs no scope, included); enabling it again restores it.
    ids = await materialized(world)
    requests = [await request_for(world, route, ids, n) for n, route in enumerate(ORDER)]
    names = await tables(world)
    before = await fingerprint(world, names)
    await set_enabled(world, OWNER, False)
    for request in requests:
        call = dict(request)
        response = await world.call(call.pop("method"), call.pop("path"), **call)
        label = (request["method"], request["path"])
        assert response.status_code == 403, (label, response.text)
        assert error_code(response.json()) == "schedule.auth.principal_unavailable", label
    assert await fingerprint(world, names) == before, "a disabled principal changed state"
    await set_enabled(world, OWNER, True)
    assert (await world.call("GET", "/v1/schedules")).status_code == 200

    created = await world.create("bearer-stored")
    assert created.status_code == 201, created.text
    stored = await dump(world, names)
    for secret in (token, token[21:], other[21:]):
        assert secret not in stored, "a bearer token reached a stored row"
    return {"forgeries": sorted(cases), "entries": len(entries)}


@pytest.mark.rule("rule.http.bearer")
async def test_only_the_whole_token_names_a_caller(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, [OWNER, OTHER]) as world:
        # Decoy entries, so "every digest" is more than the caller's own.
        for n in range(3):
            issue_token(world.token_path, "tenant-decoy", f"decoy-{n}", world.clock.now())
        evidence = await bearer(world, monkeypatch)
    assert evidence["entries"] == 5
    gate_evidence.record("server", "uvicorn on 127.0.0.1, PostgreSQL API role, token file")
    gate_evidence.record("forgeries_refused_as_unknown", evidence["forgeries"])
    gate_evidence.record("compare_digest_calls_per_request", evidence["entries"])


# ------------------------------------------------------------------ route x scope


def app_routes(routes: Any) -> set[tuple[str, str]]:
    """Every (method, path) the app serves, included routers walked."""
    out: set[tuple[str, str]] = set()
    for route in routes:
        if isinstance(route, APIRoute):
            out.update((m, route.path) for m in route.methods or () if m != "HEAD")
        elif (included := getattr(route, "original_router", None)) is not None:
            out |= app_routes(included.routes)
    return out


def capturing(apps: list[FastAPI]) -> Any:
    def factory(plane: ControlPlane) -> FastAPI:
        app = create_app(plane)
        apps.append(app)
        return app

    return factory


async def detail(world: HttpWorld, sid: str) -> dict[str, Any]:
    await set_scopes(world, OWNER, OWNER.scopes)
    read = await world.call("GET", f"/v1/schedules/{sid}")
    assert read.status_code == 200, read.text
    document: dict[str, Any] = read.json()
    return document


async def request_for(
    world: HttpWorld, route: tuple[str, str], ids: dict[str, str], n: int
) -> dict[str, Any]:
    """A valid request for ``route`` against the owner's own resources."""
    method, template = route
    path = (
        template.replace("{schedule_id}", ids["schedule"])
        .replace("{run_id}", ids["run"])
        .replace("{session_id}", ids["session"])
    )
    kwargs: dict[str, Any] = {}
    if route == ("POST", "/v1/schedules"):
        kwargs["json"] = body(title=f"matrix {n}", requested_scopes=[])
        kwargs["headers"] = {"Idempotency-Key": f"matrix-{n}"}
    elif method == "PATCH":
        kwargs["json"] = update_body(await detail(world, ids["schedule"]), title=f"patched {n}")
    elif template.endswith(("/pause", "/resume")):
        current = (await detail(world, ids["schedule"]))["current_revision"]
        kwargs["json"] = {"expected_revision": current}
    elif route == ("DELETE", "/v1/schedules/{schedule_id}"):
        current = (await detail(world, ids["schedule"]))["current_revision"]
        kwargs["params"] = {"expected_revision": current}
    return {"method": method, "path": path, **kwargs}


# Accepting requests change state: this order keeps every later request valid.
ORDER = [
    ("GET", "/v1/schedules"),
    ("GET", "/v1/schedules/{schedule_id}"),
    ("GET", "/v1/schedules/{schedule_id}/occurrences"),
    ("POST", "/v1/schedules"),
    ("PATCH", "/v1/schedules/{schedule_id}"),
    ("POST", "/v1/schedules/{schedule_id}/pause"),
    ("POST", "/v1/schedules/{schedule_id}/resume"),
    ("DELETE", "/v1/schedules/{schedule_id}"),
    ("GET", "/v1/runs/{run_id}"),
    ("GET", "/v1/sessions/{session_id}/transcript"),
    ("POST", "/v1/runs/{run_id}/cancel"),
    ("DELETE", "/v1/sessions/{session_id}"),
]


async def matrix(world: HttpWorld, app: FastAPI) -> dict[str, Any]:
    served = app_routes(app.routes)
    assert served, "no route found: the walk is broken"
    assert served - PUBLIC_ROUTES == set(ROUTE_SCOPES), "a route is missing from the matrix"
    assert sorted(ORDER) == sorted(ROUTE_SCOPES)
    document = (await world.client.get("/openapi.json")).json()
    for (method, path), scope in ROUTE_SCOPES.items():
        operation = document["paths"][path][method.lower()]
        declared = [] if scope is None else [scope]
        assert operation["x-required-scopes"] == declared, (method, path)
        assert operation["security"] == [{"bearer": declared}], (method, path)
    for method, path in PUBLIC_ROUTES:
        assert document["paths"][path][method.lower()]["security"] == [], path

    ids = await materialized(world)
    names = await tables(world)
    accepted: dict[str, list[int]] = {}
    refused = 0
    n = 0
    for route in ORDER:
        scope = ROUTE_SCOPES[route]
        label = f"{route[0]} {route[1]}"
        holders: list[frozenset[str]] = [frozenset({s}) for s in VOCABULARY if s != scope]
        holders.append(frozenset())
        if scope is not None:
            holders.append(frozenset({scope}))  # the accepting call last
        # One valid request per route: a refused call changes nothing, so it stays valid
        # until the accepting call, which comes last; the tables are compared after the
        # last refusal.
        n += 1
        request = await request_for(world, route, ids, n)
        before = await fingerprint(world, names)
        for held in holders:
            await set_scopes(world, OWNER, held)
            call = dict(request)
            response = await world.call(call.pop("method"), call.pop("path"), **call)
            code = error_code(response.json())
            if scope is None or scope in held:
                assert response.status_code not in (401, 403), (label, held, response.text)
                assert code not in AUTH_CODES, (label, held, response.text)
                accepted.setdefault(label, []).append(response.status_code)
                continue
            assert response.status_code == 403, (label, sorted(held), response.text)
            assert code == "schedule.auth.scope_required", (label, sorted(held), response.text)
            assert response.json()["error"]["details"] == {"scope": scope}, label
            refused += 1
            if held == holders[-2 if scope is not None else -1]:
                # After the last refusal (before the accepting call): none wrote anything.
                assert await fingerprint(world, names) == before, (label, "a refusal wrote")
    # The exact scope really did its work on the owner's resources.
    for label in ("POST /v1/schedules/{schedule_id}/pause", "DELETE /v1/schedules/{schedule_id}"):
        assert accepted[label] == [200], (label, accepted[label])
    assert accepted["POST /v1/runs/{run_id}/cancel"] == [200], accepted
    return {"routes": len(ORDER), "refused": refused, "accepted": accepted}


@pytest.mark.rule("rule.http.scope_matrix")
async def test_every_route_accepts_exactly_its_scope(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    apps: list[FastAPI] = []
    async with http_world(pg_url, [OWNER], app_factory=capturing(apps)) as world:
        evidence = await matrix(world, apps[0])
    assert evidence["refused"] == 11 * 9  # 11 scoped routes x (8 other scopes + none)
    gate_evidence.record("routes", evidence["routes"])
    gate_evidence.record("refusals_with_nothing_changed", evidence["refused"])
    gate_evidence.record("accepted_statuses", evidence["accepted"])


# ------------------------------------------------------------------ error envelope

MARK = "planted-7f3a"
SQL = f"SELECT scopes FROM principals WHERE principal_id = '{MARK}-bound'"
GENERIC = {
    "schedule.http.internal": "the server failed; the request may be retried",
    "schedule.persistence.unavailable": "the request could not be completed",
}


class ExplodingTokens:
    """A token directory that fails naming the presented token."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = False

    def authenticate(self, presented: str) -> Any:
        if self.armed:
            raise RuntimeError(f"{MARK} token store broke on {presented!r}: {SQL}")
        return self.inner.authenticate(presented)


class ExplodingPrincipals:
    """A principal directory whose read fails with a driver error (statement, params)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = False

    async def current(self, tenant_id: str, principal_id: str) -> Any:
        if self.armed:
            raise OperationalError(SQL, {"principal_id": f"{MARK}-bound"}, Exception(MARK))
        return await self.inner.current(tenant_id, principal_id)

    def joined(self, principals: Any) -> ExplodingPrincipals:
        """The read inside a request's own unit of work (ADR 2380, 2395) fails the same
        way: ``__getattr__`` would hand back the real directory's, unplanted."""
        joined = ExplodingPrincipals(self.inner.joined(principals))
        joined.armed = self.armed  # armed before the request that joins it
        return joined

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def planting(planted: dict[str, Any]) -> Any:
    def factory(plane: ControlPlane) -> FastAPI:
        planted["tokens"] = plane.authenticator = ExplodingTokens(plane.authenticator)
        planted["principals"] = plane.principals = ExplodingPrincipals(plane.principals)
        return create_app(plane)

    return factory


TRIGGER = (
    f"""CREATE FUNCTION planted_failure() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION '{MARK} % %', NEW.definition->>'title', NEW.definition->>'instruction';
    END $$""",
    """CREATE TRIGGER planted_failure BEFORE INSERT ON schedule_revisions FOR EACH ROW
    WHEN (NEW.definition->>'title' LIKE 'planted%') EXECUTE FUNCTION planted_failure()""",
)
"""A real database failure whose driver message quotes the row's title and instruction."""


async def envelope(world: HttpWorld, planted: dict[str, Any]) -> dict[str, Any]:
    token = world.tokens[(OWNER.tenant_id, OWNER.principal_id)]
    instruction = f"Private task text {MARK}-instruction for the planted failure."
    # The raw path of a failed request is client text too: the server's logs name its
    # template (the test's own HTTP client logs the URL it requested, so its lines are
    # left out of that search).
    path_mark = "6b1f0c2e-0000-4000-8000-00000000f00d"
    secrets = [MARK, SQL, "SELECT", token, token[21:], "Traceback"]
    async with world.admin.engine.begin() as conn:
        for statement in TRIGGER:
            await conn.exec_driver_sql(statement)
    responses: dict[str, httpx.Response] = {}
    with captured_logs() as logs:
        planted["tokens"].armed = True
        responses["token_directory"] = await world.call("GET", "/v1/schedules")
        responses["token_directory_on_a_path"] = await world.call(
            "GET", f"/v1/schedules/{path_mark}"
        )
        planted["tokens"].armed = False
        planted["principals"].armed = True
        responses["principal_directory"] = await world.create("planted-a")
        planted["principals"].armed = False
        responses["database"] = await world.create(
            "planted-b", title=f"planted {MARK}-title", instruction=instruction
        )
    for name, response in responses.items():
        assert response.status_code >= 500, (name, response.text)
        document = response.json()
        code = error_code(document)
        assert code in GENERIC, (name, response.text)
        assert document == {"error": {"code": code, "message": GENERIC[code], "details": {}}}, (
            name,
            response.text,
        )
        raw = response.text + json.dumps(dict(response.headers))
        for secret in (*secrets, instruction):
            assert secret not in raw, (name, secret)
    text = logs.text()
    assert text, "nothing was logged: the capture is broken"
    for secret in (*secrets, instruction, f"{MARK}-title"):
        assert secret not in text, (secret, text[-2000:])
    server = [r for r in logs.records if r.name.startswith(SERVER_LOGGERS)]
    assert server, "no server record was captured"
    for record in server:
        assert path_mark not in record.getMessage(), ("the raw path was logged", record.name)
    return {"failures": sorted(responses), "log_lines": len(logs.lines)}


@pytest.mark.rule("rule.http.error_envelope")
async def test_internal_failures_answer_the_generic_envelope(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    planted: dict[str, Any] = {}
    async with http_world(pg_url, [OWNER], app_factory=planting(planted)) as world:
        evidence = await envelope(world, planted)
        # Unplanted, the same server serves again.
        assert (await world.call("GET", "/v1/schedules")).status_code == 200
    assert evidence["failures"] == [
        "database",
        "principal_directory",
        "token_directory",
        "token_directory_on_a_path",
    ]
    gate_evidence.record("planted_failures", evidence["failures"])
    gate_evidence.record("log_lines_searched", evidence["log_lines"])


ACCESS_LOGGER = "scheduling.http.access"
REQUEST_ID = r"[A-Za-z0-9._-]{1,64}"


@pytest.mark.rule("rule.http.error_envelope")
async def test_the_edge_refuses_and_logs_only_what_it_should(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The edge's own answers and lines: a body streamed past the byte limit with no
    Content-Length is the 413 envelope; a client request id that is not a short token
    is replaced by a generated one; the access line names the route template, not the
    path; a credential offered as the request id is redacted from the line as the
    product's log formatter writes it."""
    async with http_world(pg_url) as world:
        token = world.tokens[(OWNER.tenant_id, OWNER.principal_id)]

        async def chunks() -> Any:
            for _ in range(4):
                yield b"x" * (MAX_BODY_BYTES // 2)

        streamed = await world.call(
            "POST",
            "/v1/schedules",
            content=chunks(),
            headers={"Idempotency-Key": "streamed", "Content-Type": "application/json"},
        )
        assert streamed.status_code == 413, streamed.text
        assert error_code(streamed.json()) == "schedule.http.body_too_large"
        assert (await world.counts())["schedules"] == 0

        generated: set[str] = set()
        for offered in ("has space", "x" * 65, "a/b", "new\tline"):
            answered = await world.call("GET", "/v1/schedules", headers={"X-Request-Id": offered})
            echoed = answered.headers["x-request-id"]
            assert echoed != offered, f"the request id {offered!r} was taken as given"
            assert re.fullmatch(REQUEST_ID, echoed), echoed
            generated.add(echoed)
        # A generated id names one request: each replaced id is a new one.
        assert len(generated) == 4, f"generated request ids repeat: {sorted(generated)}"

        sid = "00000000-0000-4000-8000-0000000000aa"
        with captured_logs() as logs:
            await world.call("GET", f"/v1/schedules/{sid}", headers={"X-Request-Id": token})
        access = [r for r in logs.records if r.name == ACCESS_LOGGER]
        assert len(access) == 1, logs.text()
        line = formatter("text").format(access[0])
        assert "/v1/schedules/{schedule_id}" in line, line
        assert sid not in line, f"the access line names the raw path: {line}"
        assert token not in line, "a credential offered as the request id was logged"
        assert token[21:] not in line, "a credential's secret was logged"
    gate_evidence.record("access_line", line.split(" ", 1)[1])


# ------------------------------------------------------------------ status and code

TOKEN_TEXT = "sk_live_9fQ2xV7pLm3RtZ8wKc4NbH6y"
"""Client text shaped like a credential (long, mixed case): never echoed (ADR 2130)."""
HEX_SECRET = "f3a90c7e1b2d4f6a8c0e2b4d6f8a0c1e"
"""A lowercase hex secret: one 32-character word, no product name is that long."""
LIFECYCLE_PATH = "/v1/schedules/{schedule_id}"


def refused(response: httpx.Response, status: int, code: str, label: str) -> dict[str, Any]:
    """``response`` is the envelope with ``status`` and ``code``; its details."""
    assert response.status_code == status, (label, response.status_code, response.text)
    document = response.json()
    assert error_code(document) == code, (label, response.text)
    assert set(document["error"]) == {"code", "message", "details"}, (label, response.text)
    details: dict[str, Any] = document["error"]["details"]
    return details


async def refusals(world: HttpWorld) -> dict[str, str]:
    """Client mistakes, each answered with its own stable code and the status its kind
    has: a conflict with the state a client read is 409, a body that is not JSON 400, a
    media type the route does not take 415, a method the path does not serve 405 with
    every method it does serve in Allow (RFC 9110 15.5.6), an unknown path 404."""
    seen: dict[str, str] = {}
    created = await world.create("codes", title="Codes")
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    stale: dict[str, tuple[str, str, dict[str, Any]]] = {
        "pause": ("POST", f"/v1/schedules/{sid}/pause", {"json": {"expected_revision": 2}}),
        "resume": ("POST", f"/v1/schedules/{sid}/resume", {"json": {"expected_revision": 2}}),
        "cancel": ("DELETE", f"/v1/schedules/{sid}", {"params": {"expected_revision": 2}}),
        "update": (
            "PATCH",
            f"/v1/schedules/{sid}",
            {"json": update_body(detail, title="Stale", expected_revision=2)},
        ),
    }
    for label, (method, path, kwargs) in stale.items():
        response = await world.call(method, path, OWNER, **kwargs)
        details = refused(response, 409, "schedule.lifecycle.stale_revision", label)
        assert details.get("current_revision") == 1, (label, details)
        seen[f"stale {label}"] = "409"
    cancelled = await world.call("DELETE", f"/v1/schedules/{sid}", params={"expected_revision": 1})
    assert cancelled.status_code == 200, cancelled.text
    for action in ("pause", "resume"):
        response = await world.call(
            "POST", f"/v1/schedules/{sid}/{action}", json={"expected_revision": 1}
        )
        refused(response, 409, "schedule.lifecycle.illegal_transition", f"{action} cancelled")
        seen[f"{action} cancelled"] = "409"

    key = {"Idempotency-Key": "codes-body"}
    as_text = await world.call(
        "POST",
        "/v1/schedules",
        content=json.dumps(body()).encode(),
        headers={**key, "Content-Type": "text/plain"},
    )
    refused(as_text, 415, "schedule.http.unsupported_media_type", "text/plain body")
    seen["text/plain body"] = "415"
    for label, raw in (("truncated JSON", b'{"title": '), ("not JSON", b"title=x")):
        response = await world.call(
            "POST",
            "/v1/schedules",
            content=raw,
            headers={**key, "Content-Type": "application/json"},
        )
        refused(response, 400, "schedule.http.malformed_body", label)
        seen[label] = "400"

    # The methods the spec's routes serve on the schedule's path.
    served = {method for method, path in ROUTE_SCOPES if path == LIFECYCLE_PATH}
    for method in ("PUT", "POST"):
        response = await world.call(method, f"/v1/schedules/{sid}", json={})
        refused(response, 405, "schedule.http.method_not_allowed", f"{method} schedule")
        allowed = {m.strip() for m in response.headers.get("allow", "").split(",")}
        assert served <= allowed, (method, "Allow misses a served method", allowed)
        assert allowed <= served | {"HEAD"}, (method, "Allow names an unserved method", allowed)
        seen[f"{method} schedule"] = "405"
    missing = await world.call("GET", "/v1/schedule")
    refused(missing, 404, "schedule.http.route_not_found", "unknown path")
    seen["unknown path"] = "404"
    return seen


async def no_echo(world: HttpWorld) -> dict[str, str]:
    """Client text in a refusal's details travels only as a closed name: a
    credential-shaped key (in the cadence, the body, the limits) or scope is withheld,
    whatever code refuses it, and the code is still the one that names the mistake."""
    cadence = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}
    limits = {**body()["limits"], TOKEN_TEXT: 1}
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "cadence key": (body(cadence={**cadence, TOKEN_TEXT: 1}), "schedule.cadence.unknown_field"),
        "body key": ({**body(), TOKEN_TEXT: 1}, "schedule.http.invalid_request"),
        "limits key": (body(limits=limits), "schedule.http.invalid_request"),
        "scope": (body(requested_scopes=[TOKEN_TEXT]), "schedule.validation.unknown_scope"),
    }
    cases["hex cadence key"] = (
        body(cadence={**cadence, HEX_SECRET: 1}),
        "schedule.cadence.unknown_field",
    )
    cases["hex body key"] = ({**body(), HEX_SECRET: 1}, "schedule.http.invalid_request")
    seen: dict[str, str] = {}
    for n, (label, (sent, code)) in enumerate(cases.items()):
        response = await world.call(
            "POST", "/v1/schedules", json=sent, headers={"Idempotency-Key": f"echo-{n}"}
        )
        refused(response, 422, code, label)
        for secret in (TOKEN_TEXT, TOKEN_TEXT[8:24], HEX_SECRET, HEX_SECRET[:16]):
            assert secret not in response.text, (label, "client text echoed", response.text)
        seen[label] = code
    assert (await world.counts())["schedules"] == 0
    return seen


@pytest.mark.rule("rule.http.error_envelope")
async def test_each_client_mistake_has_its_status_and_code(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        echoed = await no_echo(world)
        statuses = await refusals(world)
    gate_evidence.record("refusals", statuses)
    gate_evidence.record("withheld_client_text", echoed)


FAULTS = {
    # ADR 2220: a server that refuses to serve is schedule.database.unavailable; a
    # connection that broke while serving is schedule.persistence.unavailable; a
    # serialization failure or a deadlock is schedule.persistence.retry (ADR 0302).
    # Each says when to come back.
    "57P03": "schedule.database.unavailable",  # cannot connect now (starting up)
    "53300": "schedule.database.unavailable",  # too many connections
    "57P01": "schedule.persistence.unavailable",  # the backend was terminated
    "08006": "schedule.persistence.unavailable",  # connection failure
    "40001": "schedule.persistence.retry",  # serialization failure
    "40P01": "schedule.persistence.retry",  # deadlock detected
}
REJECTED = {
    # ADR 0302: a statement the database rejects has the code of its SQLSTATE; it is
    # the request's conflict with stored state, not an outage (no 5xx, no Retry-After),
    # and a row the role may not touch answers the not-found status of a foreign row.
    "23505": (409, "schedule.persistence.duplicate"),
    "23514": (409, "schedule.persistence.constraint_violated"),
    "23502": (409, "schedule.persistence.constraint_violated"),
    "23503": (409, "schedule.persistence.missing_reference"),
    "42501": (404, "schedule.persistence.forbidden"),
    # A value the database cannot hold fails the same way every time: retrying it is
    # pointless, so no 503 and no Retry-After (SQLSTATE class 22).
    "22003": (422, "schedule.persistence.invalid_value"),  # numeric out of range
    "22008": (422, "schedule.persistence.invalid_value"),  # datetime overflow
    "22P02": (422, "schedule.persistence.invalid_value"),  # malformed text
    "22021": (422, "schedule.persistence.invalid_value"),  # a byte the encoding lacks
}
FAULT_TRIGGER = (
    """CREATE FUNCTION planted_fault() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'planted fault' USING ERRCODE = NEW.definition->>'title';
    END $$""",
    """CREATE TRIGGER planted_fault BEFORE INSERT ON schedule_revisions FOR EACH ROW
    WHEN (NEW.definition->>'instruction' LIKE 'Planted fault%')
    EXECUTE FUNCTION planted_fault()""",
)
"""The real server raising each SQLSTATE (the row's title) on the create's insert."""


@pytest.mark.rule("rule.http.error_envelope")
async def test_a_database_that_cannot_serve_says_when_to_retry(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """Each connection fault PostgreSQL raises answers 503 with its own stable code, the
    generic message, no detail and a Retry-After in seconds; each statement it rejects
    answers its own code and a 4xx, with no Retry-After; nothing is written."""
    async with http_world(pg_url) as world:
        async with world.admin.engine.begin() as conn:
            for statement in FAULT_TRIGGER:
                await conn.exec_driver_sql(statement)
        answered: dict[str, str] = {}
        for state, code in FAULTS.items():
            response = await world.create(
                f"fault-{state}", title=state, instruction=f"Planted fault {state}."
            )
            assert refused(response, 503, code, state) == {}, (state, response.text)
            retry = response.headers.get("retry-after", "")
            assert retry.isdigit(), (state, "no Retry-After in seconds", dict(response.headers))
            answered[state] = f"{code} Retry-After {retry}"
        for state, (status, code) in REJECTED.items():
            response = await world.create(
                f"fault-{state}", title=state, instruction=f"Planted fault {state}."
            )
            refused(response, status, code, state)
            assert "retry-after" not in response.headers, (state, dict(response.headers))
            answered[state] = f"{status} {code}"
        assert (await world.counts())["schedules"] == 0
        # The same request without the fault is served: the faults were the only cause.
        served = await world.create("fault-none", title="Served", instruction="No fault here.")
        assert served.status_code == 201, served.text
    gate_evidence.record("faults", answered)
