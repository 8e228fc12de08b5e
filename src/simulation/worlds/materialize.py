"""Wiring of the materializer on PostgreSQL for gate checks and tests (not a test module).

``MaterializeWorld.open(url)`` seeds a principal and the agent through an admin login, builds the
schedule service through the API role and the materializer and schedule worker through
the least-privilege scheduler role (``SET LOCAL ROLE``), both over the durable
directories, on one virtual clock - every object from the composition root's builders
(``bootstrap.build_api``, ``build_scheduler``), so a gate exercises production's
wiring. ``ledger(...)`` reads the rows the checkers need.

Workers are strict: ``ScheduleWorker.run_once`` isolates a failing materialization
(logs it, records its type in ``PassReport.errors``, sets the schedule aside), which
is right in production but lets a check that only inspects the ledger pass while
materializations crash. ``MaterializeWorld.worker``/``MaterializeWorld.scan`` therefore fail on any
``report.errors`` unless the caller opts in with ``expect_errors=True``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import text

from scheduling.bootstrap import SchedulerRole, build_scheduler
from scheduling.domain.identity import Principal
from scheduling.domain.recurrence.due import RecurrenceCalculator
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.clock import Clock
from scheduling.ports.directories import TenantConfiguration
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import Probe
from scheduling.ports.records import PrincipalRecord
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.schedule_worker import PassReport, ScheduleWorker, WorkerSettings
from scheduling.storage import Storage
from scheduling.testing import (
    ConfiguredTenantConfiguration,
    PostgresStorage,
    PostgresUnitOfWorkFactory,
    open_storage,
    swap_worker,
)
from simulation.worlds.service import (
    CEILINGS,
    START,
    ServiceWorld,
    build_world,
    definition,
    principal,
    scheduler_settings,
    seed_durable,
)

WHO = principal("materializer-owner")
WRITTEN_TABLES = (
    "schedule_occurrences",
    "sessions",
    "session_events",
    "runs",
    "run_checkpoints",
    "process_events",
)

Row = dict[str, Any]


@dataclass
class LedgerSnapshot:
    """The occurrence ledger as read back, with the rows it links (runs, sessions, their
    events and checkpoints, schedule events, schedules); ``of`` narrows it to one
    schedule."""

    occurrences: list[Row]
    runs: list[Row]
    sessions: list[Row]
    session_events: list[Row]
    checkpoints: list[Row]
    events: list[Row]
    schedules: list[Row]

    def of(self, schedule_id: UUID) -> LedgerSnapshot:
        sid = str(schedule_id)
        occ = [o for o in self.occurrences if str(o["schedule_id"]) == sid]
        sessions = [s for s in self.sessions if s["metadata"].get("schedule_id") == sid]
        session_ids = {s["id"] for s in sessions}
        runs = [r for r in self.runs if r["session_id"] in session_ids]
        run_ids = {r["id"] for r in runs}
        return LedgerSnapshot(
            occ,
            runs,
            sessions,
            [e for e in self.session_events if e["session_id"] in session_ids],
            [c for c in self.checkpoints if c["run_id"] in run_ids],
            [e for e in self.events if str(e["schedule_id"]) == sid],
            [s for s in self.schedules if str(s["id"]) == sid],
        )

    def event_types(self) -> list[str]:
        return [str(e["event_type"]) for e in self.events]


class SwallowedScanErrors(AssertionError):
    """A scan isolated materialization errors that the check did not expect."""

    def __init__(self, errors: dict[UUID, str]) -> None:
        listed = ", ".join(f"{sid}: {name}" for sid, name in sorted(errors.items(), key=str))
        super().__init__(
            f"the schedule worker swallowed {len(errors)} materialization error(s)"
            f" [{listed}] (tracebacks are in the captured log); pass expect_errors=True"
            " only where a check means to provoke them"
        )
        self.errors = dict(errors)


def assert_clean(report: PassReport) -> PassReport:
    """Fail when a pass isolated any materialization error; return the report."""
    if report.errors:
        raise SwallowedScanErrors(report.errors)
    return report


class StrictScheduleWorker(ScheduleWorker):
    """The real schedule worker whose passes fail on isolated errors (unless expected).

    ``run`` keeps the production loop (which logs a failed pass and carries on), then
    raises once it stops if any pass swallowed an unexpected error."""

    def __init__(self, *, expect_errors: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.expect_errors = expect_errors
        self.errors_seen: dict[UUID, str] = {}

    async def run_once(self) -> PassReport:
        report = await super().run_once()
        self.errors_seen.update(report.errors)
        return report if self.expect_errors else assert_clean(report)

    async def run(self, stop: asyncio.Event | Callable[[], bool]) -> None:
        await super().run(stop)
        if self.errors_seen and not self.expect_errors:
            raise SwallowedScanErrors(self.errors_seen)


@dataclass
class MaterializeWorld:
    storage: PostgresStorage
    admin: PostgresUnitOfWorkFactory
    api: PostgresUnitOfWorkFactory
    scheduler: PostgresUnitOfWorkFactory
    world: ServiceWorld
    tenants: TenantConfiguration
    """The tenant ceilings every scheduler role of the world is built with (a case may
    replace it before building a worker)."""
    created: list[UUID] = field(default_factory=list)
    _forks: Iterator[int] = field(default_factory=itertools.count)

    @classmethod
    async def open(
        cls, url: str, *, seed: int = 0, start: datetime = START, who: Principal = WHO
    ) -> MaterializeWorld:
        storage = open_storage(url, pool_size=10)
        admin = storage.factory("trusted")
        api = storage.factory("api")
        scheduler = storage.factory("scheduler")
        await seed_durable(admin, [who], at=start)
        world = build_world(storage, seed=seed, start=start)
        tenants = ConfiguredTenantConfiguration(default=CEILINGS)
        return cls(storage, admin, api, scheduler, world, tenants)

    @property
    def clock(self) -> Any:
        return self.world.clock

    def materializer(
        self,
        *,
        storage: Storage | None = None,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        probe: Probe | None = None,
        admission: ScheduleAdmissionController | None = None,
        calculator: RecurrenceCalculator | None = None,
    ) -> ScheduleMaterializer:
        """The scheduler role's materializer (``bootstrap.build_scheduler``); the
        keyword arguments replace what a test of a test needs to vary."""
        return self.scheduler_role(
            storage=storage,
            clock=clock,
            ids=ids or self.world.ids.fork(f"materializer-{next(self._forks)}"),
            probe=probe,
            admission=admission,
            calculator=calculator,
        ).materializer

    def scheduler_role(
        self,
        *,
        storage: Storage | None = None,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        probe: Probe | None = None,
        admission: ScheduleAdmissionController | None = None,
        calculator: RecurrenceCalculator | None = None,
        expect_errors: bool = False,
        worker_settings: WorkerSettings | None = None,
        materializer: ScheduleMaterializer | None = None,
    ) -> SchedulerRole:
        """The whole scheduler role as production startup builds it, over the
        scheduler factory, with a strict schedule worker (see ``StrictScheduleWorker``)."""
        role = build_scheduler(
            scheduler_settings(),
            clock=clock or self.world.clock,
            ids=ids or self.world.ids.fork(f"scheduler-{next(self._forks)}"),
            probe=probe,
            storage=storage or self.storage,
            admission=admission,
            calculator=calculator,
            worker_settings=worker_settings,
            materializer=materializer,
            tenants=self.tenants,
        )
        role = swap_worker(role, StrictScheduleWorker)
        assert isinstance(role.worker, StrictScheduleWorker)
        role.worker.expect_errors = expect_errors
        return role

    def worker(
        self, materializer: ScheduleMaterializer, *, expect_errors: bool = False, **settings: Any
    ) -> StrictScheduleWorker:
        """A strict schedule worker over ``materializer`` with the post-run accounting
        sweep wired (``bootstrap.build_scheduler``): a pass that isolates a
        materialization error raises ``SwallowedScanErrors`` unless ``expect_errors``
        (then read ``report.errors`` yourself)."""
        role = self.scheduler_role(
            ids=self.world.ids.fork(f"accountant-{next(self._forks)}"),
            expect_errors=expect_errors,
            worker_settings=WorkerSettings(**settings),
            materializer=materializer,
        )
        assert isinstance(role.worker, StrictScheduleWorker)
        return role.worker

    async def scan(
        self, worker: ScheduleWorker | None = None, *, expect_errors: bool = False
    ) -> PassReport:
        """One worker pass (a fresh strict worker over a fresh materializer by default);
        fails on any isolated materialization error unless ``expect_errors``."""
        worker = worker or self.worker(self.materializer(), expect_errors=expect_errors)
        report = await worker.run_once()
        return report if expect_errors else assert_clean(report)

    async def create(self, who: Principal = WHO, key: str | None = None, **overrides: Any) -> UUID:
        result = await self.world.service.create(
            who, key or f"k-{len(self.created)}", definition(**overrides)
        )
        self.created.append(result.schedule.id)
        return result.schedule.id

    async def sql(self, statement: str, **params: Any) -> list[Row]:
        async with self.admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []

    async def corrupt(self, sid: UUID) -> None:
        """Point the schedule at a new revision whose stored definition cannot be
        decoded (an HOURLY cadence no revision accepts)."""
        (rev,) = await self.sql("SELECT * FROM schedule_revisions WHERE schedule_id = :i", i=sid)
        broken = dict(rev["definition"], cadence={"kind": "HOURLY", "every": 1})
        await self.sql(
            "INSERT INTO schedule_revisions (schedule_id, revision, definition,"
            " created_by_principal_id, created_at) VALUES (:i, 2, CAST(:d AS jsonb), :p, :t)",
            i=sid,
            d=json.dumps(broken),
            p=rev["created_by_principal_id"],
            t=rev["created_at"],
        )
        await self.sql("UPDATE schedules SET current_revision = 2 WHERE id = :i", i=sid)

    async def ledger(self) -> LedgerSnapshot:
        return LedgerSnapshot(
            await self.sql("SELECT * FROM schedule_occurrences ORDER BY nominal_fire_at, id"),
            await self.sql("SELECT * FROM runs ORDER BY created_at, id"),
            await self.sql("SELECT * FROM sessions ORDER BY created_at, id"),
            await self.sql("SELECT * FROM session_events ORDER BY session_id, seq"),
            await self.sql("SELECT * FROM run_checkpoints ORDER BY run_id, seq"),
            await self.sql("SELECT * FROM process_events ORDER BY occurred_at, id"),
            await self.sql("SELECT * FROM schedules ORDER BY id"),
        )

    async def schedule(self, schedule_id: UUID) -> Row:
        rows = await self.sql("SELECT * FROM schedules WHERE id = :i", i=schedule_id)
        return rows[0]

    async def next_fire(self, schedule_id: UUID) -> datetime:
        value = (await self.schedule(schedule_id))["next_fire_at"]
        assert isinstance(value, datetime), f"schedule {schedule_id} has no next firing"
        return value

    async def set_principal(
        self,
        who: Principal = WHO,
        *,
        scopes: frozenset[str] | None = None,
        enabled: bool = True,
        roles: tuple[str, ...] = ("member",),
    ) -> None:
        """Replace the principal's durable authority (the directory reads it fresh)."""
        now = self.clock.now()
        async with self.admin.begin() as uow:
            await uow.principals.put(
                PrincipalRecord(
                    tenant_id=who.tenant_id,
                    principal_id=who.principal_id,
                    enabled=enabled,
                    scopes=who.scopes if scopes is None else scopes,
                    authority_inputs={"roles": list(roles)},
                    created_at=START,
                    updated_at=now,
                )
            )
            await uow.commit()

    async def counts(self) -> dict[str, int]:
        """Row counts of every table a materialization writes."""
        out = {}
        for table in WRITTEN_TABLES:
            rows = await self.sql(f"SELECT count(*) AS n FROM {table}")  # noqa: S608 (a constant table name)
            out[table] = int(rows[0]["n"])
        return out

    async def close(self) -> None:
        await self.storage.close()
