"""rule.metrics.scheduler on the scheduler role's own aggregates (``WorkerMetrics``,
the summary the serving process logs at exit), over PostgreSQL.

A daily (UTC) schedule is first scanned 5 s after its third instant: the two older
instants are coalesced into the decision of the third. The worker's summary must equal
what the ledger yields: one decision with a due-to-decided lag of 5 s, two coalesced
misfires, and an outage span from the oldest coalesced instant (the coalescing event's
``first_nominal_at``) to the decision that closed it (the occurrence's ``created_at``):
not to the nominal instant decided, nor from the newest coalesced instant.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.domain.cadence import format_instant
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

LATE = timedelta(seconds=5)
UTC_DAILY = {"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"}


@pytest.mark.rule("rule.metrics.scheduler")
async def test_summary_outage_span_runs_from_the_oldest_instant_to_the_decision(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(cadence=UTC_DAILY)
        first = await h.next_fire(sid)
        third = first + timedelta(days=2)
        worker = h.worker(h.materializer())
        h.clock.advance_to(third + LATE)
        await worker.run_once()
        ledger = (await h.ledger()).of(sid)
        (occurrence,) = ledger.occurrences
        assert occurrence["nominal_fire_at"] == third, occurrence
        (coalesced,) = [
            e for e in ledger.events if e["event_type"] == "schedule.misfires_coalesced"
        ]
        assert coalesced["payload"]["first_nominal_at"] == format_instant(first)
        assert coalesced["payload"]["count"] == 2
        summary = worker.metrics.summary()
        span = (occurrence["created_at"] - first).total_seconds()
        assert span == 2 * 86400 + LATE.total_seconds()
        want = {
            "decisions": 1,
            "coalesced_misfires": 2,
            "longest_outage_seconds": span,
            "lag_seconds": {"p50": 5.0, "p95": 5.0, "p99": 5.0},
        }
        assert {k: summary[k] for k in want} == want, summary
    finally:
        await h.close()


@pytest.mark.rule("rule.metrics.scheduler")
async def test_summary_counts_only_failure_limit_pauses_as_auto_paused(pg_url: str) -> None:
    """A one-time schedule decided (COMPLETED) beside a daily one missed past its
    60 s grace at its failure limit of 1 (PAUSED): one auto-pause, not two."""
    h = await MaterializeWorld.open(pg_url)
    try:
        once = await h.create(key="once", cadence={"kind": "ONCE", "at": "2026-03-02T09:00:00Z"})
        daily = await h.create(
            key="daily", cadence=UTC_DAILY, misfire_grace_seconds=60, max_consecutive_failures=1
        )
        assert await h.next_fire(once) == await h.next_fire(daily)
        h.clock.advance_to(await h.next_fire(once) + timedelta(seconds=120))
        worker = h.worker(h.materializer(), batch_size=10)
        await worker.run_once()
        states = {sid: (await h.schedule(sid))["state"] for sid in (once, daily)}
        assert states == {once: "COMPLETED", daily: "PAUSED"}, states
        assert (await h.schedule(daily))["pause_reason"] == "failure_limit"
        summary = worker.metrics.summary()
        want = {
            "decisions": 2,
            "dispositions": {"MATERIALIZED": 1, "MISSED": 1},
            "auto_paused": 1,
        }
        assert {k: summary[k] for k in want} == want, summary
    finally:
        await h.close()
