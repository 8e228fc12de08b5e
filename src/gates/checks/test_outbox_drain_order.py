"""gate.schedule.repository_contract, the outbox port on every adapter through its
reader: ``OutboxRepository.pending`` lists undelivered rows oldest first (by
``created_at``, then id), so ``OutboxReader.drain`` with a bound delivers the oldest
outcomes first and a newer row never starves an older one. The rows' ids run against
their age, so an order by id alone shows.

Test of the test: ``scheduling-gates mutate`` (``repo.outbox_pending_by_id``: the
PostgreSQL adapter orders pending rows by id only).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.outbox import OutboxReader
from scheduling.testing import MemoryUnitOfWorkFactory, PostgresUnitOfWorkFactory
from simulation.engine.clock import VirtualClock

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.repository_contract")]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ROWS = 4


def _message(n: int) -> OutboxMessage:
    """Row ``n``: the higher its id, the older it is."""
    return OutboxMessage(
        id=UUID(int=n),
        tenant_id="tenant-a",
        principal_id="alice",
        schedule_id=UUID(int=1000),
        occurrence_id=UUID(int=2000 + n),
        kind=RUN_FINISHED,
        payload={"title": f"T{n}", "nominal_fire_at": "2026-03-01T12:00:00Z"},
        created_at=T0 - timedelta(minutes=n),
    )


class _Recorded:
    def __init__(self) -> None:
        self.delivered: list[UUID] = []

    async def deliver(self, message: OutboxMessage) -> None:
        self.delivered.append(message.id)


async def _drained_order(factory: UnitOfWorkFactory) -> list[int]:
    async with factory.begin() as uow:
        for n in range(1, ROWS + 1):
            assert await uow.outbox.append(_message(n))
        await uow.commit()
    delivery = _Recorded()
    reader = OutboxReader(uow=factory, delivery=delivery, clock=VirtualClock(T0))
    # One row per drain: each must be the oldest still pending.
    for _ in range(ROWS):
        assert await reader.drain(limit=1) == 1
    assert await reader.drain(limit=1) == 0
    return [message_id.int for message_id in delivery.delivered]


async def test_the_outbox_drains_oldest_first(pg_url: str, gate_evidence: GateEvidence) -> None:
    oldest_first = list(range(ROWS, 0, -1))
    postgres = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        orders = {
            "memory": await _drained_order(MemoryUnitOfWorkFactory()),
            "postgres": await _drained_order(postgres),
        }
    finally:
        await postgres.dispose()
    for adapter, order in orders.items():
        assert order == oldest_first, (adapter, order)
    gate_evidence.record("drained_in_order", orders)
