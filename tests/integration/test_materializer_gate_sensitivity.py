"""Tests of the tests: the race and crash scenarios fail against weakened materializers.

* Without the row lock (a plain read instead of ``FOR UPDATE SKIP LOCKED``), the
  exhaustive search of ``materialize.once`` finds the interleaving where the second
  worker decides the instant again: the occurrence key and the schedule's CAS keep the
  ledger exact, but that worker fails instead of returning NOT_DUE (a second effect).
* A materializer that commits half-way (the occurrence and its run, then the advance
  and its events in a second transaction) leaves a partial occurrence after a crash;
  the crash sweep of ``materialize.atomic`` reports it.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.firing import Decision
from scheduling.service.materializer import STEP_DECIDED, ScheduleMaterializer
from scheduling.storage import Storage
from scheduling.testing import RoleOverride, role_names
from simulation.engine import targets
from simulation.engine.errors import FaultKind
from simulation.engine.scenario import WorkerContext
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios import materialize as scenarios

pytestmark = pytest.mark.postgres


class UnlockedFactory(PostgresUnitOfWorkFactory):
    """Units of work whose hot-path due lock is a plain read (the mutant)."""

    def begin(self, principal: Any = None, *, tenant_id: str | None = None) -> PostgresUnitOfWork:
        uow = super().begin(principal, tenant_id=tenant_id)
        schedules = uow.schedules

        async def lock_due(
            schedule_id: UUID, now: datetime, *, lock_admission: bool = True
        ) -> tuple[Schedule, ScheduleRevision] | None:
            row = await schedules.get(schedule_id, None)
            due = row.state is ScheduleState.ACTIVE and row.next_fire_at is not None
            if not due or row.next_fire_at > now:  # type: ignore[operator]
                return None
            return row, await schedules.get_revision(schedule_id, row.current_revision, None)

        uow.materialization.lock_due = lock_due  # type: ignore[method-assign]
        return uow


def _over(engine: Any, factory: type[PostgresUnitOfWorkFactory]) -> Storage:
    """The scenario's storage with the scheduler's units of work from ``factory``."""
    mutant = factory(engine, assume_role=role_names().scheduler)
    return RoleOverride(scenarios.storage_on(engine), "scheduler", mutant)


async def unlocked_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        result = await scenarios.build_materializer(
            _over(engine, UnlockedFactory), ctx.clock, ctx.ids, ctx.probe
        ).materialize(ctx.vars["schedule_id"])
        op.ok(scenarios._summary(result))
    except Exception as exc:
        op.info(type(exc).__name__)
    finally:
        await engine.dispose()


class HalfCommitting(ScheduleMaterializer):
    """Writes the occurrence and its run, commits, then writes the advance and its
    events in a second transaction (the decision's one statement split in two)."""

    async def _write(self, uow: Any, decision: Decision) -> ScheduleOccurrence:
        stored: ScheduleOccurrence = await uow.occurrences.insert(decision.occurrence)
        assert decision.run is not None
        await uow.materialization.create_run(decision.run)
        await uow.tx.execute(text("COMMIT"))
        await uow.tx.execute(text("BEGIN"))
        await uow.materialization.advance(decision.advance, decision.events)
        await self._probe.step(STEP_DECIDED)
        return stored


async def half_committing_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    base = scenarios.build_materializer(scenarios.storage_on(engine), ctx.clock, ctx.ids, ctx.probe)
    mutant = HalfCommitting.__new__(HalfCommitting)
    mutant.__dict__.update(base.__dict__)
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        result = await mutant.materialize(ctx.vars["schedule_id"])
        op.ok(scenarios._summary(result))
    except Exception as exc:
        op.info(type(exc).__name__)
    finally:
        await engine.dispose()


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(targets.fresh_databases(server, template), store=FailureStore(tmp))


async def test_once_scenario_finds_the_second_decision_without_the_lock(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = dataclasses.replace(
        scenarios.ONCE,
        name="materialize.once_mutant",
        workers={"a": unlocked_worker, "b": unlocked_worker},
        allow_worker_errors=True,
    )
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="exhaustive", executions=200
    )
    assert result.failures, "the weakened materializer was not caught"
    violations = [v for f in result.failures for v in f.violations]
    # Caught for the race, not for a broken mutant: every execution still decided the
    # instant once, and the loser raised the schedule's stale CAS.
    assert {v.invariant for v in violations} == {"materialize.no_second_effect"}, violations
    assert any("info 'ConflictError'" in v.message for v in violations), violations


async def test_atomic_scenario_finds_the_partial_commit(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = dataclasses.replace(
        scenarios.ATOMIC,
        name="materialize.atomic_mutant",
        workers={"a": half_committing_worker},
        allow_worker_errors=True,
    )
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="crash", kinds=(FaultKind.RAISE,)
    )
    assert result.failures, "the half-committing materializer was not caught"
    messages = [v.message for f in result.failures for v in f.violations]
    assert any("left rows" in m for m in messages), messages


class EagerFactory(PostgresUnitOfWorkFactory):
    """Units of work whose due scan looks two microseconds ahead (the mutant)."""

    def begin(self, principal: Any = None, *, tenant_id: str | None = None) -> PostgresUnitOfWork:
        uow = super().begin(principal, tenant_id=tenant_id)
        original = uow.materialization.lock_due

        async def lock_due(
            schedule_id: UUID, now: datetime, *, lock_admission: bool = True
        ) -> tuple[Schedule, ScheduleRevision] | None:
            early = now + timedelta(microseconds=2)
            return await original(schedule_id, early, lock_admission=lock_admission)

        uow.materialization.lock_due = lock_due  # type: ignore[method-assign]
        return uow


async def eager_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        result = await scenarios.build_materializer(
            _over(engine, EagerFactory), ctx.clock, ctx.ids, ctx.probe
        ).materialize(ctx.vars["schedule_id"])
        op.ok(scenarios._summary(result))
    finally:
        await engine.dispose()


async def test_not_early_scenario_catches_an_eager_scan(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = dataclasses.replace(
        scenarios.NOT_EARLY, name="materialize.not_early_mutant", workers={"early": eager_worker}
    )
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="exhaustive", executions=20
    )
    assert result.failures, "the eager scan was not caught"
    violations = [v for f in result.failures for v in f.violations]
    # Caught for the early scan, not for a broken mutant (no worker error).
    invariants = {v.invariant for v in violations}
    assert "materialize.not_early" in invariants, violations
    assert "worker.error" not in invariants, violations
