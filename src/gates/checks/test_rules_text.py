"""``rule.text.hygiene``: no text a client can send reaches a 5xx, a stored row, the
server's log or PostgreSQL's log (issue 23 findings 1 and 2).

A NUL byte and a lone UTF-16 surrogate (``\\ud800``, sent as the JSON escape in a body
and as its UTF-8 bytes in a header) are planted in every free-text field of the create
body (title, instruction, cadence.timezone, a requested scope), in the full-definition
PATCH, in the Idempotency-Key header, and in the arguments and call key of a model
tool call (``bootstrap.build_tools``). Each must be the stable
``schedule.text.invalid`` (422 over HTTP, a non-retryable failure from the tool
pipeline), never a 5xx, with no row written. (The schedule API has no client-supplied
metadata field: session metadata is written only by the materializer.) A NUL in a
header is refused by the HTTP client library itself, so it is sent over a raw socket:
the server must answer below 500 and store nothing.

Logs: every log record of the process is captured (``edge_support.captured_logs``, the
access log included, whose line count proves the capture saw the requests), and the
database is a private cluster whose log file is this check's own: the slice written
while the check ran must hold neither the planted marker nor any ERROR. The log read
is proven live before the verdict: a canary statement that PostgreSQL does refuse must
appear in the same slice (otherwise the check fails: ``postgres_log`` evidence says
whether the log was read). The mutants ``text.definition_check_dropped`` (no
service-level check: finding 1's 503 and PostgreSQL log leak, finding 2's 500) and
``text.tool_arguments_check_dropped`` (no argument check in the tool pipeline: an
escaping UnicodeEncodeError) each turn this rule red.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gates.checks.edge_support import captured_logs, dump, error_code, tables
from gates.checks.tool_support import ToolWorld
from gates.runner.pytest_plugin import GateEvidence
from scheduling.runtime.tool_pipeline import ToolStatus
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body

pytestmark = pytest.mark.postgres

RULE = "rule.text.hygiene"
TEXT_INVALID = "schedule.text.invalid"
MARKER = "zebra-quokka-hygiene"
"""Planted in every refused text: it must appear in no log and no row (the secret
scanner does not flag it: each probe's clean twin is accepted, see ``clean_twins``)."""
BAD = {"nul": "\x00", "surrogate": "\ud800"}


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[PrivateCluster, str]]:
    with private_cluster() as cluster:
        yield cluster, migrated_template(cluster.server)


@pytest.fixture
def fresh(private: tuple[PrivateCluster, str]) -> Iterator[tuple[PrivateCluster, str]]:
    cluster, template = private
    url = cluster.server.create_database(template)
    try:
        yield cluster, url
    finally:
        cluster.server.drop_database(url)


class PostgresLog:
    """The slice of the private cluster's log written since ``start``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size

    def since(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.start)
            return log.read().decode("utf-8", "replace")


async def proven_log_read(log: PostgresLog, sql: Any, evidence: GateEvidence) -> str:
    """The log slice of the probes, after proving the read sees what PostgreSQL logs:
    a canary the server refuses (a NUL escape cast to jsonb, finding 1's leak) must be
    in the slice read after it. Fails, never passes silently, when it is not."""
    probes = log.since()
    canary = f"canary-{MARKER[::-1]}"
    with pytest.raises(Exception, match=r"Unicode|unsupported|escape"):
        await sql("SELECT CAST(:doc AS jsonb) AS j", doc=json.dumps({"c": f"{canary}\x00"}))
    after = ""
    for _ in range(50):  # the logger may flush a moment after the error reply
        after = log.since()
        if canary in after:
            break
        await asyncio.sleep(0.05)
    readable = canary in after
    evidence.record("postgres_log", "read" if readable else "NOT READ: the canary never appeared")
    assert readable, f"PostgreSQL's log {log.path} does not show a refused statement"
    return probes


def bodies(bad: str) -> list[tuple[str, dict[str, Any]]]:
    """Create bodies with ``bad`` planted in one text field each (``bad=""``: the clean
    twins, each a valid definition, so a refusal is the planted character's doing)."""
    return [
        ("title", body(title=f"Brief {bad}{MARKER}")),
        ("instruction", body(instruction=f"Summarize {MARKER} news{bad} today")),
        (
            "cadence.timezone",
            body(
                instruction=f"Summarize {MARKER}",
                cadence={"kind": "DAILY", "local_time": "09:00", "timezone": f"Europe/{bad}Paris"},
            ),
        ),
        (
            "requested_scopes",
            body(instruction=f"Summarize {MARKER}", requested_scopes=[f"memory.{bad}read"]),
        ),
    ]


def bad_bodies() -> list[tuple[str, dict[str, Any]]]:
    return [(f"{f}/{name}", b) for name, bad in BAD.items() for f, b in bodies(bad)]


async def clean_twins(world: HttpWorld) -> int:
    """The probes without the planted character are accepted (201)."""
    for n, (label, payload) in enumerate(bodies("")):
        made = await world.call(
            "POST", "/v1/schedules", json=payload, headers={"Idempotency-Key": f"clean-{n}"}
        )
        assert made.status_code == 201, (label, made.text)
    return len(bodies(""))


def refused(response: httpx.Response, label: str, problems: list[str]) -> None:
    if response.status_code >= 500:
        problems.append(f"{label}: {response.status_code} {response.text[:200]}")
        return
    code = error_code(response.json()) if response.content else None
    if (response.status_code, code) != (422, TEXT_INVALID):
        problems.append(f"{label}: {response.status_code} {code} (want 422 {TEXT_INVALID})")
    if MARKER in response.text or "Traceback" in response.text:
        problems.append(f"{label}: the answer echoes the submitted text")


async def raw_request(base_url: str, head: bytes, payload: bytes) -> int:
    """One HTTP/1.1 request over a raw socket (a header the client library refuses to
    send); returns the status the server answered."""
    url = httpx.URL(base_url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(head + f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout=10)
    finally:
        writer.close()
        await writer.wait_closed()
    return int(line.split()[1])


async def http_probes(world: HttpWorld, problems: list[str]) -> dict[str, Any]:
    sent = 0
    for n, (label, payload) in enumerate(bad_bodies()):
        response = await world.client.post(
            "/v1/schedules",
            # json.dumps escapes NUL as \u0000 and a lone surrogate as \ud800 (ascii).
            content=json.dumps(payload).encode("ascii"),
            headers={
                **world.auth(),
                "Idempotency-Key": f"k{n}",
                "content-type": "application/json",
            },
        )
        refused(response, f"POST {label}", problems)
        sent += 1
    made = await world.create("good")
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    for name, bad in BAD.items():
        for field in ("title", "instruction"):
            update = update_body(detail, **{field: f"Rewrite {MARKER}{bad}"})
            response = await world.client.patch(
                f"/v1/schedules/{sid}",
                content=json.dumps(update).encode("ascii"),
                headers={**world.auth(), "content-type": "application/json"},
            )
            refused(response, f"PATCH {field}/{name}", problems)
            sent += 1
    good = json.dumps(body(instruction=f"Summarize {MARKER}")).encode("ascii")
    # A lone surrogate in the Idempotency-Key header arrives as its UTF-8 bytes.
    response = await world.client.post(
        "/v1/schedules",
        content=good,
        headers=[
            (b"authorization", world.auth()["Authorization"].encode()),
            (b"idempotency-key", f"key-{MARKER}-\ud800".encode("utf-8", "surrogatepass")),
            (b"content-type", b"application/json"),
        ],
    )
    refused(response, "Idempotency-Key/surrogate", problems)
    sent += 1
    # A NUL in a header: httpx (h11) refuses to send it, so the bytes go over a socket.
    with pytest.raises(httpx.LocalProtocolError):
        await world.client.post(
            "/v1/schedules", content=good, headers={**world.auth(), "Idempotency-Key": "a\x00b"}
        )
    head = (
        b"POST /v1/schedules HTTP/1.1\r\nhost: test\r\nconnection: close\r\n"
        + b"authorization: "
        + world.auth()["Authorization"].encode()
        + b"\r\nidempotency-key: key-"
        + MARKER.encode()
        + b"\x00nul\r\ncontent-type: application/json\r\n"
    )
    nul_status = await raw_request(world.base_url, head, good)
    if nul_status >= 500:
        problems.append(f"Idempotency-Key/nul over a socket: {nul_status}")
    sent += 1
    return {"requests": sent, "idempotency_key_nul_status": nul_status, "schedule": sid}


@pytest.mark.rule(RULE)
async def test_unstorable_text_over_http_is_422_and_leaves_no_trace(
    fresh: tuple[PrivateCluster, str], gate_evidence: GateEvidence
) -> None:
    cluster, url = fresh
    problems: list[str] = []
    async with http_world(url, [OWNER]) as world:
        names = await tables(world)
        before = await world.counts()
        log = PostgresLog(cluster.log_path)
        with captured_logs() as logs:
            evidence = await http_probes(world, problems)
        after = await world.counts()
        rows = await dump(world, names)
        pg_log = await proven_log_read(log, world.sql, gate_evidence)
        twins = await clean_twins(world)
    # Only the one good schedule (and its revision, key and event) was written.
    grown = {t: after[t] - before[t] for t in after}
    if grown != {t: 1 for t in after}:
        problems.append(f"rows written beyond the good schedule: {grown}")
    if MARKER in rows:
        problems.append("the marker reached a stored row")
    server = logs.text()
    access = [line for line in logs.lines if line.startswith("scheduling.http.access")]
    assert len(access) >= evidence["requests"], f"the log capture missed requests: {access}"
    if MARKER in server:
        problems.append("the marker reached the server's log")
    if MARKER in pg_log:
        problems.append("the marker reached PostgreSQL's log")
    if "ERROR" in pg_log:
        problems.append(f"PostgreSQL logged an error: {pg_log[-500:]}")
    gate_evidence.record("http_refusals", evidence["requests"])
    gate_evidence.record("clean_twins_accepted", twins)
    gate_evidence.record("idempotency_key_nul_status", evidence["idempotency_key_nul_status"])
    gate_evidence.record("server_log_lines", len(logs.lines))
    gate_evidence.record("postgres_log_bytes", len(pg_log))
    assert not problems, problems


@pytest.mark.rule(RULE)
async def test_unstorable_text_in_tool_calls_fails_without_retry_or_trace(
    fresh: tuple[PrivateCluster, str], gate_evidence: GateEvidence
) -> None:
    cluster, url = fresh
    problems: list[str] = []
    world = await ToolWorld.open(url)
    try:
        log = PostgresLog(cluster.log_path)
        before = await world.snapshot()
        good = {
            "title": "Ball for Marzipan",
            "instruction": f"Remind me {MARKER} to throw the ball.",
            "at": world.later(days=1),
        }
        calls: list[tuple[str, dict[str, Any], str]] = []
        for name, bad in BAD.items():
            for field in good:
                args = {**good, field: good[field][:2] + bad + good[field][2:]}
                calls.append((f"{field}/{name}", args, f"text-{field}-{name}"))
            calls.append((f"call key/{name}", good, f"key-{MARKER}{bad}"))
        with captured_logs() as logs:
            for label, args, key in calls:
                result = await world.call("schedule.create", args, key)
                if result.status is ToolStatus.SUCCEEDED or result.reason_code != TEXT_INVALID:
                    problems.append(f"{label}: {result.status} {result.reason_code}")
                if result.retryable:
                    problems.append(f"{label}: {result.reason_code} is retryable")
                if MARKER in json.dumps(result.to_json()):
                    problems.append(f"{label}: the result echoes the submitted text")
        if world.approvals.requests:
            problems.append(f"bad text reached approval: {len(world.approvals.requests)}")
        after = await world.snapshot()
        changed = [t for t in after if after[t] != before[t]]
        if changed:
            problems.append(f"tables changed: {changed}")
        pg_log = await proven_log_read(log, world.sql, gate_evidence)
        # The clean twin of every probe is accepted (approved by the scripted default).
        twin = await world.call("schedule.create", good, "clean-twin")
        assert twin.ok, (twin.reason_code, twin.details)
    finally:
        await world.close()
    if MARKER in logs.text():
        problems.append("the marker reached the server's log")
    if MARKER in pg_log:
        problems.append("the marker reached PostgreSQL's log")
    if "ERROR" in pg_log:
        problems.append(f"PostgreSQL logged an error: {pg_log[-500:]}")
    gate_evidence.record("tool_refusals", len(calls))
    gate_evidence.record("tool_tables_unchanged", not changed)
    assert not problems, problems


TOO_DEEP = "schedule.text.too_deep"
MAX_DEPTH = 32
"""The edges' bound on nested objects and arrays (ADR 2780), written out here."""


def nested(levels: int) -> Any:
    """A JSON array nested ``levels`` deep around the integer 1 (``1`` alone at 0)."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def weekly(weekdays: Any) -> dict[str, Any]:
    return {
        "kind": "WEEKLY",
        "local_time": "09:00",
        "timezone": "Europe/Paris",
        "weekdays": weekdays,
    }


def nesting_answer(response: httpx.Response) -> tuple[int, str | None]:
    code = error_code(response.json()) if response.content else None
    return response.status_code, code


@pytest.mark.rule(RULE)
async def test_values_nested_past_the_bound_are_refused_not_a_5xx(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """A cadence whose weekdays nest arrays: up to the bound the cadence's own type
    error answers; one level past it, and nine hundred levels (which a JSON parser still
    reads, and which recursive validation turned into a 500 before), are
    ``schedule.text.too_deep``; past the parser's own limit the body is malformed. On
    the create, the full-definition PATCH and a model tool call; nothing is written."""
    problems: list[str] = []
    # Levels of the weekdays value -> the answer; the body (or the call's arguments) and
    # the cadence object add two, so MAX_DEPTH - 2 is the deepest document accepted.
    expected = {
        MAX_DEPTH - 2: (422, "schedule.cadence.invalid_type"),
        MAX_DEPTH - 1: (422, TOO_DEEP),
        900: (422, TOO_DEEP),
        5000: (400, "schedule.http.malformed_body"),
    }
    async with http_world(pg_url, [OWNER]) as world:
        made = await world.create("nesting-good")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        before = await world.counts()
        for levels, want in expected.items():
            # Sent as text: the client's own encoder would refuse 5,000 levels.
            raw = json.dumps(body(cadence=weekly("@"))).replace(
                '"@"', "[" * levels + "1" + "]" * levels
            )
            created = await world.client.post(
                "/v1/schedules",
                content=raw.encode(),
                headers={
                    **world.auth(),
                    "Idempotency-Key": f"nested-{levels}",
                    "content-type": "application/json",
                },
            )
            patch = json.dumps(update_body(detail, cadence=weekly("@"))).replace(
                '"@"', "[" * levels + "1" + "]" * levels
            )
            updated = await world.client.patch(
                f"/v1/schedules/{sid}",
                content=patch.encode(),
                headers={**world.auth(), "content-type": "application/json"},
            )
            for route, response in (("create", created), ("update", updated)):
                if nesting_answer(response) != want:
                    problems.append(
                        f"{route} at {levels} levels: {nesting_answer(response)}, want {want}"
                    )
        if await world.counts() != before:
            problems.append("a refused nesting wrote rows")
    world_tools = await ToolWorld.open(pg_url)
    try:
        snapshot = await world_tools.snapshot()
        for levels, want_code in (
            # Within the bound the tool's closed schema refuses it (items are integers).
            (MAX_DEPTH - 2, "schedule.tool.invalid_arguments"),
            (MAX_DEPTH - 1, TOO_DEEP),
            (900, TOO_DEEP),
        ):
            args = {
                "title": "Ball for Marzipan",
                "instruction": "Remind me to throw the ball.",
                "cadence": weekly(nested(levels)),
            }
            result = await world_tools.call("schedule.create", args, f"nested-{levels}")
            if result.ok or result.retryable:
                problems.append(
                    f"tool at {levels} levels: {result.status} retryable={result.retryable}"
                )
            if result.reason_code != want_code:
                problems.append(f"tool at {levels} levels: {result.reason_code}, want {want_code}")
        if world_tools.approvals.requests:
            problems.append("a nested call reached approval")
        if await world_tools.snapshot() != snapshot:
            problems.append("a refused tool call changed a table")
    finally:
        await world_tools.close()
    gate_evidence.record("levels", sorted(expected))
    assert not problems, problems


@pytest.mark.rule(RULE)
async def test_unstorable_text_in_an_object_key_is_refused(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """A NUL or a lone surrogate in an object's key, not its value: in the create body's
    cadence over HTTP, and in a model tool call's argument name and cadence key. Keys
    are text too (the cadence is stored as JSON): each is ``schedule.text.invalid``, not
    the cadence's or the schema's unknown-field error, with nothing written or asked."""
    problems: list[str] = []
    sent = 0
    async with http_world(pg_url, [OWNER]) as world:
        before = await world.counts()
        for name, bad in BAD.items():
            payload = body(instruction=f"Summarize {MARKER}")
            payload["cadence"] = {**payload["cadence"], f"{MARKER}{bad}": 1}
            response = await world.client.post(
                "/v1/schedules",
                content=json.dumps(payload).encode("ascii"),
                headers={
                    **world.auth(),
                    "Idempotency-Key": f"key-in-cadence-{name}",
                    "content-type": "application/json",
                },
            )
            refused(response, f"POST cadence key/{name}", problems)
            sent += 1
        if await world.counts() != before:
            problems.append("a refused key wrote rows")
    tools = await ToolWorld.open(pg_url)
    try:
        snapshot = await tools.snapshot()
        good: dict[str, Any] = {
            "title": "Ball for Marzipan",
            "instruction": "Remind me to throw the ball.",
        }
        daily = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}
        for name, bad in BAD.items():
            calls = {
                "argument name": {**good, "at": tools.later(days=1), f"{MARKER}{bad}": 1},
                "cadence key": {**good, "cadence": {**daily, f"{MARKER}{bad}": 1}},
            }
            for label, args in calls.items():
                result = await tools.call(
                    "schedule.create", args, f"key-{label}-{name}".replace(" ", "-")
                )
                if result.ok or result.reason_code != TEXT_INVALID or result.retryable:
                    problems.append(f"tool {label}/{name}: {result.status} {result.reason_code}")
                if MARKER in json.dumps(result.to_json()):
                    problems.append(f"tool {label}/{name}: the result echoes the key")
                sent += 1
        if tools.approvals.requests:
            problems.append(f"a refused key reached approval: {len(tools.approvals.requests)}")
        if await tools.snapshot() != snapshot:
            problems.append("a refused tool call changed a table")
    finally:
        await tools.close()
    gate_evidence.record("key_refusals", sent)
    assert not problems, problems
