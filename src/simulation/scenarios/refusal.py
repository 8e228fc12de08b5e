"""A server that refuses connections for a while, met mid-materialization (ADR 2220).

``materialize.refusal``: one due schedule and one real schedule worker, built once
through the composition root (least-privilege scheduler role, transient retry with
its outage budget) on watched connections; it makes two passes with the same
objects. The sweep (``Simulator.explore(mode="crash",
kinds=(FaultKind.REFUSE_CONNECTIONS,))``, any server) injects the simulator's
``refuse_connections`` fault after every write of the materialization: every
connection is dropped (the open transaction rolls back) and, for
``REFUSAL_SECONDS`` of virtual time, every new connection raises asyncpg's own 57P03
"the database system is starting up". The check (``rule.connection.refusal_waited_out``):

* the window was met (the worker retried) and ended: the worker ended normally;
* nothing lost, duplicated or early: the ledger holds exactly one complete
  MATERIALIZED occurrence for the due instant, created no earlier than it;
* the same worker decided it exactly once, with no isolated error, nothing left
  unserved (``PassReport.unavailable``) and nothing set aside for the isolation
  backoff (``PassReport.deferred`` empty on the second pass).

``RETRY_COUNTED`` is the test of the test: the same worker with ``outage_seconds = 0``
(a refusal counts as one of four attempts of at most 0.5 s, shorter than the window).

Not in ``SCENARIO_MODULES``: it is a sweep over fault points, run by its gate check.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduling.bootstrap import build_scheduler
from scheduling.ports.retry import RetrySettings
from scheduling.service.materializer import MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from scheduling.testing import storage_over
from simulation.engine.checkers.violation import Violation
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.provider.templates import migrated_template
from simulation.scenarios.materialize import STEPS, complete_ledger, rows_of, setup_at
from simulation.worlds.service import scheduler_settings

# Virtual time: the delays cost nothing. The window (interleaver.REFUSAL_SECONDS, 5 s)
# outlasts the counted attempts (4 of at most 0.5 s) but not the outage budget.
RETRY = RetrySettings(
    attempts=4, base_delay_seconds=0.05, max_delay_seconds=0.5, outage_seconds=30.0
)
RETRY_COUNTED = RetrySettings(
    attempts=4, base_delay_seconds=0.05, max_delay_seconds=0.5, outage_seconds=0.0
)
PASSES = 2
BACKOFF_SECONDS = 60.0


def worker_for(retry: RetrySettings) -> Any:
    async def refusal_worker(ctx: WorkerContext) -> None:
        """The scheduler role's worker, built once; two passes with the same objects."""
        engine = ctx.sqlalchemy_engine()
        role = build_scheduler(
            scheduler_settings(),
            clock=ctx.clock,
            ids=ctx.ids,
            probe=ctx.probe,
            storage=storage_over(engine),
            worker_settings=WorkerSettings(
                transient_retry=retry, failure_backoff_seconds=BACKOFF_SECONDS
            ),
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
                        "unavailable": sorted(report.unavailable.values()),
                        "deferred": len(report.deferred),
                        "retries": role.worker.metrics.transient_retries,
                    }
                )
        finally:
            await engine.dispose()

    return refusal_worker


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    sid, nominal = world.vars["schedule_id"], world.vars["nominal"]
    found: list[Violation] = []
    if view.outcomes.get("a") != "ok":
        found.append(
            Violation("refusal.waited_out", f"the worker ended {view.outcomes.get('a')}, not ok")
        )
    passes = [op for op in world.history.operations() if op.op == "pass"]
    if len(passes) != PASSES or any(op.status != "ok" for op in passes):
        found.append(Violation("refusal.waited_out", f"passes: {[op.status for op in passes]}"))
    done = [op.value for op in passes if op.status == "ok"]
    decided = sum(int(v["decided"]) for v in done)
    errors = [e for v in done for e in v["errors"]]
    unserved = [u for v in done for u in v["unavailable"]]
    if decided != 1 or errors or unserved:
        found.append(
            Violation(
                "refusal.once",
                f"the worker decided {decided} time(s); isolated errors {errors},"
                f" unserved {unserved}",
            )
        )
    if any(int(v["deferred"]) for v in done):
        found.append(
            Violation("refusal.not_set_aside", "the refusal set the schedule aside (deferred)")
        )
    if view.faults_fired and done and not any(int(v["retries"]) for v in done):
        found.append(Violation("refusal.met", "the worker never met the refusal window"))
    rows = await rows_of(world)
    found += complete_ledger(rows, sid, nominal, world.vars["coalesced"])
    early = [o for o in rows["schedule_occurrences"] if o["created_at"] < o["nominal_fire_at"]]
    if early:
        found.append(Violation("refusal.not_early", f"{len(early)} occurrence(s) before due"))
    return found


def _scenario(name: str, retry: RetrySettings) -> Scenario:
    return Scenario(
        name=name,
        summary="the server refuses connections (57P03) for 5 s after every write of one"
        " materialization; the same worker waits it out and decides it once, nothing set"
        " aside",
        setup=setup_at(timedelta(seconds=30)),
        workers={"a": worker_for(retry)},
        check=check,
        steps=STEPS,
        fault_steps=STEPS,
        template=migrated_template,
        max_steps=200,
    )


REFUSAL = _scenario("materialize.refusal", RETRY)
REFUSAL_COUNTED = _scenario("materialize.refusal_counted", RETRY_COUNTED)
