"""PostgreSQL ``PendingAccounts``: terminal scheduled runs not yet accounted."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import Text, and_, cast, exists, select

from scheduling.adapters.postgres.tables import process_events, runs, schedule_occurrences
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.unit_of_work import UnitOfWorkFactory

_TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


class PostgresPendingAccountsRepository:
    """See ``scheduling.ports.repositories.PendingAccountsRepository``: MATERIALIZED
    occurrences whose run is terminal and which have no ``schedule.run_accounted``
    event yet, in one statement of the unit of work's transaction."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def pending(self, limit: int) -> list[UUID]:
        occ = schedule_occurrences.c
        accounted = exists().where(
            and_(
                process_events.c.schedule_id == occ.schedule_id,
                process_events.c.event_type == RUN_ACCOUNTED,
                process_events.c.payload["occurrence_id"].astext == cast(occ.id, Text),
            )
        )
        query = (
            select(runs.c.id)
            .join(schedule_occurrences, occ.run_id == runs.c.id)
            .where(runs.c.status.in_(_TERMINAL), ~accounted)
            .order_by(runs.c.finished_at, runs.c.id)
            .limit(limit)
        )
        rows = (await self._tx.execute(query)).all()
        return [row.id for row in rows]


class PostgresPendingAccounts:
    """Reads, in its own trusted transaction, the unit of work's pending accounts."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def pending(self, limit: int) -> list[UUID]:
        async with self._uow.begin() as uow:
            return await uow.pending_accounts.pending(limit)
