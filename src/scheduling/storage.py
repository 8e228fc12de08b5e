"""Storage: what is chosen once per database (issue 24 item 1, ADR 2170).

A ``Storage`` is chosen once - ``PostgresStorage(url, role_prefix)`` or
``MemoryStorage()`` - and owns everything that differs between the two: the per-role
unit-of-work factories (``storage.as_role("scheduler")``), readiness, telemetry, the
role gauges, the tool ledger, the key ring, the principal and agent directories, the
notifier and wake listener, admission, the materialization store, the pending
accounts and the run queue. The composition root asks the storage instead of testing
which factory it was handed, so no builder holds an ``isinstance`` switch.

A storage disposes only what it opened (``close``): one built over a caller's engine
(``PostgresStorage.over_engine``) leaves that engine to the caller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduling.adapters.memory.directories import StaticAgentRegistry, StaticPrincipalDirectory
from scheduling.adapters.memory.keys import MemoryKeyRing
from scheduling.adapters.memory.tool_ledger import MemoryToolLedger
from scheduling.adapters.memory.uow import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres.accounting import PostgresPendingAccounts
from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.directories import (
    DurableAgentRegistry,
    DurablePrincipalDirectory,
)
from scheduling.adapters.postgres.keys import PostgresKeyRing
from scheduling.adapters.postgres.materialization import PostgresMaterializationStore
from scheduling.adapters.postgres.notify import PostgresWakeListener
from scheduling.adapters.postgres.readiness import SchemaReadiness
from scheduling.adapters.postgres.role_gauges import PostgresRunGauges, PostgresSchedulerGauges
from scheduling.adapters.postgres.roles import DEFAULT_ROLE_PREFIX, RoleNames, role_names
from scheduling.adapters.postgres.run_queue import PostgresRunQueue
from scheduling.adapters.postgres.telemetry import PostgresTelemetry
from scheduling.adapters.postgres.tool_ledger import PostgresToolLedger
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.config import Settings
from scheduling.domain.tenancy import TenantCeilings
from scheduling.instance import application_name, current
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.clock import Clock
from scheduling.ports.directories import (
    AgentRegistry,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.keys import KeyRing
from scheduling.ports.materialization import MaterializationStore
from scheduling.ports.notifier import ScheduleNotifier
from scheduling.ports.probe import Probe
from scheduling.ports.readiness import AlwaysReady, Readiness
from scheduling.ports.runtime import QueueCapacity, RunPriority, RunQueue
from scheduling.ports.telemetry import RunGauges, SchedulerGauges, TelemetrySource
from scheduling.ports.tool_ledger import ToolLedger
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.accounting import PendingAccounts
from scheduling.service.admission import AllowAllAdmission

Role = Literal["api", "scheduler", "maintenance", "run_worker", "trusted"]
"""A database role: the four least-privilege group roles and the trusted login."""


class WakeListener(Protocol):
    """A scheduler's LISTEN connection (best effort: failure only costs latency)."""

    received: int

    async def start(self) -> None: ...

    async def wait(self) -> None: ...

    async def close(self) -> None: ...


class Storage(ABC):
    """Everything a role's wiring chooses per database."""

    durable: bool
    """PostgreSQL: what production accepts; memory is development and tests only."""

    @abstractmethod
    def as_role(self, role: Role) -> UnitOfWorkFactory:
        """The unit-of-work factory acting as ``role`` (one per role, cached)."""

    def own_login(self, role: Role) -> bool:
        """Whether ``role`` logs in as itself rather than through the trusted login."""
        return False

    @abstractmethod
    def directories(
        self, role: Role, *, durable: bool
    ) -> tuple[SchedulePrincipalDirectory, AgentRegistry]:
        """The principal directory (the durable one when ``durable``) and agents."""

    @abstractmethod
    def key_ring(self, role: Role = "api") -> KeyRing: ...

    @abstractmethod
    def tool_ledger(self, role: Role = "api") -> ToolLedger: ...

    @abstractmethod
    def readiness(self, head: str, role: Role = "api") -> Readiness:
        """Ready when the database answers and its schema is at ``head``, the migration
        head this build expects."""

    def telemetry(self, clock: Clock, ceilings: TenantCeilings | None) -> TelemetrySource | None:
        """Fleet-wide aggregates through the trusted login (none without one)."""
        return None

    def scheduler_gauges(self, clock: Clock, role: Role = "scheduler") -> SchedulerGauges | None:
        return None

    def run_gauges(
        self, clock: Clock, ceilings: TenantCeilings | None, role: Role = "trusted"
    ) -> RunGauges | None:
        return None

    def notifier(self, role: Role = "api") -> ScheduleNotifier | None:
        """An observer told after each committed create, update and resume: none. The
        wake-up itself rides the writing unit of work (``uow.wakeups``, ADR 2310)."""
        return None

    def wake_listener(self, clock: Clock, role: Role = "scheduler") -> WakeListener | None:
        return None

    @abstractmethod
    def admission(
        self,
        tenants: TenantConfiguration,
        *,
        backoff_seconds: float,
        probe: Probe | None = None,
        allow_all: bool = False,
    ) -> ScheduleAdmissionController: ...

    def materialization_store(self) -> MaterializationStore | None:
        """The PostgreSQL fast path of materialization (none: the generic path)."""
        return None

    def pending_accounts(self, role: Role = "scheduler") -> PendingAccounts | None:
        return None

    def run_queue(
        self,
        role: Role,
        capacity: QueueCapacity,
        *,
        probe: Probe | None = None,
        classes: frozenset[RunPriority] = frozenset(RunPriority),
    ) -> RunQueue | None:
        """The durable run queue (PostgreSQL only)."""
        return None

    @abstractmethod
    async def close(self) -> None:
        """Release what this storage opened (idempotent)."""


class MemoryStorage(Storage):
    """One in-memory store shared by every role (development and tests)."""

    durable = False

    def __init__(self, uow: MemoryUnitOfWorkFactory | None = None) -> None:
        self.uow = uow or MemoryUnitOfWorkFactory()
        self._ledger = MemoryToolLedger()
        self._keys = MemoryKeyRing()

    def as_role(self, role: Role) -> MemoryUnitOfWorkFactory:
        return self.uow

    def directories(
        self, role: Role, *, durable: bool
    ) -> tuple[SchedulePrincipalDirectory, AgentRegistry]:
        return StaticPrincipalDirectory(), StaticAgentRegistry()

    def key_ring(self, role: Role = "api") -> KeyRing:
        return self._keys

    def tool_ledger(self, role: Role = "api") -> ToolLedger:
        return self._ledger

    def readiness(self, head: str, role: Role = "api") -> Readiness:
        return AlwaysReady()

    def admission(
        self,
        tenants: TenantConfiguration,
        *,
        backoff_seconds: float,
        probe: Probe | None = None,
        allow_all: bool = False,
    ) -> ScheduleAdmissionController:
        # Memory has no advisory lock to serialize admission: allow-all only.
        return _allow_all()

    async def close(self) -> None:
        """Nothing to release: the store is garbage once unreferenced."""


def _allow_all() -> ScheduleAdmissionController:
    return AllowAllAdmission()


class PostgresStorage(Storage):
    """PostgreSQL: a trusted login at ``url`` (``SET LOCAL ROLE`` for a group role
    without its own login) and, per role, an optional own login in ``logins``."""

    durable = True

    def __init__(
        self,
        url: str | None,
        role_prefix: str | None = None,
        *,
        logins: Mapping[Role, str] | None = None,
        pool_size: int = 5,
        engine: AsyncEngine | None = None,
        instance_id: str | None = None,
    ) -> None:
        self.url = url
        self.roles: RoleNames = role_names(role_prefix or DEFAULT_ROLE_PREFIX)
        self._logins = dict(logins or {})
        self._pool_size = pool_size
        self._instance_id = instance_id
        self._engine = engine
        self._owns_engine = engine is None
        self._factories: dict[Role, PostgresUnitOfWorkFactory] = {}
        self._owned: list[PostgresUnitOfWorkFactory] = []

    @classmethod
    def over_engine(
        cls, engine: AsyncEngine, role_prefix: str | None = None, *, url: str | None = None
    ) -> PostgresStorage:
        """Every role ``SET LOCAL ROLE`` over the caller's ``engine`` (not disposed by
        ``close``); ``url`` (optional) is where LISTEN/NOTIFY connect."""
        return cls(url, role_prefix, engine=engine)

    def application_name(self, role: Role) -> str:
        """What the connections this storage opens for ``role`` are called in
        ``pg_stat_activity`` (``<role>@<instance id>``, ADR 2270): the instance id given
        to the storage, else the process's (``scheduling.instance``)."""
        identity = current()
        return application_name(role, self._instance_id or identity.instance_id)

    def _trusted_engine(self) -> AsyncEngine:
        if self._engine is None:
            if self.url is None:
                raise LookupError("this storage has no trusted login")
            trusted = PostgresUnitOfWorkFactory.from_url(self.url, pool_size=self._pool_size)
            _name_connections(trusted.engine, self.application_name("trusted"))
            self._owned.append(trusted)
            self._engine = trusted.engine
            self._factories["trusted"] = trusted
        return self._engine

    def own_login(self, role: Role) -> bool:
        return role in self._logins

    def factory(self, role: Role) -> PostgresUnitOfWorkFactory:
        """The PostgreSQL factory acting as ``role`` (the typed ``as_role``)."""
        found = self._factories.get(role)
        if found is not None:
            return found
        if role in self._logins:
            made = PostgresUnitOfWorkFactory.from_url(self._logins[role], pool_size=self._pool_size)
            _name_connections(made.engine, self.application_name(role))
            self._owned.append(made)
        else:
            engine = self._trusted_engine()
            if role in self._factories:  # the trusted engine's own factory
                return self._factories[role]
            made = PostgresUnitOfWorkFactory(engine, assume_role=self._group(role))
        self._factories[role] = made
        return made

    def _group(self, role: Role) -> str | None:
        return None if role == "trusted" else str(getattr(self.roles, role))

    def as_role(self, role: Role) -> PostgresUnitOfWorkFactory:
        return self.factory(role)

    def url_of(self, role: Role) -> str | None:
        return self._logins.get(role) or self.url

    def directories(
        self, role: Role, *, durable: bool
    ) -> tuple[SchedulePrincipalDirectory, AgentRegistry]:
        uow = self.factory(role)
        principals: SchedulePrincipalDirectory = (
            DurablePrincipalDirectory(uow) if durable else StaticPrincipalDirectory()
        )
        return principals, DurableAgentRegistry(uow)

    def key_ring(self, role: Role = "api") -> KeyRing:
        return PostgresKeyRing(self.factory(role))

    def tool_ledger(self, role: Role = "api") -> ToolLedger:
        return PostgresToolLedger(self.factory(role))

    def readiness(self, head: str, role: Role = "api") -> Readiness:
        return SchemaReadiness(self.factory(role).engine, head)

    def telemetry(self, clock: Clock, ceilings: TenantCeilings | None) -> TelemetrySource | None:
        # Fleet-wide aggregates need the trusted login (RLS would show a group role nothing).
        if self._engine is None and self.url is None:
            return None
        return PostgresTelemetry(self._trusted_engine(), clock, ceilings)

    def scheduler_gauges(self, clock: Clock, role: Role = "scheduler") -> SchedulerGauges | None:
        return PostgresSchedulerGauges(self.factory(role), clock)

    def run_gauges(
        self, clock: Clock, ceilings: TenantCeilings | None, role: Role = "trusted"
    ) -> RunGauges | None:
        return PostgresRunGauges(self.factory(role), clock, ceilings)

    def wake_listener(self, clock: Clock, role: Role = "scheduler") -> WakeListener | None:
        url = self.url_of(role)
        name = self.application_name(role)
        return (
            None if url is None else PostgresWakeListener(url, clock=clock, application_name=name)
        )

    def admission(
        self,
        tenants: TenantConfiguration,
        *,
        backoff_seconds: float,
        probe: Probe | None = None,
        allow_all: bool = False,
    ) -> ScheduleAdmissionController:
        if allow_all:
            return _allow_all()
        return PostgresAdmissionController(
            tenants,
            backoff_seconds=backoff_seconds,
            probe=probe,
        )

    def materialization_store(self) -> MaterializationStore | None:
        return PostgresMaterializationStore()

    def pending_accounts(self, role: Role = "scheduler") -> PendingAccounts | None:
        return PostgresPendingAccounts(self.factory(role))

    def run_queue(
        self,
        role: Role,
        capacity: QueueCapacity,
        *,
        probe: Probe | None = None,
        classes: frozenset[RunPriority] = frozenset(RunPriority),
    ) -> RunQueue | None:
        return PostgresRunQueue(self.factory(role), capacity, probe=probe, classes=classes)

    async def close(self) -> None:
        owned, self._owned = self._owned, []
        for factory in owned:
            await factory.dispose()
        self._factories.clear()
        if self._owns_engine:
            self._engine = None


def _name_connections(engine: AsyncEngine, name: str) -> None:
    """Every connection ``engine`` opens from now on carries ``application_name=name``
    (asyncpg's ``server_settings``; one the URL's caller set explicitly is kept)."""

    def named(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        settings = dict(cparams.get("server_settings") or {})
        settings.setdefault("application_name", name)
        cparams["server_settings"] = settings

    event.listen(engine.sync_engine, "do_connect", named)


# ----------------------------------------------------- chosen from the settings


def storage_for(settings: Settings, *, pool_size: int = 5) -> Storage:
    """The storage ``settings`` choose: memory, or PostgreSQL with the trusted login at
    ``database_url`` and each role's own login where one is configured (otherwise the
    role is ``SET LOCAL ROLE`` over the trusted login)."""
    if settings.storage != "postgres":
        return MemoryStorage()
    own: dict[Role, str | None] = {
        "api": settings.api_database_url,
        "scheduler": settings.scheduler_database_url,
        "maintenance": settings.maintenance_database_url,
        "run_worker": settings.run_worker_database_url,
    }
    logins = {role: url for role, url in own.items() if url}
    return PostgresStorage(
        settings.database_url, settings.role_prefix, logins=logins, pool_size=pool_size
    )


def run_worker_storage(settings: Settings, *, pool_size: int) -> Storage:
    """The run worker's own login when configured, else the trusted login (no other
    role's login: a run worker never acts as the API or the scheduler)."""
    own = settings.run_worker_database_url
    logins: dict[Role, str] = {"run_worker": own} if own else {}
    return PostgresStorage(
        None if own else settings.database_url,
        settings.role_prefix,
        logins=logins,
        pool_size=pool_size,
    )


def one_role_storage(
    settings: Settings, role: Role, own: str | None, *, fallback: str | None
) -> Storage:
    """A storage for one role: its own login, else ``SET LOCAL ROLE`` over ``fallback``."""
    logins: dict[Role, str] = {role: own} if own else {}
    return PostgresStorage(
        None if own else fallback, settings.role_prefix, logins=logins, pool_size=2
    )
