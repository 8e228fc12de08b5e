"""The due lock takes the tenant's admission lock; the context read carries the usage
(ADR 2250).

``LOCK_DUE_ADMITTING`` locks the schedule row, then the tenant's advisory lock, in one
statement; the context read that follows reads admission's usage in its own snapshot,
taken after both locks were granted, and the admission repository returns that value
without a statement of its own. The wrong implementations these tests reject: a due lock
that takes no tenant lock (nothing is held after it), a usage read whose snapshot
predates the tenant lock (a run another decision committed while this one waited for
the lock would be missed), and a repository that re-reads what the context carried.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.admission import admission_lock_key
from scheduling.adapters.postgres.uow import PostgresUnitOfWork
from scheduling.service.materializer import STEP_DECIDED, MaterializeStatus
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres

HELD = text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    " AND granted"
)


class PauseBefore:
    """Parks the materializer at ``step`` until released (the transaction stays open)."""

    def __init__(self, step: str) -> None:
        self.step_name = step
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def step(self, name: str) -> None:
        if name == self.step_name:
            self.reached.set()
            await self.release.wait()


async def test_the_due_lock_takes_the_tenant_lock(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        for admitting, held in ((True, 1), (False, 0)):
            async with h.scheduler.begin() as uow:
                assert isinstance(uow, PostgresUnitOfWork)
                locked = await uow.materialization.lock_due(
                    sid, h.clock.now(), lock_admission=admitting
                )
                assert locked is not None
                assert int((await uow.tx.execute(HELD)).scalar_one()) == held
                assert (admission_lock_key(WHO.tenant_id) in uow.tx.advisory_locks) is admitting
    finally:
        await h.close()


async def test_the_carried_usage_sees_a_run_committed_while_waiting(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        a = await h.create(title="A", key="a")
        b = await h.create(title="B", key="b")
        h.clock.advance_to(await h.next_fire(a) + timedelta(seconds=1))
        now = h.clock.now()
        # A parks after its last write, before COMMIT, holding its tenant lock.
        pause = PauseBefore(STEP_DECIDED)
        first = asyncio.create_task(h.materializer(probe=pause).materialize(a))
        await asyncio.wait_for(pause.reached.wait(), 10)
        async with h.scheduler.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            waiting = asyncio.create_task(uow.materialization.lock_due(b, now))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # blocked on A's tenant lock, holding B's row
            pause.release.set()
            result = await first
            assert result.status is MaterializeStatus.DECIDED
            locked = await asyncio.wait_for(waiting, 10)
            assert locked is not None
            schedule, revision = locked
            await uow.materialization.context(schedule, revision)
            sent: list[object] = []
            real_fetch = uow.tx.fetch

            async def counting(prepared: Any, params: Any = None) -> Any:
                sent.append(prepared)
                return await real_fetch(prepared, params)

            uow.tx.fetch = counting  # type: ignore[method-assign]
            usage = await uow.admission.usage(WHO.tenant_id, now)
            assert sent == []  # the context read carried it
            assert usage.active_runs == 1  # A's run, committed while B waited for the lock
            again = await uow.admission.usage(WHO.tenant_id, now)
            assert len(sent) == 1  # carried once; the second read is a statement
            assert again == usage
    finally:
        await h.close()
