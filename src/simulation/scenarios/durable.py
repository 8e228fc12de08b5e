"""The durable lane of materialize_atomic as a simulator scenario: the server crashes.

``materialize.durable``: one due schedule (an older instant due too, so the
coalescing event is a crash point) and one real schedule worker, built once through
the composition root (least-privilege scheduler role, transient retry) on watched
connections. The worker makes two passes with the same objects. The crash sweep
(``Simulator.explore(mode="crash", kinds=(FaultKind.CRASH_SERVER,))``, on a durable
private cluster the simulator may crash) kills the postmaster after every write of the
materialization and restarts it; ``recovered`` reads what survived crash recovery
before any task moves again. The check:

* before COMMIT nothing survived (no row in any table the materialization writes) and
  the schedule is still due (``next_fire_at`` unchanged, ACTIVE);
* after COMMIT the occurrence, session, run, checkpoint and events all survived
  (one complete linked occurrence, the schedule advanced);
* either way the same worker object reconnected and continued: it ended normally,
  decided the instant exactly once over its passes with no isolated error, and the
  final ledger holds exactly one complete occurrence.

``split_commit=True`` (``DURABLE_SPLIT``) is the test of the test: a materializer that
commits occurrence, session and run in a transaction of their own before the rest.

Not in ``SCENARIO_MODULES``: the scenario needs a server to crash, which the shared
server of ``scheduling-sim run`` never is; the gate check builds its own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduling.bootstrap import build_scheduler
from scheduling.ports.retry import RetrySettings
from scheduling.service import materializer as m
from scheduling.service.materializer import MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from scheduling.testing import storage_over
from simulation.engine.checkers.violation import Violation
from simulation.engine.errors import FaultKind
from simulation.engine.faults import Transition
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.provider.templates import migrated_template
from simulation.scenarios.materialize import (
    SCHEDULING_TABLES,
    STEPS,
    complete_ledger,
    rows_of,
    setup_at,
)
from simulation.worlds.service import scheduler_settings

WRITTEN = tuple(t for t in SCHEDULING_TABLES if t != "schedules")
# Prompt retries; virtual time, so the delays cost nothing. The restart is complete
# before any task moves, so the first retry already meets a server in service.
RETRY = RetrySettings(attempts=4, base_delay_seconds=0.05, max_delay_seconds=0.5)
PASSES = 2


def worker_for(*, split_commit: bool) -> Any:
    async def durable_worker(ctx: WorkerContext) -> None:
        """The scheduler role's worker, built once; two passes with the same objects."""
        engine = ctx.sqlalchemy_engine()
        role = build_scheduler(
            scheduler_settings(),
            clock=ctx.clock,
            ids=ctx.ids,
            probe=ctx.probe,
            # The test of the test: the named split-commit fault (scheduling.testing).
            storage=storage_over(engine, split_commit=split_commit),
            worker_settings=WorkerSettings(transient_retry=RETRY),
        )
        try:
            for n in range(PASSES):
                op = ctx.history.invoke("pass", n=n)
                report = await role.worker.run_once()
                op.ok(
                    {
                        "decided": sum(
                            r.status is MaterializeStatus.DECIDED for r in report.results
                        ),
                        "errors": sorted(report.errors.values()),
                        "retries": role.worker.metrics.transient_retries,
                    }
                )
        finally:
            await engine.dispose()

    return durable_worker


async def setup(world: ScenarioWorld) -> None:
    await setup_at(timedelta(seconds=30), skip_instants=1)(world)
    world.vars["baseline"] = await rows_of(world)


async def recovered(world: ScenarioWorld, transition: Transition) -> None:
    world.vars["survived"] = {"step": transition.step, "rows": await rows_of(world)}


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    sid, nominal, folded = world.vars["schedule_id"], world.vars["nominal"], world.vars["coalesced"]
    found: list[Violation] = []
    crashes = [t for t, kind in view.faults_fired if kind == FaultKind.CRASH_SERVER.value]
    if crashes:
        found += _survivors(world, crashes[0].step)
    if view.outcomes.get("a") != "ok":
        found.append(
            Violation("durable.continued", f"the worker ended {view.outcomes.get('a')}, not ok")
        )
    passes = [op for op in world.history.operations() if op.op == "pass"]
    decided = sum(int(op.value["decided"]) for op in passes if op.status == "ok")
    errors = [e for op in passes if op.status == "ok" for e in op.value["errors"]]
    if len(passes) != PASSES or any(op.status != "ok" for op in passes):
        found.append(Violation("durable.continued", f"passes: {[op.status for op in passes]}"))
    if decided != 1 or errors:
        found.append(
            Violation(
                "durable.once",
                f"the same worker decided {decided} time(s) with isolated errors {errors}",
            )
        )
    found += complete_ledger(await rows_of(world), sid, nominal, folded)
    return found


def _survivors(world: ScenarioWorld, step: str) -> list[Violation]:
    survived = world.vars.get("survived")
    if survived is None:
        return [Violation("durable.recovered", f"nothing was read after the crash at {step}")]
    rows: dict[str, list[dict[str, Any]]] = survived["rows"]
    if step == m.STEP_COMMITTED:
        return [
            Violation(v.invariant, f"after COMMIT, crash recovery lost: {v.message}", v.details)
            for v in complete_ledger(
                rows, world.vars["schedule_id"], world.vars["nominal"], world.vars["coalesced"]
            )
        ]
    baseline: dict[str, list[dict[str, Any]]] = world.vars["baseline"]
    kept = {t: len(rows[t]) - len(baseline[t]) for t in WRITTEN if len(rows[t]) != len(baseline[t])}
    found = []
    if kept:
        found.append(
            Violation("durable.atomic", f"the crash at {step} (before COMMIT) left rows: {kept}")
        )
    schedule = rows["schedules"][0]
    if schedule["next_fire_at"] != world.vars["first"] or schedule["state"] != "ACTIVE":
        found.append(
            Violation(
                "durable.atomic",
                f"after the crash at {step} the schedule is not due: next_fire_at"
                f" {schedule['next_fire_at']}, state {schedule['state']}",
            )
        )
    return found


def durable_scenario(*, split_commit: bool = False) -> Scenario:
    return Scenario(
        name="materialize.durable" + ("_split" if split_commit else ""),
        summary="the server crashes after every write of one materialization; the same"
        " worker reconnects and decides it once",
        setup=setup,
        workers={"a": worker_for(split_commit=split_commit)},
        check=check,
        recovered=recovered,
        steps=STEPS,
        fault_steps=STEPS,
        template=migrated_template,
        max_steps=80,
    )


DURABLE = durable_scenario()
DURABLE_SPLIT = durable_scenario(split_commit=True)
