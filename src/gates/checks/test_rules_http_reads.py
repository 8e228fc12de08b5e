"""rule.http.reads_equal_the_ledger over a real uvicorn server against PostgreSQL: the
point read and the occurrence inbox say what the database holds.

One schedule is created over HTTP, fires under revision 1 (MATERIALIZED), is updated
over HTTP (revision 2, another title), then misses an instant under revision 2 past its
grace (MISSED, one consecutive failure). Every field of ``GET /v1/schedules/{id}`` that
mirrors the schedule row or its current revision, and every field of every
``GET /v1/schedules/{id}/occurrences`` row that mirrors the occurrence row, must equal
the database's value: so a revision, a failure count or a reason the API reports from
anywhere but the ledger shows (with one revision and no failure they all look alike).
The run that fired (failed, with its failure classification) reads the same through
``GET /v1/runs/{id}`` and in the view its inbox row embeds. The answers of a pause and a
resume after the update show revision 2's title and cadence, as the point read does, and
every field of those answers and of the update's that mirrors the schedule row (state,
pause reason, revision, failure count, next firing, created and updated instants)
equals the row the write left: the pause comes after the miss, so a write's answer that
reports no failure or its creation instant as its update shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from simulation.worlds.http import http_world, update_body

pytestmark = pytest.mark.postgres

RULE = "rule.http.reads_equal_the_ledger"


def wire(value: Any) -> Any:
    """A database value as the API writes it (instants in the canonical form)."""
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, UUID):
        return str(value)
    return value


def same_instant(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return bool(datetime.fromisoformat(str(a)) == datetime.fromisoformat(str(b)))


ROW_FIELDS = ("state", "pause_reason", "current_revision", "consecutive_failures")
ROW_INSTANTS = ("next_fire_at", "created_at", "updated_at")


async def answer_mirrors_row(world: Any, label: str, shown: dict[str, Any]) -> list[str]:
    """Every field of a write's answer that mirrors the schedule row equals the row the
    write left (a pause after a miss: one failure, updated after its creation)."""
    (row,) = await world.sql("SELECT * FROM schedules WHERE id = :i", i=UUID(shown["id"]))
    problems = [
        f"{label} {k}: {shown[k]!r} != {wire(row[k])!r}"
        for k in ROW_FIELDS
        if shown[k] != wire(row[k])
    ]
    problems += [
        f"{label} {k}: {shown[k]!r} != {wire(row[k])!r}"
        for k in ROW_INSTANTS
        if not same_instant(shown[k], wire(row[k]))
    ]
    return problems


@pytest.mark.rule(RULE)
async def test_the_point_read_and_the_inbox_mirror_the_ledger(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        created = await world.create("reads", title="First title", misfire_grace_seconds=60)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        scheduler = world.scheduler()
        world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
        world.clock.advance(1)
        assert (await scheduler.worker.run_once()).errors == {}
        # A failed run: its failure and finish are the fields a run view could drop.
        await world.sql(
            "UPDATE runs SET status = 'FAILED', finished_at = :t,"
            ' failure = \'{"reason": "schedule.runtime.deadline_exceeded"}\'::jsonb',
            t=world.clock.now(),
        )
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        patched = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, title="Second title")
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["current_revision"] == 2
        patch_problems = await answer_mirrors_row(world, "update answer", patched.json())
        world.clock.advance_to(datetime.fromisoformat(patched.json()["next_fire_at"]))
        world.clock.advance(120)  # past the 60 s grace: MISSED under revision 2
        assert (await scheduler.worker.run_once()).errors == {}

        (row,) = await world.sql("SELECT * FROM schedules WHERE id = :i", i=UUID(sid))
        point = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        mirrored = (
            "state", "pause_reason", "current_revision", "consecutive_failures",
        )  # fmt: skip
        problems = [
            f"point read {k}: {point[k]!r} != {wire(row[k])!r}"
            for k in mirrored
            if point[k] != wire(row[k])
        ]
        for k in ("next_fire_at", "created_at", "updated_at"):
            if not same_instant(point[k], wire(row[k])):
                problems.append(f"point read {k}: {point[k]!r} != {wire(row[k])!r}")
        problems += patch_problems
        if point["title"] != "Second title":
            problems.append(f"point read title {point['title']!r}")
        assert row["consecutive_failures"] == 1
        assert row["current_revision"] == 2

        ledger = await world.sql(
            "SELECT * FROM schedule_occurrences WHERE schedule_id = :s"
            " ORDER BY nominal_fire_at DESC",
            s=UUID(sid),
        )
        page = await world.call("GET", f"/v1/schedules/{sid}/occurrences?limit=50")
        assert page.status_code == 200, page.text
        items = page.json()["items"]
        assert [i["id"] for i in items] == [str(o["id"]) for o in ledger]
        assert [o["schedule_revision"] for o in ledger] == [2, 1]
        assert [o["disposition"] for o in ledger] == ["MISSED", "MATERIALIZED"]
        for item, occurrence in zip(items, ledger, strict=True):
            for k in ("schedule_id", "schedule_revision", "disposition", "session_id",
                      "run_id", "reason_code"):  # fmt: skip
                if item[k] != wire(occurrence[k]):
                    problems.append(f"occurrence {k}: {item[k]!r} != {wire(occurrence[k])!r}")
            for k in ("nominal_fire_at", "materialized_at", "links_erased_at", "created_at"):
                if not same_instant(item[k], wire(occurrence[k])):
                    problems.append(f"occurrence {k}: {item[k]!r} != {wire(occurrence[k])!r}")
        # The linked run: GET /v1/runs/{id} and the view the inbox row embeds both say
        # what the runs row holds.
        (run,) = await world.sql("SELECT * FROM runs")
        direct = await world.call("GET", f"/v1/runs/{run['id']}")
        assert direct.status_code == 200, direct.text
        embedded = items[-1]["run"]
        for name, view in (("run read", direct.json()), ("embedded run", embedded)):
            for k in ("session_id", "status", "failure"):
                if view[k] != wire(run[k]):
                    problems.append(f"{name} {k}: {view[k]!r} != {wire(run[k])!r}")
            for k in ("scheduled_for", "deadline_at", "finished_at"):
                if not same_instant(view[k], wire(run[k])):
                    problems.append(f"{name} {k}: {view[k]!r} != {wire(run[k])!r}")
        # A write's answer shows the revision the schedule is at (2), not the first:
        # pause and resume answer revision 2's title and cadence, as the point read does.
        for action in ("pause", "resume"):
            written = await world.call(
                "POST", f"/v1/schedules/{sid}/{action}", json={"expected_revision": 2}
            )
            assert written.status_code == 200, written.text
            shown = written.json()
            expected = ("Second title", point["revision"]["cadence"], 2)
            got = (shown["title"], shown["cadence"], shown["current_revision"])
            if got != expected:
                problems.append(f"{action} answer shows {got!r}, the point read {expected!r}")
            problems += await answer_mirrors_row(world, f"{action} answer", shown)
        assert problems == [], problems
        gate_evidence.record("point_read", {k: point[k] for k in mirrored})
        gate_evidence.record(
            "occurrences", [(i["schedule_revision"], i["disposition"]) for i in items]
        )
