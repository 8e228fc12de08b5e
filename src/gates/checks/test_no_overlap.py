"""gate.schedule.no_overlap on PostgreSQL with real concurrent schedule workers.

Schedule A fires and its run is held non-terminal (QUEUED, then leased RUNNING) across
A's next due instant. Two schedule workers then scan concurrently: A's instant is
recorded exactly once as SKIPPED_OVERLAP (reason ``schedule.materialize.overlap``),
no second run or session exists, A's run row is byte-for-byte unchanged and A's
failure count unchanged, while schedule B, due at the same instant, materializes.
Once A's run is terminal, A's following instant materializes again.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from gates.checks.materialize_support import Harness
from gates.pytest_plugin import GateEvidence
from scheduling.service.materializer import OVERLAP
from simulation.checkers import check_ledger

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.no_overlap")
async def test_next_instant_skipped_while_run_in_flight(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await Harness.open(pg_url)
    try:
        a = await h.create(title="A")
        first = await h.next_fire(a)
        h.clock.advance_to(first + timedelta(seconds=1))
        assert (await h.worker(h.materializer()).run_once()).scanned == [a]
        run = (await h.ledger()).of(a).runs[0]
        # B first fires at A's second instant.
        h.clock.advance_to(first + timedelta(hours=2))
        b = await h.create(title="B", key="b")
        second = await h.next_fire(a)
        assert await h.next_fire(b) == second
        await h.sql(
            "UPDATE runs SET status = 'RUNNING', lease_owner = 'w1', lease_expires_at = :t,"
            " fencing_token = 1 WHERE id = :i",
            t=second + timedelta(hours=1),
            i=run["id"],
        )
        held = (await h.sql("SELECT * FROM runs WHERE id = :i", i=run["id"]))[0]
        h.clock.advance_to(second + timedelta(seconds=2))
        workers = [h.worker(h.materializer()), h.worker(h.materializer())]
        reports = await asyncio.gather(*(w.run_once() for w in workers))
        ledger = await h.ledger()
        a_ledger, b_ledger = ledger.of(a), ledger.of(b)
        a_occ = {o["nominal_fire_at"]: o for o in a_ledger.occurrences}
        assert a_occ[second]["disposition"] == "SKIPPED_OVERLAP"
        assert a_occ[second]["reason_code"] == OVERLAP
        assert a_occ[second]["run_id"] is None
        assert len(a_ledger.runs) == len(a_ledger.sessions) == 1
        assert (await h.sql("SELECT * FROM runs WHERE id = :i", i=run["id"]))[0] == held
        assert a_ledger.event_types().count("schedule.occurrence.skipped_overlap") == 1
        assert (await h.schedule(a))["consecutive_failures"] == 0
        assert [o["disposition"] for o in b_ledger.occurrences] == ["MATERIALIZED"]
        assert len(b_ledger.runs) == 1
        # The in-flight run ends; A's next instant materializes.
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', lease_owner = NULL, lease_expires_at = NULL,"
            " finished_at = :t WHERE id = :i",
            t=second + timedelta(minutes=5),
            i=run["id"],
        )
        third = await h.next_fire(a)
        h.clock.advance_to(third + timedelta(seconds=1))
        await h.worker(h.materializer()).run_once()
        final = (await h.ledger()).of(a)
        assert [o["disposition"] for o in final.occurrences] == [
            "MATERIALIZED",
            "SKIPPED_OVERLAP",
            "MATERIALIZED",
        ]
        everything = await h.ledger()
        assert check_ledger(everything.occurrences, everything.runs, everything.sessions) == []
        gate_evidence.record("workers_raced", len(workers))
        gate_evidence.record("decisions_per_worker", [len(r.results) for r in reports])
        gate_evidence.record("schedule_a", [o["disposition"] for o in final.occurrences])
        gate_evidence.record("schedule_b", [o["disposition"] for o in b_ledger.occurrences])
        gate_evidence.record("held_run_status", "RUNNING (leased) across the next instant")
    finally:
        await h.close()
