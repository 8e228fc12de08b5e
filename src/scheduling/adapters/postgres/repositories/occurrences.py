"""PostgreSQL ``ScheduleOccurrenceRepository``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Integer, bindparam, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql.dml import ReturningInsert

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.repositories.schedules import owned_by
from scheduling.adapters.postgres.tables import schedule_occurrences, schedules
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import NotFoundError
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.paging import (
    Page,
    PageRequest,
    cursor_instant,
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


def _by_name(record: Any) -> ScheduleOccurrence:
    """``to_occurrence`` of an asyncpg record (read by name, not by attribute)."""
    return ScheduleOccurrence(**{c.name: record[c.name] for c in schedule_occurrences.columns})


def _page(fetched: list[ScheduleOccurrence], page: PageRequest) -> Page[ScheduleOccurrence]:
    """The first ``page.limit`` of ``fetched`` (one more than a page was asked for)."""
    items = fetched[: page.limit]
    cursor = None
    if len(fetched) > page.limit:
        cursor = encode_cursor(_CURSOR, [items[-1].nominal_fire_at.isoformat()])
    return Page(items=items, next_cursor=cursor)


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


_OWNED_ID = Prepared(
    select(schedules.c.id).where(
        schedules.c.id == bindparam("schedule_id", type_=schedules.c.id.type),
        schedules.c.tenant_id == bindparam("tenant_id", type_=schedules.c.tenant_id.type),
        schedules.c.principal_id == bindparam("principal_id", type_=schedules.c.principal_id.type),
    )
)
"""``owned_by`` the principal, bound: whether the page's schedule is the caller's."""
_FIRST_PAGE = Prepared(
    select(schedule_occurrences)
    .where(_occ.schedule_id == bindparam("schedule_id", type_=_occ.schedule_id.type))
    .order_by(_occ.nominal_fire_at.desc())
    .limit(bindparam("limit", type_=Integer))
)
"""A page without a cursor (an inbox's first look): prepared (ADR 2300)."""


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
        owner = {
            "schedule_id": schedule_id,
            "tenant_id": principal.tenant_id,
            "principal_id": principal.principal_id,
        }
        if not await self._tx.fetch(_OWNED_ID, owner):
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        if page.cursor is None:
            records = await self._tx.fetch(
                _FIRST_PAGE, {"schedule_id": schedule_id, "limit": page.limit + 1}
            )
            return _page([_by_name(r) for r in records], page)
        (nominal,) = decode_cursor(_CURSOR, page.cursor, 1)
        after = cursor_instant(nominal)
        query = select(schedule_occurrences).where(_occ.schedule_id == schedule_id)
        query = query.where(_occ.nominal_fire_at < after)
        query = query.order_by(_occ.nominal_fire_at.desc()).limit(page.limit + 1)
        rows = (await self._tx.execute(query)).all()
        return _page([to_occurrence(r) for r in rows[: page.limit + 1]], page)

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
