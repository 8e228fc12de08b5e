"""The scheduler role: ``ScheduleWorker`` + ``ScheduleMaterializer`` + admission + the wake
listener + post-run accounting, through the least-privilege scheduler login.

It takes a ``SchedulerSettings`` view that holds no API bearer token, model-provider,
tool, sandbox or object-store credential, and its keyword-only signature has no place to
pass one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypedDict

from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
from scheduling.bootstrap.choices import (
    RetryValues,
    prefixed_roles,
    retry_settings,
    retry_values,
    role_login,
    seeded_jitter,
)
from scheduling.bootstrap.owned import OwnedStorage
from scheduling.bootstrap.refusals import (
    DATABASE_URL_MISSING,
    FEATURE_DISABLED,
    StartupRefused,
    production_problems,
    refuse,
    release_problems,
)
from scheduling.config import Environment, Settings
from scheduling.domain.recurrence.due import RecurrenceCalculator
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.clock import Clock
from scheduling.ports.directories import TenantConfiguration
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import Probe
from scheduling.ports.retry import JitterSource, RetrySettings
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.accounting import PendingAccounts, RunAccountant
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.schedule_worker import ScheduleWorker, WakeSource, WorkerSettings
from scheduling.storage import MemoryStorage, PostgresStorage, Role, Storage, WakeListener


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
    transient_retry: RetryValues = (4, 0.1, 2.0, 30.0)
    """The prompt retry of transient errors and how long a refusal is waited out."""
    failure_backoff_seconds: float = 60.0
    accounting_poll_seconds: float = 1.0
    role_prefix: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> SchedulerSettings:
        # Development may SET LOCAL ROLE over the migration login; production may not
        # (validate_release requires the scheduler's own login).
        fallback = None if settings.production else settings.database_url
        url, assume = role_login(
            settings.scheduler_database_url,
            fallback,
            prefixed_roles(settings.role_prefix).scheduler,
        )
        return cls(
            environment=settings.environment,
            enabled=settings.worker_enabled,
            release_problems=tuple(release_problems(settings)),
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
            transient_retry=retry_values(settings),
            failure_backoff_seconds=settings.failure_backoff_seconds,
            accounting_poll_seconds=settings.accounting_poll_seconds,
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


class ScheduleWorkerArgs(TypedDict):
    """What ``build_scheduler`` constructs the ``ScheduleWorker`` with (kept on the role,
    so ``scheduling.testing.swap_worker`` can build another class the same way)."""

    uow: UnitOfWorkFactory
    materializer: ScheduleMaterializer
    clock: Clock
    settings: WorkerSettings
    wake: StopAwareWake
    accountant: RunAccountant
    pending: PendingAccounts | None
    lane: int | None
    jitter: JitterSource


@dataclass
class SchedulerRole(OwnedStorage):
    worker: ScheduleWorker
    materializer: ScheduleMaterializer
    admission: ScheduleAdmissionController
    accountant: RunAccountant
    uow: UnitOfWorkFactory
    storage: Storage
    listener: WakeListener | None
    owns_storage: bool
    worker_args: ScheduleWorkerArgs

    async def start(self) -> None:
        """Start listening for wake-ups (best effort: failure only costs latency)."""
        if self.listener is not None:
            await self.listener.start()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()
        await super().close()


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
    ``scheduling.testing.swap_worker``). ``jitter`` seeds the
    transient-retry delays (default: seeded from ``ids``, so a simulator's seeded ids
    replay the same delays)."""
    problems = list(settings.release_problems)
    retry = retry_settings(settings.transient_retry)
    if isinstance(retry, str):
        problems.append(retry)
    if not settings.enabled:
        problems.append(f"{FEATURE_DISABLED}: AGENT_SCHEDULE_WORKER_ENABLED is off")
    tenants = tenants or ConfiguredTenantConfiguration(default=settings.ceilings)
    owns_storage = storage is None
    if storage is None:
        if settings.storage == "postgres" and settings.url is None:
            refuse([*problems, f"{DATABASE_URL_MISSING}: no scheduler login URL"])
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
    args = ScheduleWorkerArgs(
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
            accounting_poll_seconds=settings.accounting_poll_seconds,
        ),
        wake=StopAwareWake(listener, stop),
        accountant=accountant,
        pending=pending,
        # Throughput mode (ADR 1701): lanes split a batch shared with other workers.
        lane=ids.new_uuid().int if settings.worker_concurrency > 1 else None,
        jitter=jitter or seeded_jitter(ids),
    )
    return SchedulerRole(
        ScheduleWorker(**args),
        materializer,
        admission,
        accountant,
        factory,
        storage,
        listener,
        owns_storage,
        args,
    )
