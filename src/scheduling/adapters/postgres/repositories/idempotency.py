"""PostgreSQL ``ScheduleIdempotencyLedger``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from scheduling.adapters.postgres.tables import schedule_idempotency_keys
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.records import IdempotencyEntry
from scheduling.ports.repositories import KEY_REUSED

_keys = schedule_idempotency_keys.c


def _to_entry(row: Any) -> IdempotencyEntry:
    return IdempotencyEntry(
        **{c.name: getattr(row, c.name) for c in schedule_idempotency_keys.columns}
    )


class PostgresIdempotencyLedger:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def lookup(self, principal: Principal, key: str) -> IdempotencyEntry | None:
        return await self._get(principal.tenant_id, principal.principal_id, key)

    async def _get(self, tenant_id: str, principal_id: str, key: str) -> IdempotencyEntry | None:
        query = select(schedule_idempotency_keys).where(
            _keys.tenant_id == tenant_id, _keys.principal_id == principal_id, _keys.key == key
        )
        row = (await self._tx.execute(query)).first()
        return None if row is None else _to_entry(row)

    async def record(self, entry: IdempotencyEntry) -> IdempotencyEntry:
        statement = (
            insert(schedule_idempotency_keys)
            .values(asdict(entry))
            .on_conflict_do_nothing(index_elements=["tenant_id", "principal_id", "key"])
            .returning(_keys.key)
        )
        if (await self._tx.execute(statement)).first() is not None:
            return entry
        stored = await self._get(entry.tenant_id, entry.principal_id, entry.key)
        if stored is None or stored.request_hash != entry.request_hash:
            raise ConflictError(KEY_REUSED, "the idempotency key was used for another request")
        return stored
