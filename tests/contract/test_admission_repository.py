"""Contract suites of the unit of work's admission and pending-accounts repositories
(memory and PostgreSQL, trusted scope): the same committed rows give the same usage
and the same pending runs on both."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

from scheduling.domain.admission import TenantUsage
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.records import ProcessEvent, RunRecord, RunStatus
from scheduling.ports.unit_of_work import UnitOfWorkFactory


def _finished(run: RunRecord, status: RunStatus, ago: timedelta, cost: str) -> RunRecord:
    at = run.created_at + timedelta(seconds=30) - ago
    return replace(run, status=status, finished_at=at, updated_at=at, cost=Decimal(cost))


async def _scheduled_runs(uow_factory: UnitOfWorkFactory, build: Any) -> list[RunRecord]:
    """One active, two terminal scheduled runs of alice's tenant and one unscheduled."""
    schedule, revision = build.schedule()
    session = build.session(schedule_id=schedule.id)
    tag = {"schedule_id": str(schedule.id)}
    active = replace(build.run(session), metadata=tag)
    day = timedelta(hours=2)
    month = timedelta(days=10)
    completed = _finished(
        replace(build.run(session), metadata=tag), RunStatus.COMPLETED, day, "0.25"
    )
    failed = _finished(replace(build.run(session), metadata=tag), RunStatus.FAILED, month, "0.50")
    unscheduled = _finished(build.run(session), RunStatus.COMPLETED, day, "7.00")
    async with uow_factory.begin() as uow:
        await uow.schedules.create(schedule, revision)
        await uow.sessions.create(session)
        for run in (active, completed, failed, unscheduled):
            await uow.runs.create(run)
        await uow.commit()
    return [active, completed, failed, unscheduled]


class TestAdmissionRepositoryContract:
    async def test_usage_counts_committed_scheduled_runs_in_their_windows(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        await _scheduled_runs(uow_factory, build)
        now = build.t0 + timedelta(seconds=30)
        async with uow_factory.begin() as uow:
            usage = await uow.admission.usage(build.alice.tenant_id, now)
            later = await uow.admission.usage(build.alice.tenant_id, now + timedelta(days=1))
            other = await uow.admission.usage("tenant-without-runs", now)
        assert usage == TenantUsage(
            active_runs=1,
            materialized_last_minute=3,
            active_reserved_cost=Decimal("1.50"),
            daily_committed_cost=Decimal("0.25"),
            monthly_committed_cost=Decimal("0.75"),
        )
        assert later == TenantUsage(1, 0, Decimal("1.50"), Decimal(0), Decimal("0.75"))
        assert other == TenantUsage(0, 0, Decimal(0), Decimal(0), Decimal(0))

    async def test_lock_tenant_twice_in_one_transaction(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        async with uow_factory.begin() as uow:
            await uow.admission.lock_tenant(build.alice.tenant_id)
            await uow.admission.lock_tenant(build.alice.tenant_id)
            usage = await uow.admission.usage(build.alice.tenant_id, build.t0)
        assert usage.active_runs == 0


class TestPendingAccountsRepositoryContract:
    async def test_terminal_materialized_runs_until_accounted(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        sessions = [build.session(schedule_id=schedule.id) for _ in range(3)]
        done = _finished(build.run(sessions[0]), RunStatus.COMPLETED, timedelta(hours=1), "0")
        older = _finished(build.run(sessions[1]), RunStatus.FAILED, timedelta(hours=2), "0")
        queued = build.run(sessions[2])
        runs = (done, older, queued)
        occurrences = [
            build.materialized(schedule, build.t0 - timedelta(days=n), run.session_id, run.id)
            for n, run in enumerate(runs, start=1)
        ]
        async with uow_factory.begin() as uow:
            await uow.schedules.create(schedule, revision)
            for session in sessions:
                await uow.sessions.create(session)
            for run in runs:
                await uow.runs.create(run)
            for occurrence in occurrences:
                await uow.occurrences.insert(occurrence)
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.pending_accounts.pending(10) == [older.id, done.id]
            assert await uow.pending_accounts.pending(1) == [older.id]
            # A claim is pending's batch (what other claims hold aside, ADR 2221).
            assert await uow.pending_accounts.claim(10) == [older.id, done.id]
            assert await uow.pending_accounts.claim(1) == [older.id]
        accounted = ProcessEvent(
            id=build.ids.next(),
            tenant_id=schedule.tenant_id,
            principal_id=schedule.principal_id,
            event_type=RUN_ACCOUNTED,
            actor="scheduler",
            payload={"occurrence_id": str(occurrences[1].id)},
            occurred_at=build.t0,
            schedule_id=schedule.id,
        )
        async with uow_factory.begin() as uow:
            await uow.events.append(accounted)
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.pending_accounts.pending(10) == [done.id]
