"""PostgreSQL ``ScheduleOccurrenceRepository``."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql.dml import ReturningInsert

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.repositories.schedules import owned_by
from scheduling.adapters.postgres.tables import schedule_occurrences, schedules
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import NotFoundError, ValidationError
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.paging import (
    INVALID_CURSOR,
    Page,
    PageRequest,
    decode_cursor,
    encode_cursor,
)
from scheduling.ports.repositories import NOT_FOUND

_CURSOR = "occurrences"
_occ = schedule_occurrences.c


def occurrence_row(occurrence: ScheduleOccurrence) -> dict[str, Any]:
    row = occurrence.model_dump()
    row["disposition"] = occurrence.disposition.value
    return row


def to_occurrence(row: Any) -> ScheduleOccurrence:
    return ScheduleOccurrence(
        **{c.name: getattr(row, c.name) for c in schedule_occurrences.columns}
    )


def _insert_statement() -> ReturningInsert[Any]:
    bound = {c.name: bindparam(c.name, type_=c.type) for c in schedule_occurrences.columns}
    return (
        insert(schedule_occurrences)
        .values(bound)
        .on_conflict_do_nothing(index_elements=["schedule_id", "nominal_fire_at"])
        .returning(_occ.id)
    )


INSERT_OCCURRENCE = _insert_statement()
"""The hot-path INSERT, built once (ADR 1740): a conflict on the idempotency key
inserts nothing and returns no row. Bound by column name (``occurrence_row``); the
materializer's decision statement starts with it (ADR 2330)."""
_INSERT = Prepared(INSERT_OCCURRENCE)


def _visible(principal: Principal | None) -> Any:
    return _occ.schedule_id.in_(select(schedules.c.id).where(owned_by(principal)))


class PostgresOccurrenceRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def insert(self, occurrence: ScheduleOccurrence) -> ScheduleOccurrence:
        if await self._tx.fetch(_INSERT, occurrence_row(occurrence)):
            return occurrence
        existing = select(schedule_occurrences).where(
            _occ.schedule_id == occurrence.schedule_id,
            _occ.nominal_fire_at == occurrence.nominal_fire_at,
        )
        return to_occurrence((await self._tx.execute(existing)).one())

    async def get(self, occurrence_id: UUID, principal: Principal | None) -> ScheduleOccurrence:
        query = select(schedule_occurrences).where(_occ.id == occurrence_id, _visible(principal))
        row = (await self._tx.execute(query)).first()
        if row is None:
            raise NotFoundError(NOT_FOUND, "occurrence not found", {"id": str(occurrence_id)})
        return to_occurrence(row)

    async def list(
        self, schedule_id: UUID, principal: Principal, page: PageRequest
    ) -> Page[ScheduleOccurrence]:
        owner = select(schedules.c.id).where(schedules.c.id == schedule_id, owned_by(principal))
        if (await self._tx.execute(owner)).first() is None:
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        query = select(schedule_occurrences).where(_occ.schedule_id == schedule_id)
        if page.cursor is not None:
            (nominal,) = decode_cursor(_CURSOR, page.cursor, 1)
            try:
                after = datetime.fromisoformat(nominal)
            except ValueError:
                raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
            query = query.where(_occ.nominal_fire_at < after)
        query = query.order_by(_occ.nominal_fire_at.desc()).limit(page.limit + 1)
        rows = (await self._tx.execute(query)).all()
        items = [to_occurrence(r) for r in rows[: page.limit]]
        cursor = None
        if len(rows) > page.limit:
            cursor = encode_cursor(_CURSOR, [items[-1].nominal_fire_at.isoformat()])
        return Page(items=items, next_cursor=cursor)

    async def latest(
        self, schedule_id: UUID, disposition: OccurrenceDisposition | None = None
    ) -> ScheduleOccurrence | None:
        query = select(schedule_occurrences).where(_occ.schedule_id == schedule_id)
        if disposition is not None:
            query = query.where(_occ.disposition == disposition.value)
        query = query.order_by(_occ.nominal_fire_at.desc()).limit(1)
        row = (await self._tx.execute(query)).first()
        return None if row is None else to_occurrence(row)

    async def for_run(self, run_id: UUID) -> ScheduleOccurrence | None:
        query = select(schedule_occurrences).where(_occ.run_id == run_id)
        row = (await self._tx.execute(query)).first()
        return None if row is None else to_occurrence(row)
