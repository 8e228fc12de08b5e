"""In-memory unit of work: edits a private copy, publishes it on commit.

Commit checks what PostgreSQL checks at commit (the deferred occurrence links and
each schedule's current revision) and refuses to publish over a store another unit
of work changed meanwhile (``ConflictError(schedule.persistence.retry)``), so
lost updates cannot hide in application tests.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import Self
from uuid import UUID

from scheduling.adapters.memory.admission import (
    MemoryAdmissionRepository,
    MemoryPendingAccountsRepository,
)
from scheduling.adapters.memory.materialization import MemoryMaterializationRepository
from scheduling.adapters.memory.outbox import MemoryOutboxRepository
from scheduling.adapters.memory.repositories import (
    MemoryAgentRepository,
    MemoryIdempotencyLedger,
    MemoryOccurrenceRepository,
    MemoryPrincipalRepository,
    MemoryProcessEventRepository,
    MemoryRunRepository,
    MemoryScheduleRepository,
    MemorySessionRepository,
)
from scheduling.adapters.memory.store import Scope, Tables
from scheduling.domain.errors import ConflictError, UnavailableError
from scheduling.domain.identity import Principal
from scheduling.ports.repositories import CLOSED, MISSING_REFERENCE, RETRY
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory

WAKEUPS_KEPT = 1024


class MemoryStore:
    """Committed state shared by every unit of work of one factory."""

    def __init__(self) -> None:
        self.tables = Tables()
        self.version = 0
        self.wakeups: deque[UUID] = deque(maxlen=WAKEUPS_KEPT)
        """Scheduler wake-ups delivered by committed units of work, in commit order (the
        latest ``WAKEUPS_KEPT``: a long-lived memory stack must not grow without bound)."""


class MemoryWakeups:
    """``ScheduleWakeups`` of one memory unit of work: held until it commits."""

    def __init__(self) -> None:
        self.pending: list[UUID] = []

    async def schedule_changed(self, schedule_id: UUID) -> None:
        self.pending.append(schedule_id)


class MemoryUnitOfWork:
    """See ``scheduling.ports.unit_of_work.UnitOfWork``."""

    def __init__(self, store: MemoryStore, scope: Scope) -> None:
        self._store = store
        self.scope = scope
        self._working: Tables | None = None
        self._base_version = -1
        self._used = False
        self.schedules = MemoryScheduleRepository(self)
        self.occurrences = MemoryOccurrenceRepository(self)
        self.idempotency = MemoryIdempotencyLedger(self)
        self.principals = MemoryPrincipalRepository(self)
        self.agents = MemoryAgentRepository(self)
        self.sessions = MemorySessionRepository(self)
        self.runs = MemoryRunRepository(self)
        self.events = MemoryProcessEventRepository(self)
        self.outbox = MemoryOutboxRepository(self)
        self.admission = MemoryAdmissionRepository(self)
        self.pending_accounts = MemoryPendingAccountsRepository(self)
        self.materialization = MemoryMaterializationRepository(self)
        self.wakeups = MemoryWakeups()

    def tables(self) -> Tables:
        if self._working is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        return self._working

    async def __aenter__(self) -> Self:
        if self._used:
            raise UnavailableError(CLOSED, "a unit of work is single-use")
        self._used = True
        self._working = self._store.tables.copy()
        self._base_version = self._store.version
        return self

    async def commit(self) -> None:
        working = self.tables()
        self._working = None
        _check_deferred(working)
        if self._store.version != self._base_version:
            raise ConflictError(RETRY, "another unit of work committed first; retry")
        self._store.tables = working
        self._store.version += 1
        self._store.wakeups.extend(dict.fromkeys(self.wakeups.pending))
        self.wakeups.pending.clear()

    async def rollback(self) -> None:
        self._working = None
        self.wakeups.pending.clear()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._working = None
        self.wakeups.pending.clear()


def _check_deferred(t: Tables) -> None:
    for o in t.occurrences.values():
        if (o.session_id is not None and o.session_id not in t.sessions) or (
            o.run_id is not None and o.run_id not in t.runs
        ):
            raise ConflictError(MISSING_REFERENCE, "an occurrence links a missing session or run")
    for s in t.schedules.values():
        if (s.id, s.current_revision) not in t.revisions:
            raise ConflictError(MISSING_REFERENCE, "a schedule's current revision is missing")


class MemoryUnitOfWorkFactory:
    """Begins in-memory units of work over one shared store."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> MemoryUnitOfWork:
        if principal is not None:
            return MemoryUnitOfWork(self.store, Scope(principal.tenant_id, principal.principal_id))
        return MemoryUnitOfWork(self.store, Scope(tenant_id, None))

    async def dispose(self) -> None:
        """Nothing to release: the store lives as long as the factory."""
        return None


def _conforms(factory: MemoryUnitOfWorkFactory, uow: MemoryUnitOfWork) -> tuple[object, object]:
    """Static proof (mypy) that the adapter implements the ports."""
    checked_factory: UnitOfWorkFactory = factory
    checked_uow: UnitOfWork = uow
    return checked_factory, checked_uow
