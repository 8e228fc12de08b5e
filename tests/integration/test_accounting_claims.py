"""Post-run accounting shared by schedulers in disjoint batches (issue 25 finding 3,
ADR 2221), on real PostgreSQL: a claim holds its runs (transaction-scoped advisory
locks) until its block ends, so a concurrent claim takes the next ones, oldest finish
first, and both sweeps together account every run exactly once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import UUID

import pytest

from scheduling.service.materializer import MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


async def _finished(h: MaterializeWorld, n: int) -> list[UUID]:
    """``n`` COMPLETED scheduled runs not yet accounted, in finish order."""
    sids = [await h.create(misfire_grace_seconds=600) for _ in range(n)]
    h.clock.advance_to(max([await h.next_fire(s) for s in sids]) + timedelta(seconds=1))
    assert (await h.scan()).count(MaterializeStatus.DECIDED) == n
    runs = [r["id"] for r in await h.sql("SELECT id FROM runs ORDER BY id")]
    for k, run_id in enumerate(runs):
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', lease_owner = NULL, lease_expires_at = NULL,"
            " finished_at = now() + make_interval(secs => :k) WHERE id = :i",
            k=k,
            i=run_id,
        )
    return runs


async def test_concurrent_claims_are_disjoint_oldest_first(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        runs = await _finished(h, 5)
        pending = h.storage.pending_accounts()
        assert pending is not None
        async with pending.claimed(2) as first:
            async with pending.claimed(10) as second:
                assert first == runs[:2]
                assert second == runs[2:]
            # The second claim ended: its runs are free again; the first still holds.
            async with pending.claimed(10) as third:
                assert third == runs[2:]
        async with pending.claimed(10) as after:
            assert after == runs
    finally:
        await h.close()


async def test_two_schedulers_account_every_run_once(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        runs = await _finished(h, 5)  # the tenant's active-run ceiling
        small = WorkerSettings(accounting_batch=2)
        a = h.scheduler_role(worker_settings=small).worker
        b = h.scheduler_role(worker_settings=small).worker
        # Concurrent sweeps of two runs each: disjoint batches, not the same two.
        assert await asyncio.gather(a.account(), b.account()) == [2, 2]
        assert await a.account() == 1
        events = await h.sql(
            "SELECT payload ->> 'run_id' AS run FROM process_events"
            " WHERE event_type = 'schedule.run_accounted'"
        )
        assert sorted(e["run"] for e in events) == sorted(str(r) for r in runs)
        assert await a.account() == 0
    finally:
        await h.close()
