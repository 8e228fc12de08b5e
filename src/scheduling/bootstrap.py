"""The composition root: the only module that wires adapters to ports.

One builder per production role (spec "Configuration and deployment"):

* ``build_api`` - ``ScheduleService`` over the API role, with ``PostgresNotifier``
  waking schedulers after create, update and resume commit;
* ``build_scheduler`` - ``ScheduleWorker`` + ``ScheduleMaterializer`` +
  ``PostgresAdmissionController`` + the wake listener + post-run accounting, through
  the least-privilege scheduler login. It takes a ``SchedulerSettings`` view that holds
  no API bearer token, model-provider, tool, sandbox or object-store credential, and
  its keyword-only signature has no place to pass one;
* ``build_run_worker`` - an interactive or async ``RunWorker`` claiming only its own
  priority class;
* ``build_maintenance`` - the terminal-retention purge (maintenance role) and the
  ``next_fire_at`` repair (scheduler role, which may advance that column);
* ``build_development`` - everything in one process over memory adapters and
  allow-all admission; production refuses it.

Production startup refuses (``StartupRefused``, stable codes): settings that fail
``validate_release``, in-memory repositories, a non-durable principal directory, the
allow-all admission controller and a worker topology without both reserves. Clocks
and id generators come from the caller: only the CLI constructs the system ones.
No business logic lives here.

Every role, test, gate, scenario, the soak and the benchmarks build through these
builders. Tests and the harness inject what production derives from settings - the
``storage`` (``scheduling.storage``, ADR 2171: then the role neither opens nor closes
it), a probe, and a few doubles named in each builder's keyword arguments - and get the
same classes wired the same way (``tests/integration/test_production_wiring.py``).
Whatever differs per database is the storage's choice: no builder tests which factory
it was given.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from uuid import UUID

from fastapi import FastAPI

from scheduling.adapters.memory.directories import (
    ConfiguredBrowserProfiles,
    ConfiguredTenantConfiguration,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)

# Model tools (build_tools).
from scheduling.adapters.memory.tool_ledger import ConfiguredWebsiteBindings
from scheduling.adapters.memory.uow import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.directories import DurablePrincipalDirectory
from scheduling.adapters.postgres.roles import DEFAULT_ROLE_PREFIX, RoleNames, role_names
from scheduling.adapters.token_file import TokenFile
from scheduling.config import Environment, Settings, validate_release
from scheduling.domain.errors import UnavailableError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.due import RecurrenceCalculator
from scheduling.domain.secrets import SecretScanner
from scheduling.domain.tenancy import TenantCeilings
from scheduling.http.app import create_app
from scheduling.http.server import running, serve_until
from scheduling.mcp import UNAUTHENTICATED as MCP_UNAUTHENTICATED
from scheduling.mcp import McpEdge
from scheduling.mcp import serve_until as serve_mcp_until
from scheduling.metrics import RunWorkerMetrics, SchedulerMetrics
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.clock import Clock
from scheduling.ports.directories import (
    AgentRegistry,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.ids import IdGenerator
from scheduling.ports.keys import KeyRing
from scheduling.ports.notifier import ScheduleNotifier
from scheduling.ports.probe import Probe
from scheduling.ports.readiness import Readiness
from scheduling.ports.retry import JitterSource, RetrySettings
from scheduling.ports.runtime import QueueCapacity, RunPriority, RunQueue, RunTerminalHook
from scheduling.ports.telemetry import TelemetrySource
from scheduling.ports.tokens import TokenDirectory
from scheduling.ports.tool_ledger import ToolLedger, WebsiteBindings
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime.hooks import AccountingHook
from scheduling.runtime.scripted import ScriptedAgent
from scheduling.runtime.tool_pipeline import (
    DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    ApprovalPort,
    Governance,
    ToolRegistry,
)
from scheduling.runtime.tools import ToolPipeline, scripted_tools
from scheduling.runtime.worker import RunWorker
from scheduling.runtime.worker import WorkerSettings as RunWorkerSettings
from scheduling.service.accounting import RunAccountant
from scheduling.service.admission import AllowAllAdmission, require_production_admission
from scheduling.service.bearer import BearerAuthenticator
from scheduling.service.maintenance import MaintenanceService, Repair, RetentionSettings
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.runs import RunService
from scheduling.service.schedule_views import ScheduleViews
from scheduling.service.schedule_worker import ScheduleWorker, WakeSource, WorkerSettings
from scheduling.service.schedules import ScheduleService
from scheduling.service.session_access import SessionAccess
from scheduling.service.validation import DefinitionValidator, Scanner
from scheduling.storage import (
    MemoryStorage,
    PostgresStorage,
    Role,
    Storage,
    WakeListener,
    one_role_storage,
    run_worker_storage,
    storage_for,
)
from scheduling.tools import ScheduleToolDeps, default_agent_roster, register_schedule_tools
from scheduling.tools.catalog import schedule_flags_on

REFUSED = reason("schedule.bootstrap.refused", "Startup was refused; details list every problem")
MEMORY_REPOSITORIES = reason(
    "schedule.bootstrap.memory_repositories",
    "Production startup refuses in-memory repositories (or a run queue without PostgreSQL)",
)
DIRECTORY_NOT_DURABLE = reason(
    "schedule.bootstrap.principal_directory_not_durable",
    "Production startup refuses a principal directory that is not the durable one",
)
ALLOW_ALL_ADMISSION = reason(
    "schedule.bootstrap.allow_all_admission",
    "Production startup refuses the development allow-all admission controller",
)
WORKER_TOPOLOGY = reason(
    "schedule.bootstrap.worker_topology",
    "The run capacity lacks a reserve for either class, or its slot counts are invalid",
)
FEATURE_DISABLED = reason(
    "schedule.bootstrap.feature_disabled", "The role's schedule feature flag is off"
)
DATABASE_URL_MISSING = reason(
    "schedule.bootstrap.database_url_missing", "The role needs a database URL and has none"
)
DEVELOPMENT_IN_PRODUCTION = reason(
    "schedule.bootstrap.development_in_production",
    "The development builder was asked to start in production",
)


class StartupRefused(UnavailableError):
    """A role refused to start; ``problems`` lists every reason (``code: text``)."""

    def __init__(self, problems: list[str]) -> None:
        codes = [p.split(":", 1)[0] for p in problems]
        super().__init__(REFUSED, "startup refused: " + "; ".join(problems), {"codes": codes})
        self.problems = problems
        self.codes = codes


# ---------------------------------------------------------------------- guards


def production_problems(
    *,
    storage: Storage | None = None,
    principals: SchedulePrincipalDirectory | None = None,
    admission: ScheduleAdmissionController | None = None,
    capacity: QueueCapacity | None = None,
) -> list[str]:
    """What production refuses among the wired adapters (empty: acceptable)."""
    problems: list[str] = []
    if storage is not None and not storage.durable:
        problems.append(f"{MEMORY_REPOSITORIES}: {type(storage).__name__} is not PostgreSQL")
    if principals is not None and not isinstance(principals, DurablePrincipalDirectory):
        problems.append(f"{DIRECTORY_NOT_DURABLE}: {type(principals).__name__}")
    if admission is not None:
        try:
            require_production_admission(admission)
        except ValidationError:
            problems.append(f"{ALLOW_ALL_ADMISSION}: {type(admission).__name__}")
        else:
            if not isinstance(admission, PostgresAdmissionController):
                problems.append(
                    f"{ALLOW_ALL_ADMISSION}: {type(admission).__name__} is not the PostgreSQL"
                    " controller"
                )
    if capacity is not None:
        try:
            capacity.require_reserves()
        except ValidationError as exc:
            problems.append(f"{WORKER_TOPOLOGY}: {exc.message}")
    return problems


def _refuse(problems: list[str]) -> NoReturn:
    raise StartupRefused(problems)


def _release_problems(settings: Settings) -> list[str]:
    return validate_release(settings) if settings.production else []


def _roles(prefix: str | None) -> RoleNames:
    return role_names(prefix or DEFAULT_ROLE_PREFIX)


def _login(
    own_url: str | None, fallback_url: str | None, role: str
) -> tuple[str | None, str | None]:
    """(url, assume_role): the role's own login, else SET LOCAL ROLE over the fallback."""
    if own_url:
        return own_url, None
    return fallback_url, role if fallback_url else None


def _ceilings(settings: Settings) -> ConfiguredTenantConfiguration:
    ceilings: TenantCeilings | None = settings.ceilings.to_ceilings()
    return ConfiguredTenantConfiguration(default=ceilings)


def _capacity(settings: Settings) -> QueueCapacity | str:
    t = settings.topology
    try:
        return QueueCapacity(t.total_slots, t.interactive_reserved_slots, t.async_reserved_slots)
    except ValidationError as exc:
        return f"{WORKER_TOPOLOGY}: {exc.message}"


# ------------------------------------------------------------------------- api


@dataclass
class ApiRole:
    service: ScheduleService
    uow: UnitOfWorkFactory
    principals: SchedulePrincipalDirectory
    agents: AgentRegistry
    profiles: ConfiguredBrowserProfiles
    storage: Storage
    owns_storage: bool
    keys: KeyRing
    """The deployment key ring (ADR 2100): PostgreSQL's seeded keys over the API role."""

    async def close(self) -> None:
        if self.owns_storage:
            await self.storage.close()


def build_api(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None = None,
    storage: Storage | None = None,
    notifier: ScheduleNotifier | None = None,
    scanner: Scanner | None = None,
    tenants: TenantConfiguration | None = None,
) -> ApiRole:
    """The schedule API's application service over the API role.

    Without ``storage`` the settings choose it and the role owns it (``close``
    releases it). Tests inject ``storage`` (then left open), a recording ``notifier``,
    and for a test of a test a deliberately weak ``scanner`` or other ``tenants``
    (a broken service subclass: ``scheduling.testing.build_api``)."""
    return compose_api(
        settings,
        clock=clock,
        ids=ids,
        probe=probe,
        storage=storage,
        notifier=notifier,
        scanner=scanner,
        tenants=tenants,
        service_type=ScheduleService,
    )


def compose_api(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None,
    storage: Storage | None,
    notifier: ScheduleNotifier | None,
    scanner: Scanner | None,
    tenants: TenantConfiguration | None,
    service_type: type[ScheduleService],
) -> ApiRole:
    """``build_api`` with the service class chosen by the caller (``build_api`` and
    ``scheduling.testing.build_api`` only)."""
    problems = _release_problems(settings)
    if not settings.api_enabled:
        problems.append(f"{FEATURE_DISABLED}: AGENT_SCHEDULE_API_ENABLED is off")
    owns_storage = storage is None
    if storage is None:
        if settings.storage == "postgres" and not (
            settings.api_database_url or settings.database_url
        ):
            _refuse([*problems, f"{DATABASE_URL_MISSING}: no API database URL"])
        storage = storage_for(settings)
    uow = storage.as_role("api")
    if notifier is None:
        notifier = storage.notifier("api")
    durable = settings.principal_directory == "durable"
    principals, agents = storage.directories("api", durable=durable)
    if settings.production:
        problems += production_problems(storage=storage, principals=principals)
    if problems:
        # A refused role never opened a connection: its pool holds nothing to release.
        raise StartupRefused(problems)
    profiles = ConfiguredBrowserProfiles()
    validator = DefinitionValidator(
        principals=principals,
        agents=agents,
        browser_profiles=profiles,
        tenants=tenants or _ceilings(settings),
        scanner=scanner or SecretScanner(),
    )
    keys = storage.key_ring("api")
    service = service_type(
        uow=uow,
        clock=clock,
        ids=ids,
        validator=validator,
        notifier=notifier,
        probe=probe,
        keys=keys,
    )
    return ApiRole(service, uow, principals, agents, profiles, storage, owns_storage, keys)


# ------------------------------------------------------------------- scheduler


@dataclass(frozen=True)
class SchedulerSettings:
    """What the schedule worker may know: its own login and its tuning. No API token,
    provider, tool, sandbox or object-store credential, and no other role's login."""

    environment: Environment
    enabled: bool
    release_problems: tuple[str, ...]
    storage: str
    principal_directory: str
    admission: str
    url: str | None
    assume_role: str | None
    ceilings: TenantCeilings | None
    scan_batch: int
    fallback_poll_seconds: float
    admission_backoff_seconds: float
    worker_concurrency: int = 1
    transient_retry: tuple[int, float, float] = (4, 0.1, 2.0)
    """attempts, base and max delay seconds of the prompt retry of transient errors."""
    failure_backoff_seconds: float = 60.0
    role_prefix: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> SchedulerSettings:
        # Development may SET LOCAL ROLE over the migration login; production may not
        # (validate_release requires the scheduler's own login).
        fallback = None if settings.production else settings.database_url
        url, assume = _login(
            settings.scheduler_database_url, fallback, _roles(settings.role_prefix).scheduler
        )
        return cls(
            environment=settings.environment,
            enabled=settings.worker_enabled,
            release_problems=tuple(_release_problems(settings)),
            storage=settings.storage,
            principal_directory=settings.principal_directory,
            admission=settings.admission,
            url=url,
            assume_role=assume,
            ceilings=settings.ceilings.to_ceilings(),
            scan_batch=settings.scan_batch,
            fallback_poll_seconds=settings.fallback_poll_seconds,
            admission_backoff_seconds=settings.admission_backoff_seconds,
            worker_concurrency=settings.worker_concurrency,
            transient_retry=_retry_values(settings),
            failure_backoff_seconds=settings.failure_backoff_seconds,
            role_prefix=settings.role_prefix,
        )

    def open_storage(self, pool_size: int) -> Storage:
        """The storage this view chooses: the scheduler's own login, or (development)
        ``SET LOCAL ROLE`` over the migration login."""
        if self.storage != "postgres":
            return MemoryStorage()
        if self.assume_role is not None:
            return PostgresStorage(self.url, self.role_prefix, pool_size=pool_size)
        logins: dict[Role, str] = {} if self.url is None else {"scheduler": self.url}
        return PostgresStorage(None, self.role_prefix, logins=logins, pool_size=pool_size)


class StopAwareWake:
    """The scheduler's wake source: a LISTEN notification or the stop request, so a
    sleeping worker notices SIGTERM at once instead of after its poll interval."""

    def __init__(self, listener: WakeSource | None, stop: asyncio.Event | None) -> None:
        self._listener = listener
        self._stop = stop

    async def wait(self) -> None:
        waits: list[asyncio.Future[object]] = []
        if self._stop is not None:
            waits.append(asyncio.ensure_future(self._stop.wait()))
        if self._listener is not None:
            waits.append(asyncio.ensure_future(self._listener.wait()))
        if not waits:
            await asyncio.Event().wait()  # nothing can wake us: the poll timer will
            return
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


@dataclass
class SchedulerRole:
    worker: ScheduleWorker
    materializer: ScheduleMaterializer
    admission: ScheduleAdmissionController
    accountant: RunAccountant
    uow: UnitOfWorkFactory
    storage: Storage
    listener: WakeListener | None = None
    owns_storage: bool = True

    async def start(self) -> None:
        """Start listening for wake-ups (best effort: failure only costs latency)."""
        if self.listener is not None:
            await self.listener.start()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()
        if self.owns_storage:
            await self.storage.close()


def build_scheduler(
    settings: SchedulerSettings,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None = None,
    stop: asyncio.Event | None = None,
    jitter: JitterSource | None = None,
    storage: Storage | None = None,
    admission: ScheduleAdmissionController | None = None,
    calculator: RecurrenceCalculator | None = None,
    worker_settings: WorkerSettings | None = None,
    materializer: ScheduleMaterializer | None = None,
    tenants: TenantConfiguration | None = None,
) -> SchedulerRole:
    """The schedule worker through the least-privilege scheduler login.

    Without ``storage`` the settings view chooses it and the role owns it. Tests and
    the harness inject ``storage`` (e.g. over the simulator's watched engine; LISTEN
    then only if the storage has a URL), and for a test of a test a different
    ``admission``, ``calculator``, ``worker_settings``, the
    ``materializer`` the worker scans with (one built here, wrapped or mutated) or the
    ``tenants`` configuration in place of the settings' ceilings (another worker class:
    ``scheduling.testing.build_scheduler``). ``jitter`` seeds the
    transient-retry delays (default: seeded from ``ids``, so a simulator's seeded ids
    replay the same delays)."""
    return compose_scheduler(
        settings,
        clock=clock,
        ids=ids,
        probe=probe,
        stop=stop,
        jitter=jitter,
        storage=storage,
        admission=admission,
        calculator=calculator,
        worker_settings=worker_settings,
        materializer=materializer,
        tenants=tenants,
        worker_type=ScheduleWorker,
    )


def compose_scheduler(
    settings: SchedulerSettings,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None,
    stop: asyncio.Event | None,
    jitter: JitterSource | None,
    storage: Storage | None,
    admission: ScheduleAdmissionController | None,
    calculator: RecurrenceCalculator | None,
    worker_settings: WorkerSettings | None,
    materializer: ScheduleMaterializer | None,
    tenants: TenantConfiguration | None,
    worker_type: type[ScheduleWorker],
) -> SchedulerRole:
    """``build_scheduler`` with the worker class chosen by the caller
    (``build_scheduler`` and ``scheduling.testing.build_scheduler`` only)."""
    problems = list(settings.release_problems)
    retry = _retry(settings.transient_retry)
    if isinstance(retry, str):
        problems.append(retry)
    if not settings.enabled:
        problems.append(f"{FEATURE_DISABLED}: AGENT_SCHEDULE_WORKER_ENABLED is off")
    tenants = tenants or ConfiguredTenantConfiguration(default=settings.ceilings)
    owns_storage = storage is None
    if storage is None:
        if settings.storage == "postgres" and settings.url is None:
            _refuse([*problems, f"{DATABASE_URL_MISSING}: no scheduler login URL"])
        # A connection per materialization in flight, plus the scan and accounting.
        storage = settings.open_storage(max(5, settings.worker_concurrency + 2))
    factory = storage.as_role("scheduler")
    pending = storage.pending_accounts("scheduler")
    listener = storage.wake_listener(clock, "scheduler")
    # The run's queue notification is the runs insert trigger's (ADR 1750).
    durable = settings.principal_directory == "durable"
    principals, agents = storage.directories("scheduler", durable=durable)
    # The durable tables read inside the schedule transaction (ADR 1700).
    store = storage.materialization_store() if durable else None
    if admission is None:
        admission = storage.admission(
            tenants,
            backoff_seconds=settings.admission_backoff_seconds,
            probe=probe,
            allow_all=settings.admission != "postgres",
        )
    if settings.environment is Environment.PRODUCTION:
        problems += production_problems(storage=storage, principals=principals, admission=admission)
    if problems:
        raise StartupRefused(problems)  # nothing connected yet: nothing to release
    materializer = materializer or ScheduleMaterializer(
        uow=factory,
        clock=clock,
        ids=ids,
        principals=principals,
        agents=agents,
        tenants=tenants,
        admission=admission,
        probe=probe,
        calculator=calculator,
        store=store,
    )
    accountant = RunAccountant(uow=factory, clock=clock, ids=ids)
    worker = worker_type(
        uow=factory,
        materializer=materializer,
        clock=clock,
        settings=worker_settings
        or WorkerSettings(
            batch_size=settings.scan_batch,
            fallback_poll_seconds=settings.fallback_poll_seconds,
            concurrency=max(1, min(settings.worker_concurrency, 64)),
            failure_backoff_seconds=settings.failure_backoff_seconds,
            transient_retry=retry if isinstance(retry, RetrySettings) else RetrySettings(),
        ),
        wake=StopAwareWake(listener, stop),
        accountant=accountant,
        pending=pending,
        # Throughput mode (ADR 1701): lanes split a batch shared with other workers.
        lane=ids.new_uuid().int if settings.worker_concurrency > 1 else None,
        jitter=jitter or _jitter(ids),
    )
    return SchedulerRole(
        worker, materializer, admission, accountant, factory, storage, listener, owns_storage
    )


# ----------------------------------------------------------------- run workers


@dataclass
class RunWorkerRole:
    worker: RunWorker
    queue: RunQueue
    slots: int
    uow: UnitOfWorkFactory
    storage: Storage
    role: Role = "trusted"
    """The database role the worker acts as (its own login, or the trusted one)."""
    owns_storage: bool = True

    async def close(self) -> None:
        if self.owns_storage:
            await self.storage.close()


def build_run_worker(
    settings: Settings,
    priority: RunPriority | None,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None = None,
    jitter: JitterSource | None = None,
    storage: Storage | None = None,
    capacity: QueueCapacity | None = None,
    owner: str | None = None,
    worker_settings: RunWorkerSettings | None = None,
    on_finished: RunTerminalHook | None = None,
) -> RunWorkerRole:
    """A run worker claiming only ``priority``'s class (interactive and async workers
    are separate processes on disjoint classes, sharing the fleet capacity rule);
    ``None`` claims both (a single-process world).

    Tests and the harness inject ``storage`` (the worker then acts as the run worker's
    own login if the storage has one, else the trusted login), the fleet ``capacity``,
    the worker's ``owner`` name, its ``worker_settings`` and, for a test that watches
    terminal runs, ``on_finished`` in place of the accounting hook."""
    problems = _release_problems(settings)
    retry = _retry(_retry_values(settings))
    if isinstance(retry, str):
        problems.append(retry)
    drain = settings.run_drain_seconds
    if not 0 < drain < float("inf"):
        problems.append(f"{RETRY_SETTINGS}: AGENT_SCHEDULE_RUN_DRAIN_SECONDS is not positive")
    configured = _capacity(settings) if capacity is None else capacity
    if isinstance(configured, str):
        problems.append(configured)
    elif settings.production:
        problems += production_problems(capacity=configured)
    on_postgres = settings.storage == "postgres" if storage is None else storage.durable
    if not on_postgres:
        problems.append(f"{MEMORY_REPOSITORIES}: the run queue exists only in PostgreSQL")
    if storage is None and not settings.database_url:
        problems.append(f"{DATABASE_URL_MISSING}: AGENT_SCHEDULE_DATABASE_URL is not set")
    if problems or isinstance(configured, str) or isinstance(retry, str):
        _refuse(problems)
    slots = (
        settings.topology.interactive_slots
        if priority is RunPriority.INTERACTIVE
        else settings.topology.async_slots
        if priority is RunPriority.ASYNC
        else settings.topology.total_slots
    )
    owns_storage = storage is None
    if storage is None:
        storage = run_worker_storage(settings, pool_size=max(5, slots + 2))
    # The run worker's own least-privilege login when configured (role
    # <prefix>_run_worker, revision 0005): it cannot touch schedules, so post-run
    # accounting is left to the scheduler's sweep. Otherwise the trusted login, which
    # accounts at once.
    own_login = storage.own_login("run_worker")
    role: Role = "run_worker" if own_login else "trusted"
    uow = storage.as_role(role)
    classes = frozenset(RunPriority) if priority is None else frozenset({priority})
    queue = storage.run_queue(role, configured, probe=probe, classes=classes)
    if queue is None:
        _refuse([f"{MEMORY_REPOSITORIES}: the run queue exists only in PostgreSQL"])
    hook = None if own_login else AccountingHook(RunAccountant(uow=uow, clock=clock, ids=ids))
    label = "any" if priority is None else priority.name.lower()
    worker = RunWorker(
        uow=uow,
        queue=queue,
        executor=ScriptedAgent(),
        tools=ToolPipeline(scripted_tools()),
        clock=clock,
        owner=owner or f"{label}-{ids.new_uuid()}",
        settings=worker_settings or RunWorkerSettings(transient_retry=retry, drain_seconds=drain),
        probe=probe,
        on_finished=on_finished or hook,
        jitter=jitter or _jitter(ids),
    )
    return RunWorkerRole(worker, queue, slots, uow, storage, role, owns_storage)


# ----------------------------------------------------------------- maintenance


@dataclass
class MaintenanceRole:
    purge: MaintenanceService
    repair: MaintenanceService
    tenants: tuple[str, ...]
    storages: list[Storage] = field(default_factory=list)
    """What the role opened itself (``close`` releases them)."""

    async def purge_once(self) -> dict[str, int]:
        """One batch of the retention sweep for every configured tenant."""
        return await self.purge.purge_all(list(self.tenants))

    async def repair_next_fire(self, schedule_id: UUID) -> Repair:
        return await self.repair.repair_next_fire(schedule_id)

    async def close(self) -> None:
        for storage in self.storages:
            await storage.close()


def build_maintenance(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    storage: Storage | None = None,
    retention: RetentionSettings | None = None,
) -> MaintenanceRole:
    """Purge through the maintenance role (tenant-scoped deletes); repair through the
    scheduler role, the one that may advance ``next_fire_at`` and append its event.

    Tests inject ``storage`` (not released by ``close``) and may override the
    ``retention`` the settings give."""
    problems = _release_problems(settings)
    if storage is not None:
        if settings.production:
            problems += production_problems(storage=storage)
        if problems:
            _refuse(problems)
        kept = retention or _retention(settings)
        return MaintenanceRole(
            purge=MaintenanceService(
                uow=storage.as_role("maintenance"), clock=clock, ids=ids, retention=kept
            ),
            repair=MaintenanceService(
                uow=storage.as_role("scheduler"), clock=clock, ids=ids, retention=kept
            ),
            tenants=settings.tenants,
        )
    if settings.storage != "postgres":
        problems.append(f"{MEMORY_REPOSITORIES}: maintenance runs against PostgreSQL only")
    purge_url = settings.maintenance_database_url or settings.database_url
    repair_fallback = None if settings.production else settings.database_url
    repair_url = settings.scheduler_database_url or repair_fallback
    if purge_url is None or repair_url is None:
        problems.append(f"{DATABASE_URL_MISSING}: maintenance or scheduler login URL missing")
    if problems or purge_url is None or repair_url is None:
        _refuse(problems)
    retention = retention or _retention(settings)
    # Production may not SET LOCAL ROLE to the scheduler over the migration login.
    purge = one_role_storage(
        settings, "maintenance", settings.maintenance_database_url, fallback=settings.database_url
    )
    repair = one_role_storage(
        settings, "scheduler", settings.scheduler_database_url, fallback=repair_fallback
    )
    return MaintenanceRole(
        purge=MaintenanceService(
            uow=purge.as_role("maintenance"), clock=clock, ids=ids, retention=retention
        ),
        repair=MaintenanceService(
            uow=repair.as_role("scheduler"), clock=clock, ids=ids, retention=retention
        ),
        tenants=settings.tenants,
        storages=[purge, repair],
    )


def _retention(settings: Settings) -> RetentionSettings:
    return RetentionSettings(
        terminal_retention_days=settings.terminal_retention_days,
        purge_interval_seconds=settings.purge_interval_seconds,
        terminal_purge_batch=settings.terminal_purge_batch,
    )


# ----------------------------------------------------------------- development


@dataclass
class DevelopmentStack:
    """Every role in one process over memory adapters (development and demos only)."""

    service: ScheduleService
    materializer: ScheduleMaterializer
    worker: ScheduleWorker
    maintenance: MaintenanceService
    uow: MemoryUnitOfWorkFactory
    principals: StaticPrincipalDirectory
    agents: StaticAgentRegistry


def build_development(settings: Settings, *, clock: Clock, ids: IdGenerator) -> DevelopmentStack:
    """Memory repositories, static directories and allow-all admission. Production
    refuses it; there is no run queue (PostgreSQL only)."""
    if settings.production:
        raise StartupRefused([f"{DEVELOPMENT_IN_PRODUCTION}: AGENT_SCHEDULE_ENVIRONMENT"])
    uow = MemoryUnitOfWorkFactory()
    principals, agents = StaticPrincipalDirectory(), StaticAgentRegistry()
    tenants = _ceilings(settings)
    validator = DefinitionValidator(
        principals=principals,
        agents=agents,
        browser_profiles=ConfiguredBrowserProfiles(),
        tenants=tenants,
        scanner=SecretScanner(),
    )
    service = ScheduleService(uow=uow, clock=clock, ids=ids, validator=validator)
    materializer = ScheduleMaterializer(
        uow=uow,
        clock=clock,
        ids=ids,
        principals=principals,
        agents=agents,
        tenants=tenants,
        admission=AllowAllAdmission(),
    )
    accountant = RunAccountant(uow=uow, clock=clock, ids=ids)
    worker = ScheduleWorker(
        uow=uow,
        materializer=materializer,
        clock=clock,
        settings=WorkerSettings(
            batch_size=max(settings.scan_batch, 1),
            fallback_poll_seconds=max(settings.fallback_poll_seconds, 0.001),
        ),
        accountant=accountant,
    )
    maintenance = MaintenanceService(uow=uow, clock=clock, ids=ids)
    return DevelopmentStack(service, materializer, worker, maintenance, uow, principals, agents)


# --------------------------------------------------------------- control plane


@dataclass
class ControlPlane:
    """What the HTTP edge serves: the API role's services, the durable principal
    directory request scopes come from, the bearer-token directory and readiness."""

    api: ApiRole
    principals: SchedulePrincipalDirectory
    authenticator: TokenDirectory
    views: ScheduleViews
    runs: RunService
    sessions: SessionAccess
    readiness: Readiness
    clock: Clock
    telemetry: TelemetrySource | None = None

    @property
    def service(self) -> ScheduleService:
        return self.api.service

    async def close(self) -> None:
        await self.api.close()


def build_control_plane(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    tokens: TokenDirectory,
    storage: Storage | None = None,
) -> ControlPlane:
    """``build_api`` plus the run, session and readiness services of the HTTP edge.

    Production additionally requires the durable principal directory (the one the
    scheduler reads at firing), enforced by ``build_api``'s refusals."""
    api = build_api(settings, clock=clock, ids=ids, storage=storage)
    assert api.principals is not None
    # Fleet-wide aggregates need the trusted login (RLS would show the API role nothing).
    telemetry = api.storage.telemetry(clock, settings.ceilings.to_ceilings())
    return ControlPlane(
        telemetry=telemetry,
        api=api,
        principals=api.principals,
        authenticator=tokens,
        views=ScheduleViews(api.uow),
        runs=RunService(api.uow, clock),
        sessions=SessionAccess(api.uow, clock),
        readiness=api.storage.readiness("api"),
        clock=clock,
    )


def token_file(path: Path) -> TokenDirectory:
    """The local bearer-token file (digests only, ADR 1501)."""
    return TokenFile(path)


# ----------------------------------------------------------------- model tools
# The governed tool pipeline with the six schedule tools (ADR 1600). The service is
# wired as build_api wires it (API role, same directories and validator); the
# website-binding and browser-profile directories may be injected (the chat surface
# owns them). With either schedule flag off no schedule tool is registered and the
# default agent's roster lacks them.


@dataclass
class ToolsRole:
    pipeline: ToolPipeline
    registry: ToolRegistry
    roster: frozenset[str]
    api: ApiRole | None
    ledger: ToolLedger | None

    @property
    def service(self) -> ScheduleService | None:
        return None if self.api is None else self.api.service

    async def close(self) -> None:
        if self.api is not None:
            await self.api.close()


def build_tools(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    approvals: ApprovalPort,
    default_agent_id: UUID,
    website_bindings: WebsiteBindings | None = None,
    base_roster: frozenset[str] = frozenset(),
    storage: Storage | None = None,
    notifier: ScheduleNotifier | None = None,
    tenants: TenantConfiguration | None = None,
    approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
) -> ToolsRole:
    """The conversation-side tool pipeline: registry, roster, ledger and approvals, over
    ``build_api``'s service (same login, directories, validator; ``storage``, ``notifier``
    and ``tenants`` are injected as there). The chat surface supplies the website
    bindings; browser profiles are the API role's (``ToolsRole.api.profiles``). The
    pipeline waits at most ``approval_timeout_seconds`` (real time) for a decision."""
    flags = {"api_enabled": settings.api_enabled, "worker_enabled": settings.worker_enabled}
    registry = ToolRegistry()
    roster = default_agent_roster(**flags, base=base_roster)
    if not schedule_flags_on(**flags):
        return ToolsRole(ToolPipeline(registry), registry, roster, None, None)
    api = build_api(
        settings, clock=clock, ids=ids, storage=storage, notifier=notifier, tenants=tenants
    )
    ledger = api.storage.tool_ledger("api")
    deps = ScheduleToolDeps(
        service=api.service,
        clock=clock,
        agents=api.agents,
        tenants=tenants or _ceilings(settings),
        websites=website_bindings or ConfiguredWebsiteBindings(),
        agent_id=default_agent_id,
        keys=api.keys,
        scanner=SecretScanner(),
    )
    register_schedule_tools(registry, deps, **flags)
    governance = Governance(
        ledger=ledger,
        approvals=approvals,
        clock=clock,
        ids=ids,
        approval_timeout_seconds=approval_timeout_seconds,
    )
    return ToolsRole(ToolPipeline(registry, governance), registry, roster, api, ledger)


# ----------------------------------------------------------------- reliability

RETRY_SETTINGS = reason(
    "schedule.bootstrap.retry_settings",
    "The transient-error retry, failure backoff or drain settings are invalid for this role",
)


def _retry_values(settings: Settings) -> tuple[int, float, float]:
    return (
        settings.transient_retry_attempts,
        settings.transient_retry_base_seconds,
        settings.transient_retry_max_seconds,
    )


def _retry(values: tuple[int, float, float]) -> RetrySettings | str:
    """The retry settings, or the problem that refuses startup."""
    try:
        return RetrySettings(*values)
    except ValidationError as exc:
        return f"{RETRY_SETTINGS}: {exc.message}"


def _jitter(ids: IdGenerator) -> JitterSource:
    """A jitter source seeded from the id generator (random ids in production, seeded
    ids in the simulator): never ambient randomness."""
    return random.Random(ids.new_uuid().int)


# ------------------------------------------------------------------ role metrics
# The scheduler's and run worker's Prometheus ports (ADR 1510): an observer attached to
# the role's worker, and scrape-time gauges read through the role's own login.


def scheduler_metrics(role: SchedulerRole, *, clock: Clock) -> SchedulerMetrics:
    """Attach a ``SchedulerMetrics`` to ``role``'s worker (every later pass feeds it)."""
    metrics = SchedulerMetrics(role.storage.scheduler_gauges(clock, "scheduler"))
    role.worker.metrics.observers.append(metrics)
    return metrics


def run_worker_metrics(
    role: RunWorkerRole, settings: Settings, *, clock: Clock
) -> RunWorkerMetrics:
    """Attach a ``RunWorkerMetrics`` to ``role``'s worker (every later claim feeds it)."""
    gauges = role.storage.run_gauges(clock, settings.ceilings.to_ceilings(), role.role)
    metrics = RunWorkerMetrics(reader=role.uow, gauges=gauges)
    role.worker.observer = metrics
    return metrics


# ------------------------------------------------------------ edge authentication
# One bearer authentication for every edge taking a token per request (ADR 1511): the
# digest-only token file names the caller, the durable principal directory its scopes.


def edge_authenticator(
    principals: SchedulePrincipalDirectory, tokens: TokenDirectory
) -> BearerAuthenticator:
    """Bearer authentication over ``tokens`` (e.g. ``token_file(path)``) and the role's
    principal directory (``ToolsRole.api.principals`` for the MCP edge)."""
    return BearerAuthenticator(tokens, principals)


# --------------------------------------------------------------------- MCP edge
# The model tools served over MCP (ADRs 1601, 2110): the edge's elicitation is the
# pipeline's approval port; callers authenticate through the HTTP edge's token file
# and the durable principal directory (scopes read on every call).


@dataclass
class McpRole:
    edge: McpEdge
    tools: ToolsRole

    async def close(self) -> None:
        await self.tools.close()


def build_mcp(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    tokens: TokenDirectory,
    default_agent_id: UUID,
    approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    storage: Storage | None = None,
) -> McpRole:
    """``build_tools`` with an ``McpEdge`` attached (its elicitation the approval port,
    ``edge_authenticator`` over ``tokens``). With either schedule flag off the edge
    would serve nothing: startup is refused (``FEATURE_DISABLED``) in every environment;
    production refusals are ``build_api``'s. The pipeline bounds an approval's wait at
    ``approval_timeout_seconds`` (ADR 2121; the elicitation's own bound is a little
    later). Tests inject ``storage`` (another edge class, for a test of a test:
    ``scheduling.testing.build_mcp``)."""
    return compose_mcp(
        settings,
        clock=clock,
        ids=ids,
        tokens=tokens,
        default_agent_id=default_agent_id,
        approval_timeout_seconds=approval_timeout_seconds,
        storage=storage,
        edge_type=McpEdge,
    )


def compose_mcp(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    tokens: TokenDirectory,
    default_agent_id: UUID,
    approval_timeout_seconds: float,
    storage: Storage | None,
    edge_type: type[McpEdge],
) -> McpRole:
    """``build_mcp`` with the edge class chosen by the caller (``build_mcp`` and
    ``scheduling.testing.build_mcp`` only)."""
    flags = {"api_enabled": settings.api_enabled, "worker_enabled": settings.worker_enabled}
    if not schedule_flags_on(**flags):
        off = [f"AGENT_SCHEDULE_{name.upper()}" for name, on in flags.items() if not on]
        _refuse([f"{FEATURE_DISABLED}: the MCP edge needs both schedule flags; off: {off}"])
    edge = edge_type(approval_timeout_seconds=approval_timeout_seconds)
    tools = build_tools(
        settings,
        clock=clock,
        ids=ids,
        approvals=edge.approvals,
        default_agent_id=default_agent_id,
        storage=storage,
        approval_timeout_seconds=approval_timeout_seconds,
    )
    assert tools.api is not None  # both flags on: build_tools built the API role
    edge.attach(tools.pipeline, tools.roster, edge_authenticator(tools.api.principals, tokens))
    return McpRole(edge, tools)


# ------------------------------------------------------------------ the HTTP edge
# The CLI starts the HTTP server through these, never by importing the edge: the edges
# (cli, http, mcp) stay independent; the composition root is the one place joining them.


def build_http_app(
    plane: ControlPlane,
    *,
    observe: Callable[[str, str, int, float], None] | None = None,
    extra_routes: Callable[[FastAPI], None] | None = None,
) -> FastAPI:
    """The HTTP edge's ASGI app over ``plane`` (``build_control_plane``)."""
    return create_app(plane, observe=observe, extra_routes=extra_routes)


async def serve_http(plane: ControlPlane, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve ``plane`` over HTTP (uvicorn) until ``stop`` is set."""
    await serve_until(build_http_app(plane), host, port, stop)


def running_http(
    plane: ControlPlane, host: str = "127.0.0.1", port: int = 0
) -> AbstractAsyncContextManager[str]:
    """Serve ``plane`` on ``host:port`` (0: ephemeral) inside the caller's event loop
    until the block exits; yields the base URL."""
    return running(build_http_app(plane), host, port)


# ------------------------------------------------------------------- the MCP edge


async def serve_mcp_http(role: McpRole, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve the MCP edge's streamable HTTP app until ``stop`` is set."""
    await serve_mcp_until(role.edge, host, port, stop)


async def serve_mcp_stdio(
    role: McpRole, token: str, stop: asyncio.Event, *, started: Callable[[], None] | None = None
) -> None:
    """Serve the MCP edge on stdio as ``token``'s principal until ``stop`` is set or the
    session ends. A token the token file does not know is refused before serving
    (``StartupRefused`` with ``schedule.mcp.unauthenticated``); ``started`` is called once
    serving begins."""
    if await role.edge.principal(f"Bearer {token}") is None:
        _refuse([f"{MCP_UNAUTHENTICATED}: the stdio bearer token is not in the token file"])
    if started is not None:
        started()
    session = asyncio.create_task(role.edge.serve_stdio(token))
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({session, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if not session.done():
        session.cancel()
    await asyncio.gather(session, return_exceptions=True)
