"""The run-worker role: an interactive or async ``RunWorker`` claiming only its own
priority class."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.bootstrap.choices import (
    configured_capacity,
    retry_settings,
    retry_values,
    seeded_jitter,
)
from scheduling.bootstrap.owned import OwnedStorage
from scheduling.bootstrap.refusals import (
    DATABASE_URL_MISSING,
    MEMORY_REPOSITORIES,
    RETRY_SETTINGS,
    production_problems,
    refuse,
    release_problems,
)
from scheduling.config import Settings
from scheduling.instance import current
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import Probe
from scheduling.ports.retry import JitterSource
from scheduling.ports.runtime import QueueCapacity, RunPriority, RunQueue, RunTerminalHook
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime.hooks import AccountingHook
from scheduling.runtime.scripted import ScriptedAgent
from scheduling.runtime.tools import ToolPipeline, scripted_tools
from scheduling.runtime.worker import RunWorker
from scheduling.runtime.worker import WorkerSettings as RunWorkerSettings
from scheduling.service.accounting import RunAccountant
from scheduling.storage import Role, Storage, run_worker_storage


@dataclass
class RunWorkerRole(OwnedStorage):
    worker: RunWorker
    queue: RunQueue
    slots: int
    uow: UnitOfWorkFactory
    storage: Storage
    role: Role = "trusted"
    """The database role the worker acts as (its own login, or the trusted one)."""
    owns_storage: bool = True


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
    problems = release_problems(settings)
    retry = retry_settings(retry_values(settings))
    if isinstance(retry, str):
        problems.append(retry)
    drain = settings.run_drain_seconds
    if not 0 < drain < float("inf"):
        problems.append(f"{RETRY_SETTINGS}: AGENT_SCHEDULE_RUN_DRAIN_SECONDS is not positive")
    configured = configured_capacity(settings) if capacity is None else capacity
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
        refuse(problems)
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
        refuse([f"{MEMORY_REPOSITORIES}: the run queue exists only in PostgreSQL"])
    hook = None if own_login else AccountingHook(RunAccountant(uow=uow, clock=clock, ids=ids))
    label = "any" if priority is None else priority.name.lower()
    worker = RunWorker(
        uow=uow,
        queue=queue,
        executor=ScriptedAgent(),
        tools=ToolPipeline(scripted_tools()),
        clock=clock,
        # The lease owner names the process (ADR 2270): runs.lease_owner leads to it.
        owner=owner or f"{label}@{current().instance_id}-{ids.new_uuid()}",
        settings=worker_settings or RunWorkerSettings(transient_retry=retry, drain_seconds=drain),
        probe=probe,
        on_finished=on_finished or hook,
        jitter=jitter or seeded_jitter(ids),
    )
    return RunWorkerRole(worker, queue, slots, uow, storage, role, owns_storage)
