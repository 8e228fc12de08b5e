"""The public surface the harness, tests and bench build with (issue 24 item 2, ADR 2171).

Gates, simulation, reports and bench reach the product through ``scheduling.bootstrap``,
``scheduling.storage`` and this module, never ``scheduling.adapters`` (an import-linter
contract). What the harness needs of a storage that production does not - opening one
over the simulator's watched engine, the group-role names, the trusted factory's type
for direct SQL - is named here, so a change behind it is one edit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import IO

from sqlalchemy.ext.asyncio import AsyncEngine

from scheduling import logs
from scheduling.adapters.memory.directories import (
    ConfiguredBrowserProfiles,
    ConfiguredTenantConfiguration,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)
from scheduling.adapters.memory.tool_ledger import ConfiguredWebsiteBindings
from scheduling.adapters.memory.uow import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres import tables
from scheduling.adapters.postgres.admission import PostgresAdmissionController, tenant_usage
from scheduling.adapters.postgres.errors import sqlstate_of
from scheduling.adapters.postgres.inspection import (
    REQUIRED_INDEXES,
    TENANT_TABLES,
    schema_diff,
    schema_problems,
    substrate_metadata,
)
from scheduling.adapters.postgres.materialization import (
    PostgresMaterializationRepository,
    PostgresMaterializationStore,
)
from scheduling.adapters.postgres.migrations import (
    SUBSTRATE_REVISION,
    current_revision,
    downgrade_to,
    head_revision,
    upgrade_to,
    upgrade_to_head,
)
from scheduling.adapters.postgres.repositories.occurrences import PostgresOccurrenceRepository
from scheduling.adapters.postgres.repositories.outbox import PostgresOutboxRepository
from scheduling.adapters.postgres.repositories.schedules import PostgresScheduleRepository
from scheduling.adapters.postgres.roles import RoleNames, role_names
from scheduling.adapters.postgres.tables import (
    SCHEDULING_TABLES,
    SUBSTRATE_TABLES,
    TOOL_PIPELINE_TABLES,
    metadata,
)
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.adapters.system_clock import SystemClock
from scheduling.adapters.system_ids import RandomIds
from scheduling.adapters.token_file import TokenFile, digest_of, issue_token, read_entries
from scheduling.bootstrap import ApiRole, SchedulerRole
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.instance import declare
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.directories import (
    AgentRegistry,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.keys import KeyRing
from scheduling.ports.materialization import Decision, MaterializationStore, QueuedRun
from scheduling.ports.probe import Probe
from scheduling.ports.readiness import Readiness
from scheduling.ports.tool_ledger import ToolLedger
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.accounting import PendingAccounts
from scheduling.service.schedule_worker import ScheduleWorker
from scheduling.service.schedules import ScheduleService
from scheduling.storage import MemoryStorage, PostgresStorage, Role, Storage

__all__ = [
    "REQUIRED_INDEXES",
    "SCHEDULING_TABLES",
    "SUBSTRATE_REVISION",
    "SUBSTRATE_TABLES",
    "TENANT_TABLES",
    "TOOL_PIPELINE_TABLES",
    "ConfiguredBrowserProfiles",
    "ConfiguredTenantConfiguration",
    "ConfiguredWebsiteBindings",
    "MemoryStorage",
    "MemoryUnitOfWorkFactory",
    "PostgresAdmissionController",
    "PostgresMaterializationStore",
    "PostgresStorage",
    "PostgresUnitOfWork",
    "PostgresUnitOfWorkFactory",
    "RandomIds",
    "Role",
    "RoleNames",
    "RoleOverride",
    "SplitCommitRepository",
    "StaticAgentRegistry",
    "StaticPrincipalDirectory",
    "Storage",
    "SystemClock",
    "TokenFile",
    "configure_process_logs",
    "current_revision",
    "digest_of",
    "downgrade_to",
    "head_revision",
    "issue_token",
    "metadata",
    "open_storage",
    "read_entries",
    "role_names",
    "schema_diff",
    "schema_problems",
    "sqlstate_of",
    "storage_over",
    "substrate_metadata",
    "swap_service",
    "swap_worker",
    "tables",
    "tenant_usage",
    "to_asyncpg_url",
    "upgrade_to",
    "upgrade_to_head",
]


def configure_process_logs(
    role: str, instance_id: str, stream: IO[str], *, level: str = "WARNING"
) -> None:
    """A harness process (a soak worker) logs as a role does (ADRs 2270, 2271): its
    declared identity on every line, UTC, repeated failures once and then counted; the
    text form, which the harness parses."""
    declare(role, instance_id)
    logs.configure(stream, kind="text", level=level)


def open_storage(
    url: str, *, pool_size: int = 10, role_prefix: str | None = None
) -> PostgresStorage:
    """A storage on the trusted login at ``url``; every group role ``SET LOCAL ROLE``
    over it (one pool, as the gates run it). ``close`` releases the pool."""
    return PostgresStorage(url, role_prefix, pool_size=pool_size)


def storage_over(
    source: AsyncEngine | PostgresUnitOfWorkFactory,
    *,
    url: str | None = None,
    role_prefix: str | None = None,
    split_commit: bool = False,
) -> PostgresStorage:
    """A storage whose roles ``SET LOCAL ROLE`` over ``source``'s engine (e.g. the
    simulator's watched engine, or the trusted factory's), which stays the caller's.
    ``url`` (optional) is where LISTEN/NOTIFY connect.

    Named fault injection (a test of a test): ``split_commit`` gives the scheduler a
    units of work whose materialization repository is ``SplitCommitRepository``."""
    engine = source.engine if isinstance(source, PostgresUnitOfWorkFactory) else source
    if split_commit:
        return _SplitCommitStorage(url, role_prefix, engine=engine)
    return PostgresStorage.over_engine(engine, role_prefix, url=url)


class SplitCommitRepository(PostgresMaterializationRepository):
    """Wrong on purpose: writes a decision one statement at a time (as before ADR 2330)
    and commits the transaction right after the run's insert (the occurrence, session
    and run then survive a crash at any later point), the plausible mistake the durable
    lane must catch."""

    def __init__(
        self, tx: Transaction, schedules: PostgresScheduleRepository, role: str | None
    ) -> None:
        super().__init__(tx, schedules)
        self._split_tx = tx
        self._role = role

    async def decide(self, decision: Decision) -> ScheduleOccurrence:
        stored = await PostgresOccurrenceRepository(self._split_tx).insert(decision.occurrence)
        if stored.id != decision.occurrence.id:
            return stored
        if decision.run is not None:
            await self.create_run(decision.run)
        await self.advance(decision.advance, decision.events)
        if decision.outbox is not None:
            await PostgresOutboxRepository(self._split_tx).append(decision.outbox)
        return stored

    async def create_run(self, queued: QueuedRun) -> None:
        await super().create_run(queued)
        # The unit of work owns its server transaction (ADR 2160): end it and begin
        # another on the same connection, as the scheduler role again.
        await self._split_tx.commit()
        await self._split_tx.open({"role": self._role} if self._role is not None else {})


class _SplitCommitFactory(PostgresUnitOfWorkFactory):
    """The scheduler's factory whose units of work carry ``SplitCommitRepository``."""

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        uow = super().begin(principal, tenant_id=tenant_id)
        uow.materialization = SplitCommitRepository(uow.tx, uow.schedules, self.assume_role)
        return uow


class _SplitCommitStorage(PostgresStorage):
    def factory(self, role: Role) -> PostgresUnitOfWorkFactory:
        if role == "scheduler" and role not in self._factories:
            engine = self._trusted_engine()
            self._factories[role] = _SplitCommitFactory(engine, assume_role=self.roles.scheduler)
        return super().factory(role)


class RoleOverride(Storage):
    """``inner`` with ``role``'s unit-of-work factory replaced by ``factory`` (a named
    fault injection for a test of the test, e.g. a factory that crashes after its n-th
    write); every other choice, and every other role, is ``inner``'s."""

    def __init__(self, inner: Storage, role: Role, factory: UnitOfWorkFactory) -> None:
        self._inner, self._role, self._factory = inner, role, factory
        self.durable = inner.durable

    def as_role(self, role: Role) -> UnitOfWorkFactory:
        return self._factory if role == self._role else self._inner.as_role(role)

    def own_login(self, role: Role) -> bool:
        return self._inner.own_login(role)

    def directories(
        self, role: Role, *, durable: bool
    ) -> tuple[SchedulePrincipalDirectory, AgentRegistry]:
        return self._inner.directories(role, durable=durable)

    def key_ring(self, role: Role = "api") -> KeyRing:
        return self._inner.key_ring(role)

    def tool_ledger(self, role: Role = "api") -> ToolLedger:
        return self._inner.tool_ledger(role)

    def readiness(self, head: str, role: Role = "api") -> Readiness:
        return self._inner.readiness(head, role)

    def admission(
        self,
        tenants: TenantConfiguration,
        *,
        backoff_seconds: float,
        probe: Probe | None = None,
        allow_all: bool = False,
    ) -> ScheduleAdmissionController:
        return self._inner.admission(
            tenants, backoff_seconds=backoff_seconds, probe=probe, allow_all=allow_all
        )

    def materialization_store(self) -> MaterializationStore | None:
        return self._inner.materialization_store()

    def pending_accounts(self, role: Role = "scheduler") -> PendingAccounts | None:
        return self._inner.pending_accounts(role)

    async def close(self) -> None:
        """The inner storage is the caller's: nothing to release here."""


# ------------------------------------------------------------ another class, same wiring


def swap_service(role: ApiRole, service_type: type[ScheduleService]) -> ApiRole:
    """``role`` (from ``bootstrap.build_api``) with its service rebuilt as
    ``service_type`` from the same construction arguments (a deliberately broken
    subclass of ``ScheduleService`` in a test of the test)."""
    return replace(role, service=service_type(**role.service_args))


def swap_worker(role: SchedulerRole, worker_type: type[ScheduleWorker]) -> SchedulerRole:
    """``role`` (from ``bootstrap.build_scheduler``) with its worker rebuilt as
    ``worker_type`` from the same construction arguments (e.g. the harness's strict
    worker). Call it before the role starts: the replaced worker never ran."""
    return replace(role, worker=worker_type(**role.worker_args))
