"""A lane passes one pooled connection from unit of work to unit of work (ADR 2640).

Each unit of work is still its own transaction. A unit of work that ends with an error
returns its connection to the pool, or discards it if it is broken, as it would without
a lane, and the next one checks a fresh connection out. A lane only serves its own
engine's units of work, and a sibling open at the same time checks out its own. The
schedule worker's lanes keep each decision's isolation and check out once per lane, not
once per decision.

The tests are shown able to fail: ``test_the_checks_fail_on_a_lane_that_keeps_a_failed_connection``
runs the error case against a ``_kept`` that ignores how the unit of work ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event, text

from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.domain.errors import SchedulingError
from scheduling.service.materializer import MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from simulation.worlds.materialize import MaterializeWorld, StrictScheduleWorker

pytestmark = pytest.mark.postgres


class Counted:
    """A factory with its checkouts counted (the pool's ``checkout`` event)."""

    def __init__(self, url: str, pool_size: int = 2) -> None:
        self.factory = PostgresUnitOfWorkFactory.from_url(url, pool_size=pool_size)
        self.checkouts = 0
        event.listen(self.factory.engine.sync_engine, "checkout", self._seen)

    def _seen(self, *_: Any) -> None:
        self.checkouts += 1

    def checked_out(self) -> int:
        pool: Any = self.factory.engine.pool
        return int(pool.checkedout())


@pytest.fixture
async def counted(pg_url: str) -> AsyncIterator[Counted]:
    made = Counted(pg_url)
    try:
        yield made
    finally:
        await made.factory.dispose()


async def _ids(uow: Any) -> tuple[int, int]:
    """The backend's pid and the transaction's id."""
    assert isinstance(uow, PostgresUnitOfWork)
    row = (await uow.tx.execute(text("SELECT pg_backend_pid(), txid_current()"))).one()
    return int(row[0]), int(row[1])


async def test_a_lane_passes_one_connection_through_separate_transactions(
    counted: Counted,
) -> None:
    seen: list[tuple[int, int]] = []
    async with counted.factory.lane():
        for _ in range(3):
            async with counted.factory.begin(tenant_id="t") as uow:
                seen.append(await _ids(uow))
                await uow.commit()
        assert counted.checked_out() == 1  # held by the lane between units of work
    assert counted.checkouts == 1
    assert len({pid for pid, _ in seen}) == 1
    assert len({txid for _, txid in seen}) == 3  # one transaction each
    assert counted.checked_out() == 0  # back in the pool when the lane ends
    async with counted.factory.begin(tenant_id="t") as uow:  # and usable from there
        assert (await _ids(uow))[0] == seen[0][0]


async def _raising(factory: PostgresUnitOfWorkFactory) -> None:
    async with factory.begin(tenant_id="t") as uow:
        await _ids(uow)
        raise RuntimeError("the decision failed")


async def _failing_statement(factory: PostgresUnitOfWorkFactory) -> None:
    async with factory.begin(tenant_id="t") as uow:
        assert isinstance(uow, PostgresUnitOfWork)
        await uow.tx.execute(text("SELECT 1 / 0"))


async def _error_cases(counted: Counted) -> list[int]:
    """Checkouts after: a clean exit without commit, an exception in the block, a
    failed statement; each followed by a unit of work in the same lane."""
    after: list[int] = []
    async with counted.factory.lane():
        async with counted.factory.begin(tenant_id="t") as uow:
            await _ids(uow)  # left without commit and without an error: passed on
        after.append(counted.checkouts)
        with pytest.raises(RuntimeError):
            await _raising(counted.factory)
        assert counted.checked_out() == 0  # returned to the pool, not kept
        async with counted.factory.begin(tenant_id="t") as uow:
            await uow.commit()
        after.append(counted.checkouts)
        with pytest.raises(SchedulingError):
            await _failing_statement(counted.factory)
        async with counted.factory.begin(tenant_id="t") as uow:
            await uow.commit()
        after.append(counted.checkouts)
    return after


async def test_a_clean_end_passes_the_connection_on_an_error_does_not(counted: Counted) -> None:
    assert await _error_cases(counted) == [1, 2, 3]
    assert counted.checked_out() == 0


async def test_the_checks_fail_on_a_lane_that_keeps_a_failed_connection(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plausible mistake: a lane keeping any valid connection, however its unit of
    # work ended (the ``_clean`` test dropped from ``_close``).
    real = PostgresUnitOfWork._close

    async def keeps_whatever_ended(self: PostgresUnitOfWork) -> None:
        self._clean = True
        await real(self)

    monkeypatch.setattr(PostgresUnitOfWork, "_close", keeps_whatever_ended)
    with pytest.raises(AssertionError):
        await _error_cases(counted)


async def test_a_dead_held_connection_is_discarded_and_the_next_begin_goes_through(
    pg_url: str, counted: Counted
) -> None:
    async with counted.factory.lane():
        async with counted.factory.begin(tenant_id="t") as uow:
            dead, _ = await _ids(uow)
            await uow.commit()
        admin = await asyncpg.connect(pg_url)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", dead)
            for _ in range(100):
                gone = await admin.fetchval(
                    "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $1", dead
                )
                if gone:
                    break
                await asyncio.sleep(0.05)
        finally:
            await admin.close()
        # The held connection's BEGIN fails (the dead-connection retry, ADR 2220): it is
        # discarded, and the same unit of work goes through on a fresh one.
        async with counted.factory.begin(tenant_id="t") as uow:
            fresh, _ = await _ids(uow)
            await uow.commit()
        async with counted.factory.begin(tenant_id="t") as uow:
            again, _ = await _ids(uow)
            await uow.commit()
    assert fresh != dead
    assert again == fresh  # the fresh one is passed on in turn


async def test_a_lane_serves_its_own_engine_and_a_sibling_checks_out_its_own(
    pg_url: str, counted: Counted
) -> None:
    other = Counted(pg_url)
    try:
        async with counted.factory.lane():
            for _ in range(2):
                async with other.factory.begin(tenant_id="t") as uow:
                    await uow.commit()
            assert other.checkouts == 2  # another engine: no lane
            async with counted.factory.begin(tenant_id="t") as outer:
                async with counted.factory.begin(tenant_id="t") as inner:
                    assert (await _ids(inner))[0] != (await _ids(outer))[0]
                    await inner.commit()
                await outer.commit()
            assert counted.checkouts == 2
            assert counted.checked_out() == 1  # the lane keeps one; the other went back
        assert counted.checked_out() == 0
    finally:
        await other.factory.dispose()


async def test_the_workers_lanes_check_out_once_per_lane_and_isolate_a_failure(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    checkouts: list[int] = []
    event.listen(h.scheduler.engine.sync_engine, "checkout", lambda *_: checkouts.append(1))
    try:
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(5)]
        # In the middle of the scan's order (next_fire_at, then id): decisions follow it.
        bad = sorted(ids, key=lambda sid: sid.int)[2]
        await h.corrupt(bad)
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        worker = StrictScheduleWorker(
            expect_errors=True,
            uow=h.scheduler,
            materializer=h.materializer(),
            clock=h.world.clock,
            settings=WorkerSettings(concurrency=1, failure_backoff_seconds=600),
        )
        checkouts.clear()
        report = await worker.run_once()
        assert list(report.errors) == [bad]
        assert sorted(map(str, report.scanned)) == sorted(map(str, ids))
        assert report.count(MaterializeStatus.DECIDED) == 4
        # The scan, the lane, and one after the failed decision returned its own
        # (without lanes: 1 + 5).
        assert len(checkouts) == 1 + 1 + 1
        ledger = await h.ledger()
        assert ledger.of(bad).occurrences == []
        assert all(len(ledger.of(good).occurrences) == 1 for good in ids if good != bad)
    finally:
        await h.close()
