"""rule.http.run_cancel over a real uvicorn server against PostgreSQL: the existing run
cancel endpoint ends a run that has not ended, once, and never rewrites an ended one.

Three schedules fire at one instant, each materializing a QUEUED run. The first run is
cancelled through ``POST /v1/runs/{id}/cancel`` (before it, ``GET /v1/runs/{id}`` reads it
QUEUED with no ``finished_at``): 200, CANCELLED, finished when its row says, and its row is
CANCELLED with no lease, a fencing token one higher and a finish, beside one
``run.cancelled`` session event; cancelling it again is a 200 that changes no row. The
other two are made COMPLETED and FAILED (as the run worker leaves them): cancelling
either is a 409 ``schedule.runtime.cancel_terminal`` that changes no row.

Racing: three cancels of one QUEUED run sent at once (a client retrying, or two people
pressing cancel) all answer 200 CANCELLED; the row's fencing token moves once and one
``run.cancelled`` event is written, whoever wins.

All or nothing: the cancel service of the control plane production builds, over a unit
of work that crashes after each write of one cancel in turn (and after its COMMIT),
leaves either the QUEUED run and no event or the CANCELLED run and exactly one
``run.cancelled`` event (naming the status before the cancel and who cancelled).

Tests of the test: ``scheduling-gates mutate`` (``runs.cancel_rewrites_ended_runs``:
a COMPLETED or FAILED run is cancelled; ``runs.cancel_not_idempotent``: a second
cancel is refused as terminal; ``runs.racing_cancel_refused``: a cancel that loses the
race to another fails as stale instead of finding the run cancelled;
``runs.view_finished_from_updated``: a run that has not ended reads as finished).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from gates.checks.crash_support import Crash, CrashingFactory
from gates.runner.pytest_plugin import GateEvidence
from scheduling.bootstrap import ControlPlane, build_control_plane
from scheduling.testing import RoleOverride
from simulation.worlds.http import OWNER, HttpWorld, http_world

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.run_cancel")]

TERMINAL = "schedule.runtime.cancel_terminal"


async def rows(world: HttpWorld) -> dict[str, Any]:
    return {
        "runs": await world.sql("SELECT * FROM runs ORDER BY id"),
        "events": await world.sql(
            "SELECT session_id, seq, event_type FROM session_events ORDER BY session_id, seq"
        ),
    }


async def fired(world: HttpWorld, keys_and_titles: dict[str, str]) -> None:
    """One schedule per (key, title), all due at one instant, fired: one QUEUED run each."""
    fire = None
    for key, title in keys_and_titles.items():
        created = await world.create(key, title=title)
        assert created.status_code == 201, created.text
        fire = created.json()["next_fire_at"]
    assert fire is not None
    world.clock.advance_to(datetime.fromisoformat(fire))
    world.clock.advance(1)
    assert (await world.scheduler().worker.run_once()).errors == {}


async def test_a_run_is_cancelled_once_and_an_ended_run_never(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        titles = ("Cancelled", "Completed", "Failed")
        await fired(world, {f"run-cancel-{title}": title for title in titles})
        runs = {
            r["title"]: r["id"]
            for r in await world.sql(
                "SELECT r.id, s.title FROM runs r JOIN sessions s ON s.id = r.session_id"
            )
        }
        assert sorted(runs) == ["Cancelled", "Completed", "Failed"], runs
        ended = world.clock.now()
        await world.sql(
            "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :i",
            t=ended,
            i=runs["Completed"],
        )
        await world.sql(
            "UPDATE runs SET status = 'FAILED', finished_at = :t,"
            ' failure = \'{"reason": "schedule.runtime.deadline_exceeded"}\'::jsonb'
            " WHERE id = :i",
            t=ended,
            i=runs["Failed"],
        )
        (queued,) = await world.sql("SELECT * FROM runs WHERE id = :i", i=runs["Cancelled"])
        assert queued["status"] == "QUEUED"
        # Not ended yet: the run reads QUEUED and unfinished (its row has an updated_at).
        unended = await world.call("GET", f"/v1/runs/{runs['Cancelled']}")
        assert unended.status_code == 200, unended.text
        assert unended.json()["status"] == "QUEUED"
        assert unended.json()["finished_at"] is None, unended.text

        first = await world.call("POST", f"/v1/runs/{runs['Cancelled']}/cancel")
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "CANCELLED"
        (cancelled,) = await world.sql("SELECT * FROM runs WHERE id = :i", i=runs["Cancelled"])
        finished = datetime.fromisoformat(first.json()["finished_at"])
        assert finished == cancelled["finished_at"], first.text
        assert cancelled["status"] == "CANCELLED"
        assert cancelled["lease_owner"] is None
        assert cancelled["lease_expires_at"] is None
        assert cancelled["fencing_token"] == queued["fencing_token"] + 1
        assert cancelled["finished_at"] is not None
        events = await world.sql(
            "SELECT event_type, actor, payload FROM session_events"
            " WHERE session_id = :s AND run_id = :r ORDER BY seq",
            s=queued["session_id"],
            r=queued["id"],
        )
        assert [e["event_type"] for e in events] == ["run.queued", "run.cancelled"], events
        # The audit names who cancelled and what the run was before, not after.
        assert events[1]["payload"] == {"previous_status": "QUEUED"}, events[1]
        assert events[1]["actor"] == f"principal:{OWNER.principal_id}", events[1]
        settled = await rows(world)

        again = await world.call("POST", f"/v1/runs/{runs['Cancelled']}/cancel")
        assert again.status_code == 200, again.text
        assert again.json()["status"] == "CANCELLED"
        assert await rows(world) == settled, "a second cancel wrote again"

        refused = {}
        for title in ("Completed", "Failed"):
            answer = await world.call("POST", f"/v1/runs/{runs[title]}/cancel")
            assert answer.status_code == 409, (title, answer.text)
            refused[title] = answer.json()["error"]["code"]
            assert refused[title] == TERMINAL, (title, answer.text)
            assert await rows(world) == settled, f"cancelling a {title} run changed a row"
        gate_evidence.record("refused", refused)


async def test_racing_cancels_end_a_run_once(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with http_world(pg_url) as world:
        titles = [f"Raced {n}" for n in range(3)]
        await fired(world, {f"run-cancel-race-{n}": title for n, title in enumerate(titles)})
        queued = await world.sql("SELECT * FROM runs WHERE status = 'QUEUED' ORDER BY id")
        assert len(queued) == len(titles), queued
        answers = []
        for run in queued:
            path = f"/v1/runs/{run['id']}/cancel"
            racing = await asyncio.gather(*(world.call("POST", path) for _ in range(3)))
            shown = [(a.status_code, a.text[:120]) for a in racing]
            assert all(a.status_code == 200 for a in racing), shown
            assert all(a.json()["status"] == "CANCELLED" for a in racing), shown
            (after,) = await world.sql("SELECT * FROM runs WHERE id = :i", i=run["id"])
            assert after["status"] == "CANCELLED"
            assert after["fencing_token"] == run["fencing_token"] + 1, after
            events = await world.sql(
                "SELECT event_type FROM session_events WHERE run_id = :r ORDER BY seq",
                r=run["id"],
            )
            assert [e["event_type"] for e in events] == ["run.queued", "run.cancelled"], events
            answers.append([a.status_code for a in racing])
        gate_evidence.record("racing_answers", answers)


async def test_a_crash_after_any_write_of_a_cancel_leaves_all_or_nothing(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The cancel's writes (the fenced run row, its ``run.cancelled`` event) commit
    together: a crash after each write of one cancel, and after its COMMIT (found by a
    discovery run on another run), leaves either the QUEUED run and no event, or the
    CANCELLED run and exactly one event; the client's retry then ends it once."""
    async with http_world(pg_url) as world:
        titles = [f"Crashed {n}" for n in range(6)]
        await fired(world, {f"run-cancel-crash-{n}": title for n, title in enumerate(titles)})
        queued = [r["id"] for r in await world.sql("SELECT id FROM runs ORDER BY id")]

        def plane_over(after: int | None) -> tuple[CrashingFactory, ControlPlane]:
            storage = world.plane.api.storage
            crashing = CrashingFactory(storage.as_role("api"), after)
            plane = build_control_plane(
                world.settings,
                clock=world.clock,
                ids=world.ids.fork(f"crash-{after}"),
                tokens=world.plane.authenticator,
                storage=RoleOverride(storage, "api", crashing),
            )
            return crashing, plane

        counting, plane = plane_over(None)
        await plane.runs.cancel(OWNER, queued[0])
        writes = list(counting.counter.writes)
        assert "commit" in writes, writes
        outcomes = []
        for after, run_id in enumerate(queued[1 : len(writes) + 1], start=1):
            crashing, plane = plane_over(after)
            with pytest.raises(Crash):
                await plane.runs.cancel(OWNER, run_id)
            (row,) = await world.sql("SELECT status FROM runs WHERE id = :i", i=run_id)
            cancelled = await world.sql(
                "SELECT count(*) AS n FROM session_events"
                " WHERE run_id = :r AND event_type = 'run.cancelled'",
                r=run_id,
            )
            state = (row["status"], int(cancelled[0]["n"]))
            assert state in (("QUEUED", 0), ("CANCELLED", 1)), (crashing.counter.writes, state)
            retried = await world.call("POST", f"/v1/runs/{run_id}/cancel")
            assert retried.status_code == 200, retried.text
            final = await world.sql(
                "SELECT count(*) AS n FROM session_events"
                " WHERE run_id = :r AND event_type = 'run.cancelled'",
                r=run_id,
            )
            assert int(final[0]["n"]) == 1, (crashing.counter.writes, final)
            outcomes.append({"after": crashing.counter.writes[-1], "left": state})
        assert len(outcomes) == len(writes), (writes, outcomes)
        gate_evidence.record("cancel_writes", writes)
        gate_evidence.record("crashes", outcomes)
