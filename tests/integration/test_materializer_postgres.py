"""The materializer on PostgreSQL through the scheduler role: one complete occurrence."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.service.materializer import MaterializeStatus
from simulation.engine.checkers import check_ledger
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


async def test_materializes_one_complete_occurrence(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        schedule = (await h.sql("SELECT next_fire_at FROM schedules WHERE id = :i", i=sid))[0]
        fire = schedule["next_fire_at"]
        h.clock.advance_to(fire + timedelta(seconds=5))
        result = await h.materializer().materialize(sid)
        assert result.status is MaterializeStatus.DECIDED
        assert result.occurrence is not None
        assert result.occurrence.disposition.value == "MATERIALIZED"
        ledger = (await h.ledger()).of(sid)
        assert len(ledger.occurrences) == len(ledger.runs) == len(ledger.sessions) == 1
        run = ledger.runs[0]
        assert run["priority"] == 10
        assert run["status"] == "QUEUED"
        assert set(run["requested_scopes"]) == {"memory.read"}
        assert run["deadline_at"] == h.clock.now() + timedelta(seconds=600)
        assert [e["event_type"] for e in ledger.session_events] == [
            "session.created",
            "message.user",
            "run.queued",
        ]
        assert [e["context_only"] for e in ledger.session_events] == [False, True, False]
        assert len(ledger.checkpoints) == 1
        assert ledger.event_types()[-1] == "schedule.occurrence.materialized"
        assert ledger.schedules[0]["next_fire_at"] > h.clock.now()
        assert check_ledger(ledger.occurrences, ledger.runs, ledger.sessions) == []
        again = await h.materializer().materialize(sid)
        assert again.status is MaterializeStatus.NOT_DUE
        assert again.occurrence is not None
        assert again.occurrence.id == result.occurrence.id
    finally:
        await h.close()


async def test_one_time_schedule_completes_after_its_occurrence(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(cadence={"kind": "ONCE", "at": "2026-03-04T12:00:00+01:00"})
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=2))
        result = await h.materializer().materialize(sid)
        assert result.status is MaterializeStatus.DECIDED
        row = await h.schedule(sid)
        assert (row["state"], row["next_fire_at"], row["pause_reason"]) == ("COMPLETED", None, None)
        types = (await h.ledger()).of(sid).event_types()
        # Same occurred_at: the log orders them by id, so compare as a set.
        assert set(types[-2:]) == {"schedule.occurrence.materialized", "schedule.completed"}
        assert (await h.materializer().materialize(sid)).status is MaterializeStatus.NOT_DUE
    finally:
        await h.close()


async def test_one_time_schedule_outside_grace_is_missed_and_completes(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(
            cadence={"kind": "ONCE", "at": "2026-03-04T12:00:00+01:00"}, misfire_grace_seconds=60
        )
        h.clock.advance_to(await h.next_fire(sid) + timedelta(minutes=5))
        result = await h.materializer().materialize(sid)
        assert result.occurrence is not None
        assert result.occurrence.disposition.value == "MISSED"
        row = await h.schedule(sid)
        assert (row["state"], row["consecutive_failures"]) == ("COMPLETED", 1)
        ledger = (await h.ledger()).of(sid)
        assert ledger.runs == []
        assert ledger.sessions == []
    finally:
        await h.close()
