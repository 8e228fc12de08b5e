"""gate.schedule.offline_results, facet http: the offline inbox read over HTTP.

The schedules are created over HTTP; the schedule worker and the run worker are the
real ones built through ``bootstrap`` (scheduler login, scripted agent, post-run
accounting) on the same virtual clock, with no client connected while they fire. They
produce a COMPLETED, a FAILED and a CANCELLED run (cancelled over HTTP with
``run.cancel`` while queued), a MISSED and a SKIPPED_OVERLAP occurrence. Later the
client pages through ``GET /v1/schedules/{id}/occurrences`` one row per page (and two):
every page's rows must equal the database's ground truth in order (newest first), with
no duplicate or skipped row across pages, each disposition and exact run link, and the
embedded run view equal to ``GET /v1/runs/{id}``.

Tests of the test plant a paginator that drops a row and one that embeds another
run's view; the check fails on each.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import HttpWorld, http_world, planted

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.offline_results"
PARIS = "Europe/Paris"


def daily(at: str) -> dict[str, Any]:
    return {"kind": "DAILY", "local_time": at, "timezone": PARIS}


async def fire_everything(world: HttpWorld) -> dict[str, str]:
    """Create five schedules over HTTP and let the real workers fire them offline."""
    made: dict[str, str] = {}
    plan: dict[str, dict[str, Any]] = {
        "ok": {"instruction": "Report. [script:succeed]", "cadence": daily("09:00")},
        "bad": {"instruction": "Report. [script:fail]", "cadence": daily("09:00")},
        "cancel": {"cadence": daily("09:00")},
        "late": {"cadence": daily("08:50"), "misfire_grace_seconds": 60},
    }
    for name, overrides in plan.items():
        response = await world.create(f"offline-{name}", **overrides)
        assert response.status_code == 201, response.text
        made[name] = response.json()["id"]
    first = datetime.fromisoformat(
        (await world.call("GET", f"/v1/schedules/{made['ok']}")).json()["next_fire_at"]
    )
    scheduler = world.scheduler()
    runner = world.run_worker()
    world.clock.advance_to(first + timedelta(seconds=1))
    assert (await scheduler.worker.run_once()).errors == {}
    rows = await world.sql(
        "SELECT run_id FROM schedule_occurrences WHERE schedule_id = :s", s=made["cancel"]
    )
    cancelled = await world.call("POST", f"/v1/runs/{rows[0]['run_id']}/cancel")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "CANCELLED")
    while await runner.worker.run_once() is not None:
        pass
    overlap = await world.create("offline-overlap", cadence=daily("10:00"))
    assert overlap.status_code == 201, overlap.text
    made["overlap"] = overlap.json()["id"]
    for _ in range(2):  # fires once (run stays queued), then overlaps it
        fire = datetime.fromisoformat(
            (await world.call("GET", f"/v1/schedules/{made['overlap']}")).json()["next_fire_at"]
        )
        world.clock.advance_to(fire + timedelta(seconds=1))
        assert (await scheduler.worker.run_once()).errors == {}
    await scheduler.worker.account()
    return made


async def read_inbox(world: HttpWorld, sid: str, limit: int) -> list[dict[str, Any]]:
    """Every page of the inbox; fails on a repeated cursor or a repeated row."""
    items: list[dict[str, Any]] = []
    cursors: set[str] = set()
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        response = await world.call("GET", f"/v1/schedules/{sid}/occurrences", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= limit
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert page["items"], "a page with a next cursor returned no row"
        assert cursor not in cursors, "the server repeated a cursor"
        cursors.add(cursor)
    ids = [item["id"] for item in items]
    assert len(ids) == len(set(ids)), "a row appeared on two pages"
    return items


async def recover(world: HttpWorld, made: dict[str, str]) -> dict[str, Any]:
    """The client's offline read checked against the database's ground truth."""
    runs = {str(r["id"]): r for r in await world.sql("SELECT id, status FROM runs")}
    dispositions: set[str] = set()
    statuses: set[str] = set()
    recovered: dict[str, Any] = {}
    for name, sid in made.items():
        truth = await world.sql(
            "SELECT * FROM schedule_occurrences WHERE schedule_id = :s"
            " ORDER BY nominal_fire_at DESC, id DESC",
            s=sid,
        )
        assert truth, name
        for limit in (1, 2):
            items = await read_inbox(world, sid, limit)
            assert [i["id"] for i in items] == [str(r["id"]) for r in truth], (name, limit)
            for item, row in zip(items, truth, strict=True):
                assert item["disposition"] == row["disposition"]
                assert item["run_id"] == (None if row["run_id"] is None else str(row["run_id"]))
                assert item["session_id"] == (
                    None if row["session_id"] is None else str(row["session_id"])
                )
                assert item["reason_code"] == row["reason_code"]
                if row["run_id"] is None:
                    assert item["run"] is None
                    assert item["reason_code"], "an unlinked occurrence needs its reason"
                    continue
                run = item["run"]
                assert run is not None
                assert run["id"] == item["run_id"]
                assert run["status"] == runs[item["run_id"]]["status"]
                direct = await world.call("GET", f"/v1/runs/{item['run_id']}")
                assert direct.status_code == 200
                assert direct.json() == run
                statuses.add(run["status"])
            dispositions |= {i["disposition"] for i in items}
        recovered[name] = [
            (i["disposition"], None if i["run"] is None else i["run"]["status"])
            for i in reversed(items)
        ]
    # Coverage by construction: each kind of offline result was produced and recovered.
    assert {"MATERIALIZED", "MISSED", "SKIPPED_OVERLAP"} <= dispositions, dispositions
    assert {"COMPLETED", "FAILED", "CANCELLED"} <= statuses, statuses
    return recovered


@pytest.mark.gate(GATE, facet="http")
async def test_inbox_recovered_page_by_page_over_http(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        made = await fire_everything(world)
        recovered = await recover(world, made)
    gate_evidence.record("server", "uvicorn on 127.0.0.1, control plane via bootstrap")
    gate_evidence.record("workers", "bootstrap.build_scheduler + build_run_worker (scripted)")
    gate_evidence.record("page_sizes", [1, 2])
    gate_evidence.record("recovered", recovered)


# ------------------------------------------------------------- tests of the test


def skipping(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    if path.endswith("/occurrences") and body.get("next_cursor") and body.get("items"):
        return {**body, "items": body["items"][:-1]}  # drops the last row of a full page
    return body


def foreign_run(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    if path.endswith("/occurrences") and isinstance(body.get("items"), list):
        items = []
        for item in body["items"]:
            if item.get("run"):
                item = {**item, "run": {**item["run"], "status": "COMPLETED"}}
            items.append(item)
        return {**body, "items": items}
    return body


@pytest.mark.parametrize("plant", [skipping, foreign_run], ids=["skips_a_row", "wrong_run"])
async def test_check_fails_on_a_wrong_inbox(pg_url: str, plant: Any) -> None:
    async with http_world(pg_url, app_factory=planted(plant)) as world:
        made = await fire_everything(world)
        with pytest.raises(AssertionError):
            await recover(world, made)
