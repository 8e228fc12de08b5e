"""Who takes the tenant's admission lock (ADR 1750).

The durable store's context read takes it in its own statement; the PostgreSQL
admission controller then sends no lock of its own. With any other store (or none) the
controller takes it itself. The wrong implementations these tests reject: a controller
that trusts a lock nobody took (the fallback path holds no advisory lock), and a
context read that stops locking (the materializer's transaction holds none when its
usage is read).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
from scheduling.adapters.postgres.admission import (
    PostgresAdmissionController,
    admission_lock_key,
)
from scheduling.adapters.postgres.uow import PostgresUnitOfWork
from scheduling.ports.admission import AdmissionOutcome
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import CEILINGS

pytestmark = pytest.mark.postgres

HELD = text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    " AND granted"
)


async def _held(uow: PostgresUnitOfWork) -> int:
    return int((await uow.tx.execute(HELD)).scalar_one())


class HeldAtUsage:
    """An admission controller that records how many advisory locks its transaction
    holds when it reads usage, then admits as the real one does."""

    def __init__(self) -> None:
        self.real = PostgresAdmissionController(ConfiguredTenantConfiguration(default=CEILINGS))
        self.held: list[int] = []

    async def check(self, uow: Any, tenant_id: str, revision: Any, now: Any) -> Any:
        assert isinstance(uow, PostgresUnitOfWork)
        self.held.append(await _held(uow))
        return await self.real.check(uow, tenant_id, revision, now)


async def test_the_controller_locks_when_no_context_read_did(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        controller = PostgresAdmissionController(ConfiguredTenantConfiguration(default=CEILINGS))
        async with h.scheduler.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            revision = await uow.schedules.get_revision(sid, 1, None)
            assert await _held(uow) == 0
            decision = await controller.check(uow, WHO.tenant_id, revision, h.clock.now())
            assert decision.outcome is AdmissionOutcome.ALLOW
            assert await _held(uow) == 1
            assert admission_lock_key(WHO.tenant_id) in uow.tx.advisory_locks
    finally:
        await h.close()


async def test_the_context_read_holds_the_lock_before_admission_reads(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        spy = HeldAtUsage()
        result = await h.materializer(admission=spy).materialize(sid)
        assert result.status is MaterializeStatus.DECIDED
        assert spy.held == [1]  # taken by the context read, before admission ran
    finally:
        await h.close()
