"""gate.schedule.cancel_separate: schedule cancellation and run cancellation are separate.

Real PostgreSQL, end to end. A daily schedule materializes a long scripted run; worker
``w1`` claims it and is working (heartbeating) when, paused at its first heartbeat:

* the owner cancels the schedule (``schedule.cancel``): the run row is byte-for-byte
  unchanged, and ``w1`` keeps working (its later fenced heartbeats succeed);
* run cancellation attempts without ``run.cancel`` (the owner holding every schedule
  scope) and by another principal holding ``run.cancel`` are refused and change nothing;

then, at its third heartbeat, the owner with ``run.cancel`` cancels the run: ``w1`` is
fenced out at its next write and the run ends CANCELLED. Finally the clock passes two
more nominal instants: the cancelled schedule materializes nothing more.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import AuthorizationError, NotFoundError
from scheduling.domain.identity import Principal
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import LEASE_LOST, WorkerSettings
from scheduling.service.cancellation import CANCEL_FORBIDDEN, RunCancellation
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import run_worker
from simulation.worlds.service import principal

GATE = "gate.schedule.cancel_separate"
SETTINGS = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, poll_seconds=1)
RUN_CANCELLER = Principal(WHO.tenant_id, WHO.principal_id, frozenset({"run.cancel"}))
STRANGER = principal("stranger", scopes={"run.cancel", "schedule.cancel"})


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_schedule_cancel_leaves_the_run_and_only_run_cancel_cancels_it(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        assert not WHO.has("run.cancel")
        assert WHO.has("schedule.cancel")
        sid = await h.create(
            instruction="Watch the feed. [script:run_long:3000]", run_timeout_seconds=3600
        )
        fire = (await h.sql("SELECT next_fire_at FROM schedules WHERE id = :i", i=sid))[0]
        h.clock.advance_to(fire["next_fire_at"] + timedelta(seconds=1))
        made = await h.materializer().materialize(sid)
        assert made.run_id is not None
        run_id = made.run_id
        cancels = RunCancellation(h.api, h.clock)

        async def row() -> dict[str, Any]:
            return (await h.sql("SELECT * FROM runs WHERE id = :i", i=run_id))[0]

        seen: dict[str, Any] = {"heartbeats": 0}

        class Observer:
            async def step(self, name: str) -> None:
                if name != "run.heartbeat":
                    return
                seen["heartbeats"] += 1
                if seen["heartbeats"] == 1:
                    await while_running(h, sid, run_id, cancels, row, seen)
                elif seen["heartbeats"] == 3:
                    seen["cancelled"] = await cancels.cancel(RUN_CANCELLER, run_id)

        worker = run_worker(
            h.admin,
            h.clock,
            "w1",
            capacity=QueueCapacity(4, 1, 1),
            settings=SETTINGS,
            probe=Observer(),
        )
        outcome = await worker.run_once()
        assert outcome is not None
        assert outcome.run_id == str(run_id)
        assert outcome.lease_lost
        assert outcome.reason_code == LEASE_LOST
        # Heartbeats 2 and 3 committed after the schedule's cancellation: the run went on.
        assert seen["heartbeats"] == 3
        assert "refused" in seen
        final = await row()
        assert final["status"] == "CANCELLED"
        assert final["lease_owner"] is None
        events = await h.sql(
            "SELECT event_type, actor FROM session_events WHERE run_id = :i ORDER BY seq", i=run_id
        )
        assert events[-1]["event_type"] == "run.cancelled"
        assert events[-1]["actor"] == f"principal:{WHO.principal_id}"
        # The schedule's cancellation stopped every future occurrence.
        h.clock.advance(2 * 86400 + 60)
        after = await h.materializer().materialize(sid)
        assert after.status is MaterializeStatus.NOT_DUE
        occurrences = await h.sql(
            "SELECT id FROM schedule_occurrences WHERE schedule_id = :i", i=sid
        )
        assert len(occurrences) == 1
        schedule = (await h.sql("SELECT * FROM schedules WHERE id = :i", i=sid))[0]
        assert schedule["state"] == "CANCELLED"
        assert schedule["next_fire_at"] is None
        gate_evidence.record("heartbeats_after_schedule_cancel", seen["heartbeats"] - 1)
        gate_evidence.record("refused_run_cancels", seen["refused"])
        gate_evidence.record("run_unchanged_columns", seen["unchanged_columns"])
        gate_evidence.record(
            "worker_outcome", {"lease_lost": True, "fencing_token": final["fencing_token"]}
        )
        gate_evidence.record("occurrences_after_two_more_instants", len(occurrences))
    finally:
        await h.close()


async def while_running(
    h: MaterializeWorld,
    sid: UUID,
    run_id: UUID,
    cancels: RunCancellation,
    row: Any,
    seen: dict[str, Any],
) -> None:
    before = await row()
    assert before["status"] == "RUNNING"
    cancelled = await h.world.service.cancel(WHO, sid, 1)
    assert cancelled.schedule.state.value == "CANCELLED"
    assert await row() == before, "cancelling the schedule changed its active run"
    refused = {}
    with pytest.raises(AuthorizationError) as no_scope:
        await cancels.cancel(WHO, run_id)
    assert no_scope.value.code == CANCEL_FORBIDDEN
    refused["owner_without_run_cancel"] = no_scope.value.code
    with pytest.raises(NotFoundError) as foreign:
        await cancels.cancel(STRANGER, run_id)
    refused["other_principal_with_run_cancel"] = foreign.value.code
    assert await row() == before, "a refused run cancel changed the run"
    seen["refused"] = refused
    seen["unchanged_columns"] = sorted(before)
