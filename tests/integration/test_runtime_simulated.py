"""The run worker under the deterministic simulator on real PostgreSQL.

``claim_race``: two run workers race for one queued run in every interleaving the
exhaustive search distinguishes; exactly one executes it, once. ``crash``: a fault of
every kind after every named write of one execution (claim, start, charge, checkpoint,
finish); the quiet phase lets the lease expire and a fresh worker recovers. In every
execution the run ends COMPLETED having charged and performed each of its three model
calls exactly once, and checkpoint fencing tokens never go back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import SchedulingError
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings
from scheduling.testing import storage_over
from simulation.engine import evidence, targets
from simulation.engine.checkers.violation import Violation
from simulation.engine.errors import injected_fault_of
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.worlds.runtime import limits, run_worker, submission, submitter
from simulation.worlds.service import principal, seed_durable

pytestmark = pytest.mark.postgres

WHO = principal("sim-runner")
CAPACITY = QueueCapacity(4, 1, 1)
SETTINGS = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, poll_seconds=1)
STEPS = ("run.claimed", "run.started", "run.charged", "run.checkpointed", "run.finished")
MODEL_CALLS = 3


def _template(server: Any) -> str:
    from simulation.provider.pytest_plugin import build_migrated, migrated_template_key

    name: str = server.ensure_template(migrated_template_key(), build_migrated)
    return name


async def setup(world: ScenarioWorld) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(world.url, pool_size=2)
    try:
        await seed_durable(admin, [WHO], at=world.clock.now())
        run = await submitter(admin, world.clock).submit(
            WHO, submission(f"steps:{MODEL_CALLS}", limits=limits(max_steps=MODEL_CALLS))
        )
        world.vars["run_id"] = run.id
    finally:
        await admin.dispose()


async def worker(ctx: WorkerContext) -> None:
    engine = ctx.sqlalchemy_engine()
    op = ctx.history.invoke("run_once", run=str(ctx.vars["run_id"]))
    try:
        w = run_worker(
            storage_over(engine),
            ctx.clock,
            ctx.name,
            capacity=CAPACITY,
            settings=SETTINGS,
            probe=ctx.probe,
        )
        outcome = await w.run_once()
    except (SchedulingError, asyncpg.PostgresError, OSError, ConnectionError) as exc:
        if injected_fault_of(exc) is None and not isinstance(exc, SchedulingError):
            raise
        op.info(type(exc).__name__)
        return
    except Exception as exc:
        if injected_fault_of(exc) is None:
            raise
        op.info(type(exc).__name__)
        return
    finally:
        await engine.dispose()
    op.ok(None if outcome is None else {"status": outcome.status, "lost": outcome.lease_lost})


async def recover(world: ScenarioWorld, view: ExecutionView) -> None:
    """Let any crashed lease expire, then drain the queue with a fault-free worker."""
    world.clock.advance(SETTINGS.lease_seconds + 1)
    admin = PostgresUnitOfWorkFactory.from_url(world.url, pool_size=2)
    try:
        w = run_worker(admin, world.clock, "recovery", capacity=CAPACITY, settings=SETTINGS)
        while await w.run_once() is not None:
            pass
    finally:
        await admin.dispose()


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    conn = await world.connect()
    run_id = world.vars["run_id"]
    run = await conn.fetchrow("SELECT status, usage::text AS usage FROM runs WHERE id = $1", run_id)
    events = await conn.fetch(
        "SELECT event_type FROM session_events WHERE run_id = $1 ORDER BY seq", run_id
    )
    tokens = [
        r["fencing_token"]
        for r in await conn.fetch(
            "SELECT fencing_token FROM run_checkpoints WHERE run_id = $1 ORDER BY seq", run_id
        )
    ]
    found: list[Violation] = []
    if run is None or run["status"] != "COMPLETED":
        found.append(Violation("run.completed", f"run ended {run and run['status']}"))
    elif f'"steps": {MODEL_CALLS}' not in run["usage"]:
        found.append(Violation("run.charged_once", f"usage {run['usage']}"))
    kinds = [e["event_type"] for e in events]
    if kinds.count("model.called") != MODEL_CALLS:
        found.append(Violation("run.performed_once", f"events {kinds}"))
    if kinds.count("run.completed") != 1:
        found.append(Violation("run.finished_once", f"events {kinds}"))
    if tokens != sorted(tokens):
        found.append(Violation("run.fenced", f"checkpoint tokens {tokens}"))
    winners = [
        op
        for op in world.history.operations()
        if isinstance(op.value, dict) and op.value.get("status") == "COMPLETED"
    ]
    if len(winners) > 1:
        found.append(Violation("run.one_executor", f"{len(winners)} workers completed it"))
    return found


CLAIM_RACE = Scenario(
    name="runtime.claim_race",
    summary="two run workers race for one queued run",
    setup=setup,
    workers={"a": worker, "b": worker},
    check=check,
    steps=STEPS,
    template=_template,
    max_steps=80,
)

CRASH = Scenario(
    name="runtime.crash",
    summary="a fault after every write of one run execution; a fresh worker recovers",
    setup=setup,
    workers={"a": worker},
    quiet=recover,
    check=check,
    steps=STEPS,
    fault_steps=STEPS,
    template=_template,
    max_steps=60,
)


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(targets.fresh_databases(server, template), store=FailureStore(tmp / "f"))


async def test_two_workers_race_for_one_run(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        CLAIM_RACE, mode="exhaustive", seed=3, executions=60
    )
    assert not result.failures, evidence.failure_report(result)
    assert result.interleavings_explored >= 2
    assert result.reached.get("run.finished", 0) == result.interleavings_explored


async def test_a_crash_after_every_write_is_recovered(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        CRASH, mode="crash", seed=3, kinds=CLIENT_FAULT_KINDS
    )
    assert not result.failures, evidence.failure_report(result)
    fired = set(result.faults_fired)
    expected = {f"{kind.value}@{step}" for kind in CLIENT_FAULT_KINDS for step in STEPS}
    assert expected <= fired, sorted(expected - fired)
