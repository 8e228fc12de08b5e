"""The schedule worker's throughput settings (ADR 1701) on PostgreSQL: materializations
in flight at once keep sibling isolation and exactly-once; lanes split a shared batch."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.adapters.postgres.accounting import PostgresPendingAccounts
from scheduling.service.materializer import MaterializeResult, MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from simulation.worlds.materialize import MaterializeWorld, StrictScheduleWorker

pytestmark = pytest.mark.postgres
RING = 1 << 128


def worker(h: MaterializeWorld, *, lane: int | None, **settings: Any) -> StrictScheduleWorker:
    return StrictScheduleWorker(
        expect_errors=True,
        uow=h.scheduler,
        materializer=h.materializer(),
        clock=h.world.clock,
        settings=WorkerSettings(**settings),
        pending=PostgresPendingAccounts(h.scheduler),
        lane=lane,
    )


async def test_concurrent_pass_isolates_a_corrupt_definition(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(6)]
        bad = ids[2]
        await h.corrupt(bad)
        fire = await h.next_fire(ids[0])
        h.clock.advance_to(fire + timedelta(seconds=1))
        w = worker(h, lane=None, concurrency=4, failure_backoff_seconds=600)
        report = await w.run_once()
        assert sorted(map(str, report.scanned)) == sorted(map(str, ids))
        assert list(report.errors) == [bad]
        decided = sorted(str(r.schedule_id) for r in report.results)
        assert decided == sorted(str(i) for i in ids if i != bad)
        assert all(r.status is MaterializeStatus.DECIDED for r in report.results)
        ledger = await h.ledger()
        assert ledger.of(bad).occurrences == []
        assert (await h.schedule(bad))["next_fire_at"] == fire
        for good in ids:
            if good != bad:
                assert len(ledger.of(good).occurrences) == 1
                assert len(ledger.of(good).runs) == 1
    finally:
        await h.close()


async def test_two_concurrent_workers_decide_each_schedule_once(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        # Five: the harness tenant admits five active runs.
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(5)]
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        workers = [worker(h, lane=0, concurrency=3), worker(h, lane=RING // 2, concurrency=3)]
        reports = await asyncio.gather(*(w.run_once() for w in workers))
        assert sum(len(r.results) for r in reports) >= len(ids)
        ledger = await h.ledger()
        assert sorted(str(o["schedule_id"]) for o in ledger.occurrences) == sorted(map(str, ids))
        assert len(ledger.runs) == len(ids)
        assert all(not w.errors_seen for w in workers)
    finally:
        await h.close()


async def test_lanes_start_a_shared_batch_at_different_points(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(8)]
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        ring = sorted(ids, key=lambda sid: sid.int)
        # Lanes just below the first and the fifth id of the ring.
        lanes = [ring[0].int - 1, ring[4].int - 1]
        orders: list[list[UUID]] = []
        for lane in lanes:
            async with h.scheduler.begin() as uow:
                due = await uow.schedules.due(h.clock.now(), 100)
            w = worker(h, lane=lane, concurrency=1)
            w._materializer = _Recorder()  # type: ignore[assignment]
            report = await w.run_once()
            assert sorted(map(str, report.scanned)) == sorted(map(str, due))
            orders.append(report.scanned)
        assert orders[0] == ring
        assert orders[1] == ring[4:] + ring[:4]
        # Each worker's first half is the other's second half: disjoint stretches.
        assert not set(orders[0][:4]) & set(orders[1][:4])
        # Without a lane the batch keeps its scan order (next_fire_at, id).
        w = worker(h, lane=None, concurrency=1)
        w._materializer = _Recorder()  # type: ignore[assignment]
        async with h.scheduler.begin() as uow:
            due = await uow.schedules.due(h.clock.now(), 100)
        assert (await w.run_once()).scanned == due
    finally:
        await h.close()


class _Recorder:
    """Stands in for the materializer: records the order it is asked in."""

    def __init__(self) -> None:
        self.asked: list[UUID] = []

    async def materialize(self, schedule_id: UUID) -> Any:
        self.asked.append(schedule_id)
        raise RuntimeError("recording only")


class _TakenFirst:
    """Stands in for the materializer: the first schedule was taken by another worker."""

    def __init__(self, taken: UUID) -> None:
        self.taken = taken
        self.asked: list[UUID] = []

    async def materialize(self, schedule_id: UUID) -> Any:
        self.asked.append(schedule_id)
        taken = schedule_id == self.taken
        status = MaterializeStatus.NOT_DUE if taken else MaterializeStatus.DECIDED
        return MaterializeResult(schedule_id, status)


async def test_a_collision_yields_the_rest_of_the_batch(pg_url: str) -> None:
    """Throughput mode (lanes): another worker shares the batch, so the rest is left."""
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(4)]
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        async with h.scheduler.begin() as uow:
            due = await uow.schedules.due(h.clock.now(), 100)
        order = sorted(due, key=lambda sid: sid.int)  # lane 0: ascending ids
        w = worker(h, lane=0, concurrency=1)
        stub = _TakenFirst(order[1])
        w._materializer = stub  # type: ignore[assignment]
        report = await w.run_once()
        assert report.scanned == order[:2] == stub.asked
        assert report.yielded == order[2:]
    finally:
        await h.close()


async def test_without_lanes_a_collision_only_skips_that_row(pg_url: str) -> None:
    """One worker per batch: a row another worker holds must not stall the rest
    (rule.claim.skip_locked); yielding would rescan behind the held row forever."""
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(4)]
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        w = worker(h, lane=None, concurrency=1)
        async with h.scheduler.begin() as uow:
            due = await uow.schedules.due(h.clock.now(), 100)
        stub = _TakenFirst(due[1])
        w._materializer = stub  # type: ignore[assignment]
        report = await w.run_once()
        assert report.scanned == due == stub.asked
        assert report.yielded == []
    finally:
        await h.close()
