"""A stand-in materializer on a toy copy of the ledger tables, for the crash machinery.

Not the product: a few lines that write an occurrence, its session and its run the
way the spec's materialization transaction does, in schema ``sim_toy``. Two workers
race on one due schedule; the crash sweep injects every fault kind after every
write; the quiet phase reruns one scan without faults (recovery); the check is the
ledger checker over the rows. ``atomic`` does it in one transaction and passes;
``split`` commits the occurrence before its session and run, and the sweep finds the
partial occurrence a crash leaves behind. A template for the real gate scenarios.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduling.ports import NullProbe
from simulation.engine.checkers.ledger import check_ledger
from simulation.engine.checkers.violation import Violation
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.scenarios import register

NOMINAL = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OCCURRENCE, SESSION, RUN, ADVANCED = (
    "toy.occurrence_inserted",
    "toy.session_inserted",
    "toy.run_inserted",
    "toy.schedule_advanced",
)
COMMITTED = "toy.committed"

SCHEMA = """
DROP SCHEMA IF EXISTS sim_toy CASCADE;
CREATE SCHEMA sim_toy;
CREATE TABLE sim_toy.schedules (id uuid PRIMARY KEY, next_fire_at timestamptz NOT NULL);
CREATE TABLE sim_toy.sessions (id uuid PRIMARY KEY, metadata jsonb NOT NULL);
CREATE TABLE sim_toy.runs (id uuid PRIMARY KEY, session_id uuid NOT NULL
    REFERENCES sim_toy.sessions(id));
CREATE TABLE sim_toy.schedule_occurrences (
    id uuid PRIMARY KEY, schedule_id uuid NOT NULL REFERENCES sim_toy.schedules(id),
    schedule_revision int NOT NULL, nominal_fire_at timestamptz NOT NULL,
    disposition text NOT NULL,
    session_id uuid REFERENCES sim_toy.sessions(id) DEFERRABLE INITIALLY DEFERRED,
    run_id uuid REFERENCES sim_toy.runs(id) DEFERRABLE INITIALLY DEFERRED,
    reason_code text, authority_version text, materialized_at timestamptz,
    links_erased_at timestamptz, created_at timestamptz NOT NULL,
    UNIQUE (schedule_id, nominal_fire_at));
"""


async def setup(world: ScenarioWorld) -> None:
    conn = await world.connect()
    schedule_id = world.ids.new_uuid()
    world.vars["schedule_id"] = schedule_id
    await conn.execute(SCHEMA)
    await conn.execute("INSERT INTO sim_toy.schedules VALUES ($1, $2)", schedule_id, NOMINAL)
    await conn.close()


async def _scan(conn: Any, ctx_ids: Any, probe: Any, now: datetime, sid: Any, split: bool) -> str:
    occ, session, run = ctx_ids.new_uuid(), ctx_ids.new_uuid(), ctx_ids.new_uuid()
    tx = conn.transaction()
    await tx.start()
    try:
        row = await conn.fetchrow(
            "SELECT next_fire_at FROM sim_toy.schedules WHERE id = $1 AND next_fire_at <= $2 "
            "FOR UPDATE SKIP LOCKED",
            sid,
            now,
        )
        if row is None:
            await tx.commit()
            return "nothing due"
        nominal = row["next_fire_at"]
        # The split bug writes the occurrence without links and commits it first.
        links = (None, None) if split else (session, run)
        status = await conn.execute(
            "INSERT INTO sim_toy.schedule_occurrences (id, schedule_id, schedule_revision, "
            "nominal_fire_at, disposition, session_id, run_id, authority_version, "
            "materialized_at, created_at) VALUES ($1, $2, 1, $3, 'MATERIALIZED', $4, $5, "
            "'v1', $6, $6) ON CONFLICT (schedule_id, nominal_fire_at) DO NOTHING",
            occ, sid, nominal, *links, now,
        )  # fmt: skip
        await probe.step(OCCURRENCE)
        if status.endswith(" 0"):
            await tx.commit()
            return "already materialized"
        if split:
            await tx.commit()
            tx = conn.transaction()
            await tx.start()
        metadata = json.dumps({"schedule_id": str(sid), "occurrence_id": str(occ)})
        await conn.execute("INSERT INTO sim_toy.sessions VALUES ($1, $2)", session, metadata)
        await probe.step(SESSION)
        await conn.execute("INSERT INTO sim_toy.runs VALUES ($1, $2)", run, session)
        if split:
            await conn.execute(
                "UPDATE sim_toy.schedule_occurrences SET session_id = $2, run_id = $3 "
                "WHERE id = $1",
                occ, session, run,
            )  # fmt: skip
        await probe.step(RUN)
        await conn.execute(
            "UPDATE sim_toy.schedules SET next_fire_at = $2 WHERE id = $1",
            sid,
            nominal + timedelta(days=1),
        )
        await probe.step(ADVANCED)
        await tx.commit()
        return "materialized"
    except BaseException:
        if not conn.is_closed():
            await tx.rollback()
        raise


def _worker(split: bool) -> Any:
    async def worker(ctx: WorkerContext) -> None:
        conn = await ctx.connect()
        sid = ctx.vars["schedule_id"]
        op = ctx.history.invoke("scan", schedule=str(sid))
        result = await _scan(conn, ctx.ids, ctx.probe, ctx.clock.now(), sid, split)
        await ctx.probe.step(COMMITTED)
        op.ok(result)

    return worker


def _quiet(split: bool) -> Any:
    async def quiet(world: ScenarioWorld, view: ExecutionView) -> None:
        conn = await world.connect()
        await _scan(
            conn, world.ids.fork("recovery"), NullProbe(), world.clock.now(),
            world.vars["schedule_id"], split,
        )  # fmt: skip
        await conn.close()

    return quiet


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    conn = await world.connect()
    occurrences = [dict(r) for r in await conn.fetch("SELECT * FROM sim_toy.schedule_occurrences")]
    runs = [dict(r) for r in await conn.fetch("SELECT * FROM sim_toy.runs")]
    sessions = [
        {"id": r["id"], "metadata": json.loads(r["metadata"])}
        for r in await conn.fetch("SELECT * FROM sim_toy.sessions")
    ]
    await conn.close()
    return check_ledger(
        occurrences, runs, sessions, expected={world.vars["schedule_id"]: [NOMINAL]}
    )


def _scenario(name: str, summary: str, split: bool) -> Scenario:
    return Scenario(
        name=name,
        summary=summary,
        setup=setup,
        workers={"a": _worker(split), "b": _worker(split)},
        quiet=_quiet(split),
        check=check,
        steps=(OCCURRENCE, SESSION, RUN, ADVANCED, COMMITTED),
        start=NOMINAL + timedelta(minutes=1),
        allow_worker_errors=False,
    )


ATOMIC = register(
    _scenario(
        "demo.ledger_atomic",
        "toy materializer, one transaction: every crash point leaves a whole ledger",
        split=False,
    )
)
SPLIT = register(
    _scenario(
        "demo.ledger_split",
        "toy materializer committing the occurrence first: a crash leaves it partial",
        split=True,
    )
)
