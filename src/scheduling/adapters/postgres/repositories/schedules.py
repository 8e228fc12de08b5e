"""PostgreSQL ``ScheduleRepository``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn
from uuid import UUID

from sqlalchemy import (
    Integer,
    Select,
    Table,
    Update,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    true,
    tuple_,
    update,
)

from scheduling.adapters.postgres.memo import cadence_of, revision_of
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.tables import (
    schedule_idempotency_keys,
    schedule_occurrences,
    schedule_revisions,
    schedules,
)
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import ConflictError, NotFoundError, ValidationError
from scheduling.domain.identity import Principal
from scheduling.domain.paging import (
    INVALID_CURSOR,
    Page,
    PageRequest,
    cursor_instant,
    decode_cursor,
    encode_cursor,
)
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.repositories import (
    INVALID_COMMAND,
    NOT_FOUND,
    STALE,
    IdList,
    ScheduleCommand,
    ScheduleListing,
)

_CURSOR = "schedules"
_MUTABLE = (
    "state",
    "pause_reason",
    "current_revision",
    "next_fire_at",
    "consecutive_failures",
    "updated_at",
)
TERMINAL = ("COMPLETED", "CANCELLED")
_TRUSTED_CAS: dict[tuple[str, ...], Prepared] = {}


def trusted_cas_statement(changed: tuple[str, ...]) -> Update:
    """The trusted-scope CAS UPDATE that writes ``changed``: the same predicate as
    ``mutate``'s, every value bound (``w_*`` expected, ``v_*`` new), the id returned."""
    c = schedules.c
    matches = [c[n].is_not_distinct_from(bindparam(f"w_{n}", type_=c[n].type)) for n in _MUTABLE]
    return (
        update(schedules)
        .where(c.id == bindparam("w_id", type_=c.id.type), *matches)
        .values({n: bindparam(f"v_{n}", type_=c[n].type) for n in changed})
        .returning(c.id)
    )


def _trusted_cas(changed: tuple[str, ...]) -> Prepared:
    """``trusted_cas_statement`` prepared, built once per column set (ADR 1740)."""
    prepared = _TRUSTED_CAS.get(changed)
    if prepared is None:
        prepared = _TRUSTED_CAS.setdefault(changed, Prepared(trusted_cas_statement(changed)))
    return prepared


def trusted_cas_params(command: ScheduleCommand) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The columns ``command`` changes and the bound values of its trusted CAS UPDATE.
    Only changed columns are written, so a role with column-level UPDATE (the scheduler)
    can advance its fields; the CAS predicate still covers them all."""
    expected = schedule_row(command.expected)
    updated = schedule_row(command.updated)
    changed = [name for name in _MUTABLE if expected[name] != updated[name]] or ["updated_at"]
    params: dict[str, Any] = {"w_id": command.updated.id}
    params.update({f"w_{name}": expected[name] for name in _MUTABLE})
    params.update({f"v_{name}": updated[name] for name in changed})
    return tuple(changed), params


def schedule_row(schedule: Schedule) -> dict[str, Any]:
    return {
        "id": schedule.id,
        "tenant_id": schedule.tenant_id,
        "principal_id": schedule.principal_id,
        "state": schedule.state.value,
        "pause_reason": None if schedule.pause_reason is None else schedule.pause_reason.value,
        "current_revision": schedule.current_revision,
        "next_fire_at": schedule.next_fire_at,
        "consecutive_failures": schedule.consecutive_failures,
        "created_at": schedule.created_at,
        "updated_at": schedule.updated_at,
    }


def to_schedule(row: Any) -> Schedule:
    return Schedule(**{c.name: getattr(row, c.name) for c in schedules.columns})


def schedule_by_name(row: Any) -> Schedule:
    """A row's ``Schedule``, read by name (an asyncpg record or a SQLAlchemy row's
    mapping). Validated: skipping it (``model_construct``) saved under 1 us of 5.3 per
    row; what cost a quarter of a list's CPU was reading each column as a SQLAlchemy
    row attribute (ADR 2300)."""
    return Schedule(**{name: row[name] for name in _SCHEDULE_COLUMNS})


_SCHEDULE_COLUMNS = tuple(c.name for c in schedules.columns)


def revision_row(revision: ScheduleRevision) -> dict[str, Any]:
    return {
        "schedule_id": revision.schedule_id,
        "revision": revision.revision,
        "definition": revision.to_definition(),
        "created_by_principal_id": revision.created_by_principal_id,
        "created_at": revision.created_at,
    }


def to_revision(row: Any) -> ScheduleRevision:
    return ScheduleRevision.from_definition(
        row.schedule_id, row.revision, row.created_by_principal_id, row.created_at, row.definition
    )


def owned_by(principal: Principal | None) -> Any:
    """The repository predicate that mirrors the row-level policy."""
    if principal is None:
        return true()
    return and_(
        schedules.c.tenant_id == principal.tenant_id,
        schedules.c.principal_id == principal.principal_id,
    )


def advisory_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``name``."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _paged(
    query: Select[Any],
    principal: Principal,
    page: PageRequest,
    states: frozenset[ScheduleState] | None,
) -> Select[Any]:
    """``query`` limited to the principal's schedules in ``states``, after the cursor, in
    list order, one row beyond the page (whether a next page exists)."""
    query = query.where(owned_by(principal))
    if states is not None:
        query = query.where(schedules.c.state.in_(sorted(s.value for s in states)))
    if page.cursor is not None:
        updated_at, last_id = decode_cursor(_CURSOR, page.cursor, 2)
        try:
            key = (cursor_instant(updated_at), UUID(last_id))
        except ValueError:
            raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
        query = query.where(tuple_(schedules.c.updated_at, schedules.c.id) < key)
    query = query.order_by(schedules.c.updated_at.desc(), schedules.c.id.desc())
    return query.limit(page.limit + 1)


def _next_cursor(
    items: Sequence[Schedule] | Sequence[ScheduleListing], fetched: int, page: PageRequest
) -> str | None:
    if fetched <= page.limit:
        return None
    last = items[-1]
    return encode_cursor(_CURSOR, [last.updated_at.isoformat(), str(last.id)])


def _owner_binds() -> Any:
    return and_(
        schedules.c.tenant_id == bindparam("tenant_id", type_=schedules.c.tenant_id.type),
        schedules.c.principal_id == bindparam("principal_id", type_=schedules.c.principal_id.type),
    )


_ID = bindparam("schedule_id", type_=schedules.c.id.type)
_OWNED = Prepared(select(schedules).where(schedules.c.id == _ID, _owner_binds()))
"""A principal's schedule by id: ``owned_by`` with the principal bound (ADR 2300)."""
_OWNED_REVISION = Prepared(
    select(schedule_revisions)
    .join(schedules, schedules.c.id == schedule_revisions.c.schedule_id)
    .where(
        schedule_revisions.c.schedule_id == _ID,
        schedule_revisions.c.revision
        == bindparam("revision", type_=schedule_revisions.c.revision.type),
        _owner_binds(),
    )
)

_CURRENT = Prepared(
    select(
        schedules,
        schedule_revisions.c.definition.label("revision_definition"),
        schedule_revisions.c.created_by_principal_id.label("revision_created_by"),
        schedule_revisions.c.created_at.label("revision_created_at"),
    )
    .select_from(
        schedules.outerjoin(
            schedule_revisions,
            and_(
                schedule_revisions.c.schedule_id == schedules.c.id,
                schedule_revisions.c.revision == schedules.c.current_revision,
            ),
        )
    )
    .where(schedules.c.id == _ID, _owner_binds())
)
"""A principal's schedule with its current revision: ``_OWNED`` and ``_OWNED_REVISION``
in one statement and one round trip (the point read, ADR 2420). Outer: a missing
revision is told apart from a missing schedule only by its message."""


def _summary_query() -> Select[Any]:
    """A list page's rows joined to their current revisions, the three summary fields
    taken out of the stored definition by PostgreSQL (no revision is decoded whole or
    validated; ADR 2240)."""
    definition = schedule_revisions.c.definition
    joined = schedules.outerjoin(
        schedule_revisions,
        and_(
            schedule_revisions.c.schedule_id == schedules.c.id,
            schedule_revisions.c.revision == schedules.c.current_revision,
        ),
    )
    return select(
        # ``ScheduleListing``'s fields in its order, so a row is read by position
        # (``_listing``); no column the listing does not hold (ADR 2650).
        schedules.c.id,
        schedules.c.tenant_id,
        schedules.c.principal_id,
        schedules.c.state,
        schedules.c.pause_reason,
        schedules.c.current_revision,
        schedules.c.next_fire_at,
        schedules.c.created_at,
        schedules.c.updated_at,
        definition["title"].astext.label("summary_title"),
        # As JSON text, decoded through a memo (a page repeats few cadences; ADR 2620).
        definition["cadence"].astext.label("summary_cadence"),
        definition["instruction"].astext.label("summary_instruction"),
    ).select_from(joined)


_FIRST_PAGE = Prepared(
    _summary_query()
    .where(_owner_binds())
    .order_by(schedules.c.updated_at.desc(), schedules.c.id.desc())
    .limit(bindparam("limit", type_=Integer))
)
"""``_paged`` of the summary query without a cursor or a state filter (the first page,
most lists' only one) with the principal and the limit bound: prepared (ADR 2300)."""


def _listing(row: Any) -> ScheduleListing:
    """A list row of ``_summary_query`` (an asyncpg record or a SQLAlchemy row, both
    indexed by position) as plain values: the row is our own SELECT's, its column
    types already hold, so no ``Schedule`` is built or validated per row (that was 16
    of ~25 us a row; ADR 2420). By position, because the SELECT lists the listing's
    fields in order: a lookup by name per field cost about half of this function
    (ADR 2650). A missing current revision fails as the point read does."""
    if row[9] is None:
        raise NotFoundError(NOT_FOUND, "revision not found", {"schedule_id": str(row[0])})
    # ``tuple.__new__``: the tuple built directly (what ``_make`` does), not through
    # the named tuple's generated ``__new__``, a Python call per row.
    return tuple.__new__(
        ScheduleListing,
        (
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
            cadence_of(row[10]),
            row[11],
        ),
    )


def _owned_params(schedule_id: UUID, principal: Principal) -> dict[str, Any]:
    return {
        "schedule_id": schedule_id,
        "tenant_id": principal.tenant_id,
        "principal_id": principal.principal_id,
    }


def _revision_of(record: Any) -> ScheduleRevision:
    """``to_revision`` of an asyncpg record (read by name, not by attribute)."""
    return ScheduleRevision.from_definition(
        record["schedule_id"],
        record["revision"],
        record["created_by_principal_id"],
        record["created_at"],
        record["definition"],
    )


def _insert(table: Table) -> Prepared:
    """``table``'s INSERT of every column, prepared (ADR 1740): each create writes a
    schedule and its first revision. Two statements, not one: the revision's row-level
    policy looks its schedule up, which a data-modifying CTE of the same statement would
    not show it (ADR 2310)."""
    return Prepared(
        insert(table).values({c.name: bindparam(c.name, type_=c.type) for c in table.columns})
    )


_INSERT_SCHEDULE = _insert(schedules)
_INSERT_REVISION = _insert(schedule_revisions)


class PostgresScheduleRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def create(self, schedule: Schedule, revision: ScheduleRevision) -> Schedule:
        if revision.schedule_id != schedule.id or revision.revision != schedule.current_revision:
            raise ValidationError(INVALID_COMMAND, "the revision does not belong to the schedule")
        await self._tx.fetch(_INSERT_SCHEDULE, schedule_row(schedule))
        await self._tx.fetch(_INSERT_REVISION, revision_row(revision))
        return schedule

    async def get(
        self, schedule_id: UUID, principal: Principal | None, *, for_update: bool = False
    ) -> Schedule:
        if principal is not None and not for_update:
            # Every point read and occurrence page asks this: prepared (ADR 2300).
            rows = await self._tx.fetch(_OWNED, _owned_params(schedule_id, principal))
            if not rows:
                raise NotFoundError(
                    NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)}
                )
            return schedule_by_name(rows[0])
        query = select(schedules).where(schedules.c.id == schedule_id, owned_by(principal))
        if for_update:
            query = query.with_for_update()
        row = (await self._tx.execute(query)).first()
        if row is None:
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        return to_schedule(row)

    async def lock_due(self, schedule_id: UUID, now: datetime) -> Schedule | None:
        query = (
            select(schedules)
            .where(
                schedules.c.id == schedule_id,
                schedules.c.state == ScheduleState.ACTIVE.value,
                schedules.c.next_fire_at <= now,
            )
            .with_for_update(skip_locked=True)
        )
        row = (await self._tx.execute(query)).first()
        return None if row is None else to_schedule(row)

    async def get_revision(
        self, schedule_id: UUID, revision: int, principal: Principal | None
    ) -> ScheduleRevision:
        if principal is not None:  # the point read's second statement: prepared
            params = {**_owned_params(schedule_id, principal), "revision": revision}
            found = await self._tx.fetch(_OWNED_REVISION, params)
            if not found:
                raise NotFoundError(
                    NOT_FOUND, "revision not found", {"schedule_id": str(schedule_id)}
                )
            return _revision_of(found[0])
        query = (
            select(schedule_revisions)
            .join(schedules, schedules.c.id == schedule_revisions.c.schedule_id)
            .where(
                schedule_revisions.c.schedule_id == schedule_id,
                schedule_revisions.c.revision == revision,
                owned_by(principal),
            )
        )
        row = (await self._tx.execute(query)).first()
        if row is None:
            raise NotFoundError(NOT_FOUND, "revision not found", {"schedule_id": str(schedule_id)})
        return to_revision(row)

    async def get_current(
        self, schedule_id: UUID, principal: Principal
    ) -> tuple[Schedule, ScheduleRevision]:
        rows = await self._tx.fetch(_CURRENT, _owned_params(schedule_id, principal))
        if not rows:
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        row = rows[0]
        if row["revision_definition"] is None:
            raise NotFoundError(NOT_FOUND, "revision not found", {"schedule_id": str(schedule_id)})
        # Memoized (ADR 2620): a point read of the same revision again skips the
        # rebuild; a definition that differs in any value or JSON type misses.
        revision = revision_of(
            row["id"],
            row["current_revision"],
            row["revision_created_by"],
            row["revision_created_at"],
            row["revision_definition"],
        )
        return schedule_by_name(row), revision

    async def get_revisions(
        self, keys: Sequence[tuple[UUID, int]], principal: Principal | None
    ) -> dict[tuple[UUID, int], ScheduleRevision]:
        if not keys:
            return {}
        query = (
            select(schedule_revisions)
            .join(schedules, schedules.c.id == schedule_revisions.c.schedule_id)
            .where(
                tuple_(schedule_revisions.c.schedule_id, schedule_revisions.c.revision).in_(
                    sorted(set(keys))
                ),
                owned_by(principal),
            )
        )
        found = [to_revision(row) for row in await self._tx.execute(query)]
        return {(r.schedule_id, r.revision): r for r in found}

    async def list(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[Schedule]:
        query = _paged(select(schedules), principal, page, states)
        rows = (await self._tx.execute(query)).all()
        items = [to_schedule(r) for r in rows[: page.limit]]
        return Page(items=items, next_cursor=_next_cursor(items, len(rows), page))

    async def list_summaries(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[ScheduleListing]:
        # One statement (ADR 2240); the first page unfiltered is prepared (ADR 2300).
        rows: Sequence[Any]
        if page.cursor is None and states is None:
            params = {
                "tenant_id": principal.tenant_id,
                "principal_id": principal.principal_id,
                "limit": page.limit + 1,
            }
            rows = await self._tx.fetch(_FIRST_PAGE, params)
        else:
            query = _paged(_summary_query(), principal, page, states)
            rows = (await self._tx.execute(query)).all()
        items = [_listing(row) for row in rows[: page.limit]]
        return Page(items=items, next_cursor=_next_cursor(items, len(rows), page))

    async def mutate(self, command: ScheduleCommand) -> Schedule:
        if command.principal is None:  # the scheduler's hot path: one prepared statement
            changed, params = trusted_cas_params(command)
            rowcount = len(await self._tx.fetch(_trusted_cas(changed), params))
        else:
            expected = schedule_row(command.expected)
            updated = schedule_row(command.updated)
            changed_names = [n for n in _MUTABLE if expected[n] != updated[n]] or ["updated_at"]
            matches = [schedules.c[name].is_not_distinct_from(expected[name]) for name in _MUTABLE]
            statement = (
                update(schedules)
                .where(schedules.c.id == command.updated.id, owned_by(command.principal), *matches)
                .values({name: updated[name] for name in changed_names})
            )
            rowcount = (await self._tx.execute(statement)).rowcount
        if rowcount != 1:
            await self.raise_stale(command)
        if command.revision is not None:
            await self._tx.execute(
                insert(schedule_revisions).values(revision_row(command.revision))
            )
        return command.updated

    async def raise_stale(self, command: ScheduleCommand) -> NoReturn:
        """The CAS of ``command`` matched no row: the schedule changed since it was read."""
        current = await self.get(command.updated.id, command.principal)
        raise ConflictError(
            STALE,
            "the schedule changed since it was read",
            {"schedule_id": str(current.id), "current_revision": current.current_revision},
        )

    async def due(self, now: datetime, limit: int) -> IdList:
        query = (
            select(schedules.c.id)
            .where(schedules.c.state == ScheduleState.ACTIVE.value, schedules.c.next_fire_at <= now)
            .order_by(schedules.c.next_fire_at, schedules.c.id)
            .limit(limit)
        )
        return [row.id for row in (await self._tx.execute(query)).all()]

    async def next_fire_at(self) -> datetime | None:
        query = select(func.min(schedules.c.next_fire_at)).where(
            schedules.c.state == ScheduleState.ACTIVE.value
        )
        value: datetime | None = (await self._tx.execute(query)).scalar_one()
        return value

    async def purge_terminal(self, tenant_id: str, before: datetime, limit: int) -> int:
        await self._tx.execute(
            select(func.pg_advisory_xact_lock(advisory_key(f"scheduling.purge:{tenant_id}")))
        )
        victims = (
            select(schedules.c.id)
            .where(
                schedules.c.tenant_id == tenant_id,
                schedules.c.state.in_(TERMINAL),
                schedules.c.updated_at <= before,
            )
            .order_by(schedules.c.updated_at, schedules.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        ids = [row.id for row in (await self._tx.execute(victims)).all()]
        if not ids:
            return 0
        for table, column in (
            (schedule_idempotency_keys, schedule_idempotency_keys.c.schedule_id),
            (schedule_occurrences, schedule_occurrences.c.schedule_id),
            (schedule_revisions, schedule_revisions.c.schedule_id),
            (schedules, schedules.c.id),
        ):
            await self._tx.execute(delete(table).where(column.in_(ids)))
        return len(ids)
