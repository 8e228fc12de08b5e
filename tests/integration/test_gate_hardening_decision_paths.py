"""Test of the test: the crash sweep of the decisions without a run
(``gate.schedule.materialize_atomic``, ``test_materialize_paths``) catches a
materializer that commits the MISSED occurrence in a transaction of its own and
writes the coalescing event and the ``next_fire_at`` advance in a second one."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from gates.checks.test_materialize_paths import crash_sweep, simulator
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.ports.firing import Decision
from scheduling.service.materializer import STEP_DECIDED, ScheduleMaterializer
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import WorkerContext
from simulation.provider import DatabaseServer
from simulation.scenarios import materialize as scenarios
from simulation.scenarios.materialize_paths import NO_RUN_STEPS, PATH_SCENARIOS

pytestmark = pytest.mark.postgres


class SplitDecision(ScheduleMaterializer):
    """Commits the occurrence, then advances, audits and writes the outcome row in a
    second transaction (the decision's one statement split in two)."""

    async def _write(self, uow: Any, decision: Decision) -> ScheduleOccurrence:
        stored: ScheduleOccurrence = await uow.occurrences.insert(decision.occurrence)
        await uow.tx.execute(text("COMMIT"))
        await uow.tx.execute(text("BEGIN"))
        await uow.materialization.advance(decision.advance, decision.events)
        if decision.outbox is not None:
            await uow.outbox.append(decision.outbox)
        await self._probe.step(STEP_DECIDED)
        return stored


async def split_worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    base = scenarios.build_materializer(scenarios.storage_on(engine), ctx.clock, ctx.ids, ctx.probe)
    mutant = SplitDecision.__new__(SplitDecision)
    mutant.__dict__.update(base.__dict__)
    op = ctx.history.invoke("materialize", schedule=str(ctx.vars["schedule_id"]))
    try:
        op.ok(scenarios._summary(await mutant.materialize(ctx.vars["schedule_id"])))
    except Exception as exc:
        op.info(type(exc).__name__)
    finally:
        await engine.dispose()


async def test_the_right_materializer_passes_every_path(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    result = await crash_sweep(
        simulator(pg_server, pg_template, tmp_path), PATH_SCENARIOS["missed"], 3
    )
    assert not result.failures
    # Three steps, fewer than the four kinds: every kind after every step (quick too).
    faults = len(NO_RUN_STEPS) * len(CLIENT_FAULT_KINDS)
    assert result.executions == 1 + faults  # discovery + each fault
    assert len(result.faults_fired) == faults


async def test_a_missed_decision_split_over_two_transactions_is_caught(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = dataclasses.replace(
        PATH_SCENARIOS["missed"],
        name="materialize.atomic_missed_split",
        workers={"a": split_worker},
        allow_worker_errors=True,
    )
    result = await crash_sweep(simulator(pg_server, pg_template, tmp_path), mutant, 3)
    messages = [v.message for f in result.failures for v in f.violations]
    # A fault after the decision's write finds the MISSED occurrence committed without
    # its coalescing event, advance and outbox row.
    assert any("left rows" in msg and "schedule_occurrences" in msg for msg in messages), messages
    assert any("events [], want" in msg or "did not advance" in msg for msg in messages), messages
