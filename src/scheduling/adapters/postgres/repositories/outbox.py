"""The PostgreSQL outcome outbox, joined to the unit of work's transaction."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert

from scheduling.adapters.postgres.tables import schedule_outbox
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.ports.outbox import OutboxMessage

_C = schedule_outbox.c


class PostgresOutboxRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def append(self, message: OutboxMessage) -> bool:
        statement = (
            insert(schedule_outbox)
            .values(
                id=message.id,
                tenant_id=message.tenant_id,
                principal_id=message.principal_id,
                schedule_id=message.schedule_id,
                occurrence_id=message.occurrence_id,
                kind=message.kind,
                payload=message.payload,
                created_at=message.created_at,
                delivered_at=message.delivered_at,
            )
            .on_conflict_do_nothing(index_elements=["id"])
            .returning(_C.id)
        )
        return (await self._tx.execute(statement)).first() is not None

    async def pending(self, limit: int) -> list[OutboxMessage]:
        query = (
            select(schedule_outbox)
            .where(_C.delivered_at.is_(None))
            .order_by(_C.created_at, _C.id)
            .limit(limit)
        )
        return [OutboxMessage(**dict(r._mapping)) for r in (await self._tx.execute(query)).all()]

    async def mark_delivered(self, message_id: UUID, at: datetime) -> bool:
        statement = (
            update(schedule_outbox)
            .where(_C.id == message_id, _C.delivered_at.is_(None))
            .values(delivered_at=at)
            .returning(_C.id)
        )
        return (await self._tx.execute(statement)).first() is not None
