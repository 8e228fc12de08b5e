"""PostgreSQL ``ScheduleIdempotencyLedger``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.tables import schedule_idempotency_keys
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.records import IdempotencyEntry
from scheduling.ports.repositories import KEY_REUSED

_keys = schedule_idempotency_keys.c
_NAMES = tuple(c.name for c in schedule_idempotency_keys.columns)

# Every create and keyed update looks its key up and records it: prepared on the driver
# connection (ADR 1740), as the principal and agent reads (ADR 2240, 2310).
_LOOKUP = Prepared(
    select(schedule_idempotency_keys).where(
        *(
            _keys[n] == bindparam(n, type_=_keys[n].type)
            for n in ("tenant_id", "principal_id", "key")
        )
    )
)
_RECORD = Prepared(
    insert(schedule_idempotency_keys)
    .values({n: bindparam(n, type_=_keys[n].type) for n in _NAMES})
    .on_conflict_do_nothing(index_elements=["tenant_id", "principal_id", "key"])
    .returning(_keys.key)
)


def _to_entry(row: Any) -> IdempotencyEntry:
    return IdempotencyEntry(**{name: row[name] for name in _NAMES})


class PostgresIdempotencyLedger:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def lookup(self, principal: Principal, key: str) -> IdempotencyEntry | None:
        return await self._get(principal.tenant_id, principal.principal_id, key)

    async def _get(self, tenant_id: str, principal_id: str, key: str) -> IdempotencyEntry | None:
        params = {"tenant_id": tenant_id, "principal_id": principal_id, "key": key}
        rows = await self._tx.fetch(_LOOKUP, params)
        return _to_entry(rows[0]) if rows else None

    async def record(self, entry: IdempotencyEntry) -> IdempotencyEntry:
        # Shallow (``asdict`` copies recursively): the fields are the columns.
        if await self._tx.fetch(_RECORD, {name: getattr(entry, name) for name in _NAMES}):
            return entry
        stored = await self._get(entry.tenant_id, entry.principal_id, entry.key)
        if stored is None or stored.request_hash != entry.request_hash:
            raise ConflictError(KEY_REUSED, "the idempotency key was used for another request")
        return stored
