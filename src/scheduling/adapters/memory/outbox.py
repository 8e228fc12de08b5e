"""The in-memory outcome outbox (trusted scope only, like the scheduler's)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from uuid import UUID

from scheduling.adapters.memory.repositories import _Base
from scheduling.ports.outbox import OutboxMessage


class MemoryOutboxRepository(_Base):
    async def append(self, message: OutboxMessage) -> bool:
        if message.id in self.t.outbox:
            return False
        self.t.outbox[message.id] = message
        return True

    async def pending(self, limit: int) -> list[OutboxMessage]:
        rows = [m for m in self.t.outbox.values() if m.delivered_at is None]
        rows = [m for m in rows if self._sees(m.tenant_id, m.principal_id, None)]
        return sorted(rows, key=lambda m: (m.created_at, m.id.bytes))[:limit]

    async def mark_delivered(self, message_id: UUID, at: datetime) -> bool:
        row = self.t.outbox.get(message_id)
        if row is None or row.delivered_at is not None:
            return False
        self.t.outbox[message_id] = dataclasses.replace(row, delivered_at=at)
        return True
