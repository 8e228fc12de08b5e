"""Transcript read and session erasure on PostgreSQL, after a scheduled run executed;
and the post-run accounting hook wired into the run worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.errors import AuthorizationError, NotFoundError
from scheduling.domain.identity import Principal
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime.hooks import AccountingHook
from scheduling.service.accounting import RunAccountant
from scheduling.service.sessions import SessionErasureService
from scheduling.service.transcripts import TRANSCRIPT_FORBIDDEN, TranscriptService
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import run_worker
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

READER = Principal(WHO.tenant_id, WHO.principal_id, WHO.scopes | {"session.read"})


async def executed(
    h: MaterializeWorld, script: str, *, failures: int = 2
) -> tuple[UUID, dict[str, Any]]:
    sid = await h.create(
        instruction=f"Brief me. [script:{script}]", max_consecutive_failures=failures
    )
    fire = (await h.sql("SELECT next_fire_at FROM schedules WHERE id = :i", i=sid))[0]
    h.clock.advance_to(fire["next_fire_at"] + timedelta(seconds=1))
    made = await h.materializer().materialize(sid)
    assert made.run_id is not None
    accountant = RunAccountant(uow=h.scheduler, clock=h.clock, ids=h.world.ids.fork("acct"))
    worker = run_worker(
        h.admin,
        h.clock,
        "w1",
        capacity=QueueCapacity(4, 1, 1),
        on_finished=AccountingHook(accountant),
    )
    outcome = await worker.run_once()
    assert outcome is not None
    run = (await h.sql("SELECT * FROM runs WHERE id = :i", i=made.run_id))[0]
    return sid, run


async def test_transcript_omits_the_seed_and_keeps_the_answer(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        _, run = await executed(h, "succeed")
        transcripts = TranscriptService(h.api)
        transcript = await transcripts.read(READER, run["session_id"])
        kinds = [(e.event_type, e.actor) for e in transcript.events]
        assert ("message.user", "scheduler") not in kinds
        assert all(not e.context_only for e in transcript.events)
        answers = [e for e in transcript.events if e.event_type == "message.assistant"]
        assert len(answers) == 1
        assert answers[0].payload["text"].startswith("Done")
        # The seed is still stored as durable model context.
        stored = await h.sql(
            "SELECT payload FROM session_events WHERE session_id = :s AND context_only",
            s=run["session_id"],
        )
        assert "Brief me." in stored[0]["payload"]["content"]
        with pytest.raises(AuthorizationError) as forbidden:
            await transcripts.read(WHO, run["session_id"])
        assert forbidden.value.code == TRANSCRIPT_FORBIDDEN
        other = principal("someone-else", scopes={"session.read"})
        with pytest.raises(NotFoundError):
            await transcripts.read(other, run["session_id"])
    finally:
        await h.close()


async def test_erasure_marks_the_occurrence_then_deletes_the_graph(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid, run = await executed(h, "succeed")
        erasure = SessionErasureService(h.api, h.clock)
        with pytest.raises(NotFoundError):
            await erasure.erase(principal("someone-else"), run["session_id"])
        result = await erasure.erase(WHO, run["session_id"])
        assert result.occurrences_marked == 1
        assert result.runs_deleted == 1
        occurrence = (
            await h.sql("SELECT * FROM schedule_occurrences WHERE schedule_id = :s", s=sid)
        )[0]
        assert occurrence["disposition"] == "MATERIALIZED"
        assert occurrence["session_id"] is None
        assert occurrence["run_id"] is None
        assert occurrence["links_erased_at"] == h.clock.now()
        for table, column in (("sessions", "id"), ("runs", "session_id")):
            rows = await h.sql(f"SELECT 1 FROM {table} WHERE {column} = :s", s=run["session_id"])
            assert rows == []
        assert await h.sql("SELECT 1 FROM run_checkpoints WHERE run_id = :r", r=run["id"]) == []
        # Schedule history survives the erasure.
        events = await h.sql("SELECT event_type FROM process_events WHERE schedule_id = :s", s=sid)
        assert "schedule.run_accounted" in [e["event_type"] for e in events]
    finally:
        await h.close()


async def test_failed_runs_reach_the_failure_limit_through_the_hook(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid, run = await executed(h, "fail", failures=1)
        assert run["status"] == "FAILED"
        schedule = (await h.sql("SELECT * FROM schedules WHERE id = :i", i=sid))[0]
        assert schedule["state"] == "PAUSED"
        assert schedule["pause_reason"] == "failure_limit"
        accounted = await h.sql(
            "SELECT payload FROM process_events WHERE schedule_id = :s"
            " AND event_type = 'schedule.run_accounted'",
            s=sid,
        )
        assert len(accounted) == 1
    finally:
        await h.close()
