"""The objects a gate exercises are the ones production startup builds.

Worlds (``simulation.worlds``) build every service, materializer and worker through
``scheduling.bootstrap``; here the harness's objects are compared, attribute by
attribute, with what the builders make from the production environment that passes
release validation: the same class for every collaborator, the same admission
controller (and its backoff), the scheduler role, post-run accounting on both sides.
Only what a test injects by design may differ: the clock, the id generator, the probe
and the LISTEN/NOTIFY adapters (a world has no wake-up channel).

Tests of the test: a wiring mistake planted in a builder (allow-all admission, a
missing pending-accounts reader, a caching principal directory) shows up as a
difference here, and the two last turn a real gate check red.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar
from uuid import UUID

import pytest

import gates.checks.test_authority_fresh as authority_fresh
import gates.checks.test_offline_results as offline_results
import scheduling.storage as storage_module
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap as b
from scheduling.adapters.postgres.directories import DurablePrincipalDirectory
from scheduling.adapters.postgres.materialization import PostgresMaterializationStore
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.system_clock import SystemClock
from scheduling.adapters.system_ids import RandomIds
from scheduling.config import Settings
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.directories import AuthoritySnapshot
from scheduling.ports.materialization import FiringContext
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.service.admission import AllowAllAdmission
from simulation.worlds.materialize import MaterializeWorld, StrictScheduleWorker
from simulation.worlds.runtime import run_worker
from testsupport.production_env import GOOD

# assume_role: production logs in as the scheduler, a world sets the role (checked below).
INJECTED = frozenset(
    {
        "_clock",
        "_ids",
        "_probe",
        "_notifier",
        "_wake",
        "clock",
        "owner",
        "assume_role",
        "engine",
    }
)


def production() -> Settings:
    return Settings.from_env(GOOD)


def differences(built: object, harness: object, path: str = "", depth: int = 2) -> list[str]:
    """Every attribute whose class differs between two objects (recursing ``depth``
    levels into the product's own collaborators), injected ones excepted."""
    found: list[str] = []
    ours, theirs = vars(built), vars(harness)
    for name in sorted(ours):  # a harness subclass may add state of its own
        if name in INJECTED or name == "metrics":
            continue
        a, h = ours.get(name), theirs.get(name)
        where = f"{path}.{name}" if path else name
        if type(a) is not type(h):
            found.append(f"{where}: production {type(a).__name__}, harness {type(h).__name__}")
        elif depth > 0 and type(a).__module__.startswith("scheduling.") and hasattr(a, "__dict__"):
            found += differences(a, h, where, depth - 1)
    return found


@pytest.fixture
async def harness(pg_url: str) -> Any:
    h = await MaterializeWorld.open(pg_url)
    try:
        yield h
    finally:
        await h.close()


def production_scheduler() -> b.SchedulerRole:
    return b.build_scheduler(
        b.SchedulerSettings.of(production()), clock=SystemClock(), ids=RandomIds()
    )


async def test_the_gate_scheduler_is_the_production_scheduler(harness: MaterializeWorld) -> None:
    built = production_scheduler()
    try:
        role = harness.scheduler_role()
        assert differences(built.materializer, role.materializer) == []
        worker = harness.worker(harness.materializer())
        assert type(worker).__mro__[1] is type(built.worker)  # strict = production + checks
        assert isinstance(worker, StrictScheduleWorker)
        assert differences(built.worker, worker, depth=1) == []
        assert type(built.admission) is type(role.admission)
        assert vars(built.admission)["_backoff"] == vars(role.admission)["_backoff"]
        assert built.accountant is not None
        assert role.accountant is not None
        # The same role: production logs in as the scheduler; the harness sets it.
        scheduler = role_names().scheduler
        assert harness.scheduler.assume_role == scheduler
        assert (
            b.SchedulerSettings.of(production()).url
            == GOOD["AGENT_SCHEDULE_SCHEDULER_DATABASE_URL"]
        )
        dev = b.SchedulerSettings.of(
            Settings.from_env(
                {
                    **GOOD,
                    "AGENT_SCHEDULE_ENVIRONMENT": "development",
                    "AGENT_SCHEDULE_SCHEDULER_DATABASE_URL": "",
                }
            )
        )
        assert dev.assume_role == scheduler
    finally:
        await built.close()


async def test_the_gate_service_and_run_worker_are_the_production_ones(
    harness: MaterializeWorld,
) -> None:
    api = b.build_api(production(), clock=SystemClock(), ids=RandomIds())
    runs = b.build_run_worker(
        production(), RunPriority.INTERACTIVE, clock=SystemClock(), ids=RandomIds()
    )
    try:
        assert differences(api.service, harness.world.service) == []
        gate_runner = run_worker(harness.admin, harness.clock, "w", capacity=QueueCapacity(4, 1, 1))
        found = differences(runs.worker, gate_runner)
        # The one intended difference: production's run worker logs in as its own
        # least-privilege login (required by release validation, ADR 1914), which cannot
        # touch schedules, so post-run accounting is the scheduler's sweep; the gates'
        # runner on the trusted login accounts at once through the hook.
        assert found == ["_on_finished: production NoneType, harness AccountingHook"]
        assert vars(runs.worker)["_on_finished"] is None
    finally:
        await api.close()
        await runs.close()


# ---------------------------------------------------------- tests of the test


class NothingPending:
    """A wiring mistake: a pending-accounts reader that never finds anything."""

    def __init__(self, uow: Any) -> None:
        self.uow = uow

    async def pending(self, limit: int) -> list[UUID]:
        return []

    @asynccontextmanager
    async def claimed(self, limit: int) -> AsyncIterator[list[UUID]]:
        yield []


class CachedDirectory(DurablePrincipalDirectory):
    """A wiring mistake: a principal directory that caches authority for the process."""

    seen: ClassVar[dict[tuple[str, str], AuthoritySnapshot | None]] = {}

    async def current(self, tenant_id: str, principal_id: str) -> AuthoritySnapshot | None:
        key = (tenant_id, principal_id)
        if key not in self.seen:
            self.seen[key] = await super().current(tenant_id, principal_id)
        return self.seen[key]


class CachedStore(PostgresMaterializationStore):
    """The same mistake in the materializer's store, which reads authority inside the
    schedule transaction (ADR 1700): authority cached for the process."""

    seen: ClassVar[dict[tuple[str, str], AuthoritySnapshot | None]] = {}

    async def context(
        self, uow: UnitOfWork, schedule: Schedule, revision: ScheduleRevision
    ) -> FiringContext:
        fresh = await super().context(uow, schedule, revision)
        key = (schedule.tenant_id, schedule.principal_id)
        if key not in self.seen:
            self.seen[key] = fresh.authority
        return FiringContext(self.seen[key], fresh.agent, fresh.previous_run_status)


async def test_allow_all_admission_in_the_builder_is_a_difference(
    harness: MaterializeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = production_scheduler()  # built before the mistake: what production runs
    monkeypatch.setattr(
        storage_module, "PostgresAdmissionController", lambda *a, **k: AllowAllAdmission()
    )
    try:
        found = differences(built.materializer, harness.scheduler_role().materializer)
        assert found == [
            "_admission: production PostgresAdmissionController, harness AllowAllAdmission"
        ]
    finally:
        await built.close()


async def test_an_unwired_pending_reader_turns_offline_results_red(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage_module, "PostgresPendingAccounts", NothingPending)
    with pytest.raises(AssertionError):
        await offline_results.test_every_disposition_recovered_from_paginated_reads(
            pg_url, GateEvidence()
        )


async def test_a_caching_directory_in_the_builder_turns_authority_fresh_red(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The materializer reads authority through its store (ADR 1700), the validator
    # through the directory: cache both, as one wiring mistake would.
    monkeypatch.setattr(storage_module, "DurablePrincipalDirectory", CachedDirectory)
    monkeypatch.setattr(CachedDirectory, "seen", {})
    monkeypatch.setattr(storage_module, "PostgresMaterializationStore", CachedStore)
    monkeypatch.setattr(CachedStore, "seen", {})
    with pytest.raises(AssertionError):
        await authority_fresh.test_due_occurrence_fails_closed(
            pg_url, "scope_revoked", GateEvidence()
        )
