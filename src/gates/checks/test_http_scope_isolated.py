"""gate.schedule.scope_isolated, facet http: foreign reads over HTTP equal missing ones.

Over a real uvicorn server against PostgreSQL (API role, forced RLS), Alice owns three
schedules (one paused). Bob (same tenant) and "alice" of another tenant (same
principal id) call every schedule route by id - point read, occurrence inbox, PATCH,
pause, resume and DELETE - each with a valid body. Every foreign answer must be
byte-identical (status, content type, body) to the answer for an id that never existed,
and nothing may change; their lists must not show the owner's schedules. The same
holds for the owner's run through ``GET /v1/runs/{id}`` and its session transcript,
and for cancelling that run and erasing that session (which change nothing).

The test of the test plants a server whose 404 body for a schedule that exists says so;
the check fails on it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from gates.checks.edge_support import fingerprint, tables
from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import OWNER, HttpWorld, http_world, planted, update_body
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.scope_isolated"
LINKED = {"run.read", "run.cancel", "session.read"}
SAME_TENANT = principal("bob", scopes=OWNER.scopes)
OTHER_TENANT = principal(OWNER.principal_id, tenant_id="tenant-b", scopes=OWNER.scopes)
MISSING = "00000000-0000-4000-8000-00000000dead"


def answer(response: httpx.Response) -> tuple[int, str, bytes]:
    return (response.status_code, response.headers.get("content-type", ""), response.content)


async def by_id(world: HttpWorld, who: Any, sid: str, detail: dict[str, Any]) -> dict[str, Any]:
    """Every schedule route that names a schedule, with bodies valid for it."""
    guard = {"expected_revision": detail["current_revision"]}
    return {
        "get": await world.call("GET", f"/v1/schedules/{sid}", who),
        "occurrences": await world.call("GET", f"/v1/schedules/{sid}/occurrences", who),
        "patch": await world.call("PATCH", f"/v1/schedules/{sid}", who, json=update_body(detail)),
        "pause": await world.call("POST", f"/v1/schedules/{sid}/pause", who, json=guard),
        "resume": await world.call("POST", f"/v1/schedules/{sid}/resume", who, json=guard),
        "delete": await world.call(
            "DELETE", f"/v1/schedules/{sid}", who, params={"expected_revision": 1}
        ),
    }


async def isolation(world: HttpWorld) -> dict[str, Any]:
    owned: list[str] = []
    for n in range(3):
        created = await world.create(f"iso-{n}", title=f"S{n}")
        assert created.status_code == 201, created.text
        owned.append(created.json()["id"])
    paused = await world.call(
        "POST", f"/v1/schedules/{owned[1]}/pause", json={"expected_revision": 1}
    )
    assert paused.status_code == 200, paused.text
    details = {}
    for sid in owned:
        read = await world.call("GET", f"/v1/schedules/{sid}")
        assert read.status_code == 200, read.text  # the owner sees them
        details[sid] = read.json()
    before = await world.sql("SELECT * FROM schedules ORDER BY id")
    compared = 0
    for who in (SAME_TENANT, OTHER_TENANT):
        baseline = {
            k: answer(r) for k, r in (await by_id(world, who, MISSING, details[owned[0]])).items()
        }
        assert all(status == 404 for status, _, _ in baseline.values()), baseline
        for sid in owned:
            for name, response in (await by_id(world, who, sid, details[sid])).items():
                assert answer(response) == baseline[name], (who.principal_id, name, response.text)
                compared += 1
        for states in ([], ["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"]):
            listed = await world.call("GET", "/v1/schedules", who, params={"state": states})
            assert listed.status_code == 200, listed.text
            assert listed.json()["items"] == []
    assert await world.sql("SELECT * FROM schedules ORDER BY id") == before, "a foreign call wrote"
    own = await world.call("GET", "/v1/schedules")
    assert {i["id"] for i in own.json()["items"]} == set(owned)
    return {"foreign_calls_compared": compared}


async def linked_isolation(world: HttpWorld) -> int:
    """Runs and sessions: the owner's run, transcript, run cancel and session erasure
    are not found for others (the same bytes as for an id that never existed), and the
    foreign writes change nothing."""
    compared = 0
    runs = await world.sql("SELECT id, session_id FROM runs")
    names = await tables(world)
    before = await fingerprint(world, names)
    for row in runs:
        for who in (SAME_TENANT, OTHER_TENANT):
            for method, path, missing in (
                ("GET", f"/v1/runs/{row['id']}", f"/v1/runs/{MISSING}"),
                (
                    "GET",
                    f"/v1/sessions/{row['session_id']}/transcript",
                    f"/v1/sessions/{MISSING}/transcript",
                ),
                ("POST", f"/v1/runs/{row['id']}/cancel", f"/v1/runs/{MISSING}/cancel"),
                ("DELETE", f"/v1/sessions/{row['session_id']}", f"/v1/sessions/{MISSING}"),
            ):
                foreign = await world.call(method, path, who)
                absent = await world.call(method, missing, who)
                assert foreign.status_code == 404, (method, path, foreign.text)
                assert answer(foreign) == answer(absent), (method, path)
                compared += 1
    assert await fingerprint(world, names) == before, "a foreign run or session call wrote"
    return compared


@pytest.mark.gate(GATE, facet="http")
async def test_foreign_http_reads_equal_missing(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with http_world(pg_url, [OWNER, SAME_TENANT, OTHER_TENANT]) as world:
        evidence = await isolation(world)
        # One materialized run, so the linked routes have something foreign to refuse.
        fire = (await world.call("GET", "/v1/schedules")).json()["items"][0]["next_fire_at"]
        scheduler = world.scheduler()
        world.clock.advance_to(datetime.fromisoformat(fire) + timedelta(seconds=1))
        assert (await scheduler.worker.run_once()).errors == {}
        linked = await linked_isolation(world)
        assert linked >= 8, "no run materialized: the linked routes were not compared"
    gate_evidence.record("server", "uvicorn on 127.0.0.1, PostgreSQL API role (forced RLS)")
    gate_evidence.record("readers", ["same tenant, other principal", "other tenant, same id"])
    gate_evidence.record("routes", ["get", "occurrences", "patch", "pause", "resume", "delete"])
    gate_evidence.record("schedule_calls_compared", evidence["foreign_calls_compared"])
    gate_evidence.record(
        "run_and_session_routes", ["run read", "transcript", "run cancel", "session erase"]
    )
    gate_evidence.record("run_and_session_calls_compared", linked)
    gate_evidence.record("comparison", "status, content-type and body bytes")


# ------------------------------------------------------------- tests of the test


def leaky_not_found() -> Any:
    seen: set[str] = set()

    def rewrite(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "POST" and path == "/v1/schedules" and "id" in body:
            seen.add(body["id"])
        error = body.get("error")
        if not isinstance(error, dict):
            return body
        if error.get("code") == "schedule.not_found" and any(sid in path for sid in seen):
            return {"error": {**error, "message": "schedule belongs to another principal"}}
        return body

    return rewrite


async def test_check_fails_on_a_leaky_not_found(pg_url: str) -> None:
    async with http_world(
        pg_url, [OWNER, SAME_TENANT, OTHER_TENANT], app_factory=planted(leaky_not_found())
    ) as world:
        with pytest.raises(AssertionError):
            await isolation(world)
