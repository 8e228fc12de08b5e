"""PostgreSQL ``PendingAccounts``: terminal scheduled runs not yet accounted.

``claimed(limit)`` is how schedulers share the work (ADR 2221): in a transaction of its
own, held open while the caller accounts the batch, it takes a transaction-scoped
advisory lock per run with ``pg_try_advisory_xact_lock`` and returns only the runs it
locked, so a second scheduler's claim skips them and takes the next ones (the
``SKIP LOCKED`` discipline; row locks are not available: the scheduler may not UPDATE
``runs`` or ``schedule_occurrences``, and a grant for it would widen its authority).
The candidates are read first, oldest finish first, in a materialized CTE, so only the
rows returned are locked. The locks end with the claim's transaction (rolled back:
it writes nothing), or with its connection if the scheduler dies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID

from sqlalchemy import Select, Text, and_, cast, exists, func, literal, select

from scheduling.adapters.postgres.tables import process_events, runs, schedule_occurrences
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.unit_of_work import UnitOfWorkFactory

_TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
CLAIM_NAMESPACE = "scheduling.accounting:"
"""Prefix of the advisory-lock key of a run's accounting claim (hashed with its id)."""
CLAIM_SCAN_FACTOR = 4
"""A claim reads this many times its limit of candidates, so schedulers holding the
oldest ones leave it enough to lock."""


def _pending_query(limit: int) -> Select[tuple[UUID]]:
    occ = schedule_occurrences.c
    accounted = exists().where(
        and_(
            process_events.c.schedule_id == occ.schedule_id,
            process_events.c.event_type == RUN_ACCOUNTED,
            process_events.c.payload["occurrence_id"].astext == cast(occ.id, Text),
        )
    )
    return (
        select(runs.c.id)
        .join(schedule_occurrences, occ.run_id == runs.c.id)
        .where(runs.c.status.in_(_TERMINAL), ~accounted)
        .order_by(runs.c.finished_at, runs.c.id)
        .limit(limit)
    )


class PostgresPendingAccountsRepository:
    """See ``scheduling.ports.repositories.PendingAccountsRepository``: MATERIALIZED
    occurrences whose run is terminal and which have no ``schedule.run_accounted``
    event yet, in one statement of the unit of work's transaction."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def pending(self, limit: int) -> list[UUID]:
        rows = (await self._tx.execute(_pending_query(limit))).all()
        return [row.id for row in rows]

    async def claim(self, limit: int) -> list[UUID]:
        """Up to ``limit`` pending runs, oldest finish first, each locked for this
        transaction by an advisory lock no other claim held (one statement)."""
        candidates = (
            _pending_query(limit * CLAIM_SCAN_FACTOR)
            .add_columns(runs.c.finished_at)
            .cte("candidates")
            .prefix_with("MATERIALIZED")
        )
        key = func.hashtextextended(literal(CLAIM_NAMESPACE) + cast(candidates.c.id, Text), 0)
        query = select(candidates.c.id).where(func.pg_try_advisory_xact_lock(key)).limit(limit)
        rows = (await self._tx.execute(query)).all()
        return [row.id for row in rows]


class PostgresPendingAccounts:
    """Reads, in its own trusted transaction, the unit of work's pending accounts."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def pending(self, limit: int) -> list[UUID]:
        async with self._uow.begin() as uow:
            return await uow.pending_accounts.pending(limit)

    @asynccontextmanager
    async def claimed(self, limit: int) -> AsyncIterator[list[UUID]]:
        """A batch no concurrent claim holds, held until the block ends."""
        async with self._uow.begin() as uow:
            yield await uow.pending_accounts.claim(limit)
