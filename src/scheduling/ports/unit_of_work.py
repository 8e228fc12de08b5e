"""The unit of work: one transaction that every repository joins.

Usage::

    async with uow_factory.begin(principal) as uow:
        schedule = await uow.schedules.create(schedule, revision)
        await uow.idempotency.record(entry)
        await uow.commit()

Leaving the block without ``commit()`` (or by an exception) rolls everything back.
A unit of work is single-use: after commit or rollback its repositories refuse work
with ``UnavailableError(schedule.persistence.uow_closed)``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

from scheduling.domain.identity import Principal
from scheduling.ports.firing import MaterializationRepository
from scheduling.ports.notifier import ScheduleWakeups
from scheduling.ports.outbox import OutboxRepository
from scheduling.ports.repositories import (
    AdmissionRepository,
    AgentRepository,
    PendingAccountsRepository,
    PrincipalRepository,
    ProcessEventRepository,
    RunRepository,
    ScheduleIdempotencyLedger,
    ScheduleOccurrenceRepository,
    ScheduleRepository,
    SessionRepository,
)


class UnitOfWork(Protocol):
    """One transaction. The scope it was begun with bounds what every repository sees:
    a principal scope sees only that principal's rows; a tenant scope (maintenance)
    only that tenant's; the trusted scope (scheduler) every tenant's."""

    @property
    def schedules(self) -> ScheduleRepository: ...

    @property
    def occurrences(self) -> ScheduleOccurrenceRepository: ...

    @property
    def idempotency(self) -> ScheduleIdempotencyLedger: ...

    @property
    def principals(self) -> PrincipalRepository: ...

    @property
    def agents(self) -> AgentRepository: ...

    @property
    def sessions(self) -> SessionRepository: ...

    @property
    def runs(self) -> RunRepository: ...

    @property
    def events(self) -> ProcessEventRepository: ...

    @property
    def outbox(self) -> OutboxRepository: ...

    @property
    def admission(self) -> AdmissionRepository: ...

    @property
    def pending_accounts(self) -> PendingAccountsRepository: ...

    @property
    def materialization(self) -> MaterializationRepository: ...

    @property
    def wakeups(self) -> ScheduleWakeups:
        """Scheduler wake-ups delivered iff this unit of work commits (ADR 2310)."""
        ...

    async def commit(self) -> None:
        """Make every write durable at once. Deferred constraints are checked here; a
        violation raises the translated domain error and nothing is written."""
        ...

    async def rollback(self) -> None:
        """Discard every write (idempotent)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Roll back unless ``commit()`` succeeded."""
        ...


class UnitOfWorkFactory(Protocol):
    """Begins units of work in one of three scopes."""

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> UnitOfWork:
        """A new unit of work: principal-scoped when ``principal`` is given, tenant-scoped
        when only ``tenant_id`` is, otherwise the trusted scope."""
        ...

    async def dispose(self) -> None:
        """Release what the factory holds (a connection pool); idempotent. Units of
        work begun afterwards are not supported."""
        ...
