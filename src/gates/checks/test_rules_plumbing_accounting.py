"""``rule.outbox.finished`` through the scheduler's post-run sweep on PostgreSQL: the
sweep production builds (``ScheduleWorker.account``, over the scheduler role's pending
accounts) accounts every terminal scheduled run nobody accounted yet - COMPLETED, FAILED
and CANCELLED alike - exactly once, each with its one ``schedule_run_finished`` row,
and leaves a QUEUED or RUNNING one alone; a second sweep writes nothing.

A cancelled run is ended by the run-cancel route, never by a run worker, so this sweep
is the only path that accounts it: a pending-accounts query that only took COMPLETED
and FAILED runs would leave the cancelled occurrence without its outcome for ever.

Test of the test: ``scheduling-gates mutate`` (``plumbing.cancelled_never_accounted``).
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.events import RUN_ACCOUNTED
from simulation.worlds.materialize import MaterializeWorld

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.outbox.finished")]


async def outcome_rows(h: MaterializeWorld, occurrence_id: UUID) -> list[str]:
    found = await h.sql(
        "SELECT kind FROM schedule_outbox WHERE occurrence_id = :o", o=occurrence_id
    )
    return [str(r["kind"]) for r in found]


async def accounted(h: MaterializeWorld, occurrence_id: UUID) -> int:
    found = await h.sql(
        "SELECT count(*) AS n FROM process_events WHERE event_type = :t"
        " AND payload->>'occurrence_id' = :o",
        t=RUN_ACCOUNTED,
        o=str(occurrence_id),
    )
    return int(found[0]["n"])


async def test_the_sweep_accounts_every_terminal_run_once(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        statuses = ("COMPLETED", "FAILED", "CANCELLED", "RUNNING", "QUEUED")
        fired: dict[str, tuple[UUID, UUID]] = {}
        for status in statuses:
            # One schedule each: a run left active would make the next instant an overlap.
            sid = await h.create(
                title=f"Swept {status}", key=f"swept-{status}", max_consecutive_failures=20
            )
            h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
            result = await h.materializer().materialize(sid)
            assert result.occurrence is not None, result
            assert result.run_id is not None, result
            fired[status] = (result.occurrence.id, result.run_id)
            if status != "QUEUED":
                ended = status != "RUNNING"
                await h.sql(
                    "UPDATE runs SET status = :s, finished_at = :t WHERE id = :i",
                    s=status,
                    t=h.clock.now() if ended else None,
                    i=result.run_id,
                )
        role = h.scheduler_role(ids=h.world.ids.fork("plumbing-sweep"))
        first = await role.worker.account()
        second = await role.worker.account()
        seen = {
            status: (await accounted(h, occ), await outcome_rows(h, occ))
            for status, (occ, _) in fired.items()
        }
        expected = {
            status: (1, ["schedule_run_finished"])
            if status in ("COMPLETED", "FAILED", "CANCELLED")
            else (0, [])
            for status in statuses
        }
        assert seen == expected, seen
        assert (first, second) == (3, 0), (first, second)
        gate_evidence.record("swept", {s: n for s, (n, _) in seen.items()})
    finally:
        await h.close()
