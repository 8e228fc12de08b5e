"""The schedule worker on PostgreSQL: isolation of a corrupt definition, bounded batches,
the sleep computation, the LISTEN/NOTIFY wake, the poll fallback without it, and the
run-queued notification the runs trigger sends at commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from scheduling.adapters.postgres.notify import (
    RUN_CHANNEL,
    PostgresNotifier,
    PostgresWakeListener,
    to_libpq_url,
)
from scheduling.adapters.system_clock import SystemClock
from scheduling.service.materializer import STEP_DECIDED, MaterializeStatus
from scheduling.service.schedule_worker import ScheduleWorker, WorkerSettings
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


async def test_corrupt_definition_neither_rolls_back_nor_blocks_siblings(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(3)]
        bad = ids[1]
        await h.corrupt(bad)
        fire = await h.next_fire(ids[0])
        h.clock.advance_to(fire + timedelta(seconds=1))
        worker = h.worker(
            h.materializer(), expect_errors=True, batch_size=1, failure_backoff_seconds=600
        )
        reports = [await worker.run_once() for _ in range(3)]
        errors = {k: v for r in reports for k, v in r.errors.items()}
        assert list(errors) == [bad]
        decided = [x.schedule_id for r in reports for x in r.results]
        assert sorted(map(str, decided)) == sorted(str(i) for i in ids if i != bad)
        summary = worker.metrics.summary()
        assert summary["errors"] == 1
        assert summary["dispositions"] == {"MATERIALIZED": 2}
        assert summary["lag_seconds"] == {"p50": 1.0, "p95": 1.0, "p99": 1.0}
        ledger = await h.ledger()
        assert len(ledger.of(bad).occurrences) == 0
        assert (await h.schedule(bad))["next_fire_at"] == fire
        for good in ids:
            if good != bad:
                assert [o["disposition"] for o in ledger.of(good).occurrences] == ["MATERIALIZED"]
        # Set aside for its backoff: the next pass does not retry it ...
        again = await worker.run_once()
        assert again.scanned == []
        assert again.deferred == [bad]
        # ... until the backoff has passed.
        h.clock.advance(601)
        assert (await worker.run_once()).errors == {bad: "ValidationError"}
    finally:
        await h.close()


async def test_sleep_is_the_earlier_of_next_firing_and_poll(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire - timedelta(seconds=100))
        short = h.worker(h.materializer(), fallback_poll_seconds=30)
        long = h.worker(h.materializer(), fallback_poll_seconds=300)
        assert await short.sleep_seconds() == 30
        assert await long.sleep_seconds() == 100
        h.clock.advance(200)  # due but (say) locked elsewhere: a short pause, no spin
        assert await long.sleep_seconds() == long.settings.contention_pause_seconds
    finally:
        await h.close()


class CountingWorker(ScheduleWorker):
    passes = 0

    async def run_once(self) -> Any:
        self.passes += 1
        return await super().run_once()


async def wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    """Poll ``predicate`` every 20 ms for up to ``seconds``."""
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def sleeping_worker(h: MaterializeWorld, listener: PostgresWakeListener) -> CountingWorker:
    """A worker woken by ``listener``, over one schedule out of reach of the real clock:
    it has nothing to do and sleeps (its fallback poll is 60 s)."""
    sid = await h.create()
    await h.sql(
        "UPDATE schedules SET next_fire_at = :t WHERE id = :i",
        t=SystemClock().now() + timedelta(days=1),
        i=sid,
    )
    return CountingWorker(
        uow=h.scheduler,
        materializer=h.materializer(clock=SystemClock()),
        clock=SystemClock(),
        settings=WorkerSettings(fallback_poll_seconds=60),
        wake=listener,
    )


async def test_notify_wakes_a_sleeping_worker(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    listener = PostgresWakeListener(pg_url, clock=SystemClock())
    try:
        worker = await sleeping_worker(h, listener)
        await listener.start()  # after the create, whose own wake-up is not this test's
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        assert await wait_for(lambda: worker.passes == 1, 5)
        await asyncio.sleep(0.3)
        assert worker.passes == 1  # asleep until the next firing or the 60 s poll
        await PostgresNotifier(pg_url).schedule_changed(h.created[0])
        assert await wait_for(lambda: worker.passes == 2, 5), "notification did not wake it"
        assert listener.received == 1
        stop.set()
        await PostgresNotifier(pg_url).schedule_changed(h.created[0])
        await asyncio.wait_for(task, 5)
    finally:
        await listener.close()
        await h.close()


async def test_without_notifications_the_poll_finds_due_work(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        clock = SystemClock()
        # Make the schedule due in real time: its next instant is already behind us.
        await h.sql(
            "UPDATE schedules SET next_fire_at = :t WHERE id = :i",
            t=clock.now() - timedelta(days=400),
            i=sid,
        )
        worker = CountingWorker(
            uow=h.scheduler,
            materializer=h.materializer(clock=clock),
            clock=clock,
            settings=WorkerSettings(fallback_poll_seconds=0.2),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        decided = await wait_for(lambda: worker.passes >= 3, 5)
        stop.set()
        await asyncio.wait_for(task, 5)
        assert decided
        row = await h.schedule(sid)
        assert row["next_fire_at"] > clock.now() - timedelta(seconds=5)
        assert len((await h.ledger()).of(sid).occurrences) == 1
    finally:
        await h.close()


async def test_retry_result_keeps_schedule_due(pg_url: str) -> None:
    from decimal import Decimal

    from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
    from simulation.worlds.service import CEILINGS

    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ConfiguredTenantConfiguration(
            default=CEILINGS.model_copy(
                update={"max_active_runs": 1, "max_cost_per_run": Decimal(10)}
            )
        )
        a = await h.create(title="A", key="a")
        b = await h.create(title="B", key="b")
        fire = await h.next_fire(a)
        h.clock.advance_to(fire + timedelta(seconds=1))
        first = await h.materializer().materialize(a)
        blocked = await h.materializer().materialize(b)
        assert first.status is MaterializeStatus.DECIDED
        assert blocked.status is MaterializeStatus.RETRY
        assert blocked.retry_after_seconds is not None
        assert blocked.retry_after_seconds > 0
        assert (await h.ledger()).of(b).occurrences == []
        assert (await h.schedule(b))["next_fire_at"] == fire
    finally:
        await h.close()


class CrashAt:
    """A probe that raises at one step: the transaction rolls back there."""

    def __init__(self, step: str) -> None:
        self.step_name = step

    async def step(self, name: str) -> None:
        if name == self.step_name:
            raise RuntimeError(f"crash at {name}")


async def test_a_queued_run_notifies_run_workers_at_commit_and_never_on_rollback(
    pg_url: str,
) -> None:
    """The runs insert trigger (revision 0007, ADR 1750) is the queue notification: one
    per MATERIALIZED decision, carrying the run's id, delivered at commit; a decision
    rolled back after its run was inserted sends nothing."""
    h = await MaterializeWorld.open(pg_url)
    listen = await asyncpg.connect(to_libpq_url(pg_url))
    payloads: list[str] = []
    await listen.add_listener(RUN_CHANNEL, lambda *args: payloads.append(args[3]))
    try:
        first, second = await h.create(key="a"), await h.create(key="b")
        h.clock.advance_to(await h.next_fire(first) + timedelta(seconds=1))
        with pytest.raises(RuntimeError, match="crash at"):
            await h.materializer(probe=CrashAt(STEP_DECIDED)).materialize(second)
        assert (await h.sql("SELECT count(*) AS n FROM runs"))[0]["n"] == 0
        result = await h.materializer().materialize(first)
        assert result.status is MaterializeStatus.DECIDED
        assert await wait_for(lambda: len(payloads) == 1, 5), "no notification at commit"
        await asyncio.sleep(0.3)  # a late one from the rolled-back decision would show
        assert payloads == [str(result.run_id)]
    finally:
        await listen.close()
        await h.close()
