"""Tests of the tests: the race and crash scenarios fail against weakened materializers.

* Without the row lock (a plain read instead of ``FOR UPDATE SKIP LOCKED``) and without
  the occurrence key, the exhaustive search of ``materialize.once`` finds a duplicate.
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
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.firing import Decision
from scheduling.service.materializer import STEP_DECIDED, ScheduleMaterializer
from simulation.engine import targets
from simulation.engine.errors import FaultKind
from simulation.engine.scenario import ScenarioWorld, WorkerContext
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios import materialize as scenarios

pytestmark = pytest.mark.postgres


class UnlockedFactory(PostgresUnitOfWorkFactory):
    """Units of work whose due lock is a plain read (the mutant)."""

    def begin(self, principal: Any = None, *, tenant_id: str | None = None) -> PostgresUnitOfWork:
        uow = super().begin(principal, tenant_id=tenant_id)
        schedules = uow.schedules

        async def lock_due(schedule_id: UUID, now: datetime) -> Schedule | None:
            row = await schedules.get(schedule_id, None)
            due = row.state is ScheduleState.ACTIVE and row.next_fire_at is not None
            return row if due and row.next_fire_at <= now else None  # type: ignore[operator]

        schedules.lock_due = lock_due  # type: ignore[method-assign]
        return uow


async def unkeyed_setup(world: ScenarioWorld) -> None:
    await scenarios.setup(world)
    conn = await world.connect()
    await conn.execute(
        "ALTER TABLE schedule_occurrences"
        " DROP CONSTRAINT uq_schedule_occurrences_schedule_id_nominal_fire_at"
    )
    await conn.close()


async def unlocked_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    factory = UnlockedFactory(engine, assume_role=scenarios.role_names().scheduler)
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        result = await scenarios.build_materializer(
            factory, ctx.clock, ctx.ids, ctx.probe
        ).materialize(ctx.vars["schedule_id"])
        op.ok(scenarios._summary(result))
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


async def test_once_scenario_finds_the_duplicate_without_lock_and_key(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = dataclasses.replace(
        scenarios.ONCE,
        name="materialize.once_mutant",
        setup=unkeyed_setup,
        workers={"a": unlocked_worker, "b": unlocked_worker},
    )
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="exhaustive", executions=200
    )
    assert result.failures, "the weakened materializer was not caught"
    invariants = {v.invariant for f in result.failures for v in f.violations}
    assert invariants & {"ledger.unique", "materialize.exactly_one", "materialize.one_winner"}


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
        schedules = uow.schedules
        original = schedules.lock_due

        async def lock_due(schedule_id: UUID, now: datetime) -> Schedule | None:
            return await original(schedule_id, now + timedelta(microseconds=2))

        schedules.lock_due = lock_due  # type: ignore[method-assign]
        return uow


async def eager_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    factory = EagerFactory(engine, assume_role=scenarios.role_names().scheduler)
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        result = await scenarios.build_materializer(
            factory, ctx.clock, ctx.ids, ctx.probe
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
