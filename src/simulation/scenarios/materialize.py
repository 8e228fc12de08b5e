"""Materializer scenarios on the migrated schema (the race and crash gates use them).

* ``materialize.once`` - two schedule workers race on one due daily schedule;
* ``materialize.once3`` - the same with three workers (random walks);
* ``materialize.once_unpruned`` - ``materialize.once`` without footprints (no pruning),
  to cross-check that the footprints' pruning hides no distinct outcome;
* ``materialize.atomic`` - one worker, meant for the crash sweep (a fault of every kind
  after every write); the quiet phase first records what survived the crash, then
  retries without faults.

Each worker is the real ``ScheduleMaterializer`` over the least-privilege scheduler role
(``SET LOCAL ROLE``) on watched connections, with the durable principal directory and
agent registry and the PostgreSQL admission controller. The check applies the
simulator's ledger checker plus exact counts: one occurrence, session, run, seed
checkpoint, creation-event sequence and ``schedule.occurrence.materialized`` event.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from scheduling.bootstrap import build_scheduler
from scheduling.domain.cadence import parse_cadence
from scheduling.domain.recurrence.engine import next_after
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe
from scheduling.service import materializer as m
from scheduling.service.materializer import MaterializeResult, ScheduleMaterializer
from scheduling.storage import Storage
from scheduling.testing import open_storage, storage_over
from simulation.engine.checkers import check_ledger
from simulation.engine.checkers.violation import Violation
from simulation.engine.errors import injected_fault_of
from simulation.engine.scenario import (
    ExecutionView,
    Footprint,
    Scenario,
    ScenarioWorld,
    WorkerContext,
)
from simulation.provider.templates import migrated_template
from simulation.scenarios import register
from simulation.worlds.service import (
    build_world,
    definition,
    principal,
    scheduler_settings,
    seed_durable,
)

# The steps of a MATERIALIZED transaction, in the order the materializer reaches them.
STEPS = (m.STEP_LOCKED, m.STEP_ADMISSION, m.STEP_DECIDED, m.STEP_COMMITTED)
BEFORE_COMMIT = STEPS[:-1]
SCHEDULING_TABLES = (
    "schedules",
    "schedule_occurrences",
    "sessions",
    "session_events",
    "runs",
    "run_checkpoints",
    "process_events",
)

# What the code after each step may touch (over-approximated; see docs/simulator.md).
# The row lock taken after sim.start counts as a write of ``schedules``; the COMMIT after
# the last event makes every write visible, so that step writes everything.
FOOTPRINTS = {
    # The lock reads the current revision in the same statement (ADR 1700) and takes
    # the tenant's admission lock after the row lock (ADR 2250).
    "sim.start": Footprint.of(
        reads=["schedules", "schedule_occurrences", "schedule_revisions"],
        writes=["schedules", "admission_lock"],
    ),
    m.STEP_LOCKED: Footprint.of(
        reads=[
            "schedule_revisions",
            "principals",
            "agent_versions",
            "schedule_occurrences",
            "runs",
        ],
        writes=["admission_lock"],
    ),
    # The usage read, then the decision in one statement (ADR 2330): the occurrence,
    # session, its three events, run, checkpoint, the advance and its audit events.
    m.STEP_ADMISSION: Footprint.of(
        reads=["runs", "schedule_occurrences"], writes=[*SCHEDULING_TABLES]
    ),
    # The COMMIT (after an instant already decided, the advance first).
    m.STEP_DECIDED: Footprint.of(
        writes=[*SCHEDULING_TABLES, "admission_lock", "schedule_revisions"],
    ),
    m.STEP_ADVANCED: Footprint.of(
        writes=[*SCHEDULING_TABLES, "admission_lock", "schedule_revisions"],
    ),
    m.STEP_COMMITTED: Footprint.of(),
}


def _template(server: Any) -> str:
    return migrated_template(server)


def storage_on(engine: Any) -> Storage:
    """The storage over the simulator's watched ``engine`` (roles ``SET LOCAL ROLE``)."""
    return storage_over(engine)


def build_materializer(
    storage: Storage, clock: Clock, ids: IdGenerator, probe: Probe
) -> ScheduleMaterializer:
    """The scheduler role's materializer as production startup builds it."""
    role = build_scheduler(scheduler_settings(), clock=clock, ids=ids, probe=probe, storage=storage)
    return role.materializer


def setup_at(offset: timedelta, *, skip_instants: int = 0) -> Any:
    """A setup whose clock ends ``offset`` after the schedule's (``skip_instants`` + 1)th
    instant, so ``skip_instants`` older instants are due and coalesced."""

    async def setup_offset(world: ScenarioWorld) -> None:
        await _create(world)
        cadence = parse_cadence(world.vars["cadence"])
        nominal = world.vars["first"]
        for _ in range(skip_instants):
            following = next_after(cadence, nominal)
            assert following is not None
            nominal = following
        world.vars["nominal"] = nominal
        world.vars["coalesced"] = skip_instants
        world.clock.advance_to(nominal + offset)

    return setup_offset


async def setup(world: ScenarioWorld) -> None:
    """One due schedule, 30 s past its first instant (nothing to coalesce)."""
    await setup_at(timedelta(seconds=30))(world)


async def _create(world: ScenarioWorld) -> None:
    """One principal, the agent, one daily schedule created through the service (API
    role) before its first instant."""
    who = principal("sim-owner")
    storage = open_storage(world.url, pool_size=2)
    try:
        await seed_durable(storage.as_role("trusted"), [who], at=world.clock.now())
        # The service's own virtual clock starts at this execution's instant; its ids
        # are seeded, so the setup is a function of the code alone.
        service = build_world(storage, start=world.clock.now()).service
        created = await service.create(who, "sim-1", definition())
    finally:
        await storage.close()
    fire = created.schedule.next_fire_at
    assert fire is not None
    world.vars["schedule_id"] = created.schedule.id
    world.vars["first"] = fire
    world.vars["cadence"] = dict(definition().cadence)


async def materialize_worker(ctx: WorkerContext) -> None:
    """One schedule worker pass over the one schedule.

    Any exception leaves the operation indeterminate (``info``). Only an injected
    fault is swallowed: any other error - a SchedulingError included - is re-raised,
    so the runner reports ``worker.error`` unless a fault was fired on this task (a
    terminated backend surfaces as a driver error, not as the injected exception)."""
    engine = ctx.sqlalchemy_engine()
    sid: UUID = ctx.vars["schedule_id"]
    op = ctx.history.invoke("materialize", schedule=str(sid))
    try:
        result = await build_materializer(
            storage_on(engine), ctx.clock, ctx.ids, ctx.probe
        ).materialize(sid)
    except Exception as exc:
        op.info(type(exc).__name__)
        if injected_fault_of(exc) is None:
            raise
        return
    finally:
        await engine.dispose()
    op.ok(_summary(result))


def _summary(result: MaterializeResult) -> dict[str, Any]:
    occ = result.occurrence
    return {
        "status": result.status.value,
        "occurrence_id": None if occ is None else str(occ.id),
        "run_id": None if result.run_id is None else str(result.run_id),
    }


async def rows_of(world: ScenarioWorld) -> dict[str, list[dict[str, Any]]]:
    """Every row of the scheduling tables, through a new connection."""
    conn = await world.connect()
    try:
        out: dict[str, list[dict[str, Any]]] = {}
        for table in SCHEDULING_TABLES:
            out[table] = [dict(r) for r in await conn.fetch(f"SELECT * FROM {table}")]  # noqa: S608
        for row in out["sessions"]:
            row["metadata"] = _json(row["metadata"])
        for row in out["session_events"]:
            row["payload"] = _json(row["payload"])
        return out
    finally:
        await conn.close()


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def complete_ledger(
    rows: dict[str, list[dict[str, Any]]], sid: UUID, nominal: datetime, coalesced: int = 0
) -> list[Violation]:
    """Exactly one complete MATERIALIZED occurrence for ``nominal`` and nothing more."""
    found = check_ledger(
        rows["schedule_occurrences"], rows["runs"], rows["sessions"], expected={sid: [nominal]}
    )
    occurrences = rows["schedule_occurrences"]
    counts = {
        "occurrences": len(occurrences),
        "sessions": len(rows["sessions"]),
        "runs": len(rows["runs"]),
        "checkpoints": len(rows["run_checkpoints"]),
        "session.created": _count(rows["session_events"], "session.created"),
        "message.user": _count(rows["session_events"], "message.user"),
        "run.queued": _count(rows["session_events"], "run.queued"),
        "schedule.occurrence.materialized": _count(
            rows["process_events"], "schedule.occurrence.materialized"
        ),
    }
    wrong = {k: v for k, v in counts.items() if v != 1}
    folds = [e for e in rows["process_events"] if e["event_type"] == "schedule.misfires_coalesced"]
    if len(folds) != (1 if coalesced else 0) or (
        folds and _json(folds[0]["payload"])["count"] != coalesced
    ):
        found.append(
            Violation("materialize.coalesced", f"{len(folds)} coalescing events, {coalesced} due")
        )
    if wrong:
        found.append(Violation("materialize.exactly_one", f"counts other than one: {wrong}"))
    if occurrences and occurrences[0]["disposition"] != "MATERIALIZED":
        found.append(
            Violation("materialize.exactly_one", f"disposition {occurrences[0]['disposition']}")
        )
    schedule = rows["schedules"][0]
    if schedule["next_fire_at"] is None or schedule["next_fire_at"] <= nominal:
        found.append(Violation("materialize.advanced", "next_fire_at did not advance"))
    return found


def _count(rows: list[dict[str, Any]], event_type: str) -> int:
    return sum(r["event_type"] == event_type for r in rows)


def winners(world: ScenarioWorld) -> list[str]:
    """The workers whose materialization returned ``decided``."""
    return [
        op.process
        for op in world.history.operations()
        if op.op == "materialize" and op.status == "ok" and op.value["status"] == "decided"
    ]


async def check_once(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    rows = await rows_of(world)
    found = complete_ledger(
        rows, world.vars["schedule_id"], world.vars["nominal"], world.vars["coalesced"]
    )
    decided = winners(world)
    if len(decided) != 1:
        found.append(
            Violation("materialize.one_winner", f"{len(decided)} workers reported a decision")
        )
    # Every other worker returned normally and wrote nothing: not an error (swallowed or
    # not), not a retry, not an "already decided" cadence repair.
    for op in world.history.operations():
        if op.op != "materialize" or op.process in decided[:1]:
            continue
        if op.status != "ok" or op.value.get("status") != "not_due":
            found.append(
                Violation(
                    "materialize.no_second_effect",
                    f"{op.process} returned {op.status} {op.value!r}, not ok not_due",
                    {"task": op.process},
                )
            )
    occ_ids = {str(r["id"]) for r in rows["schedule_occurrences"]}
    for op in world.history.operations():
        value = op.value
        if isinstance(value, dict) and value.get("occurrence_id") not in occ_ids | {None}:
            found.append(Violation("materialize.one_winner", f"{op.process} saw a phantom row"))
    return found


async def quiet_atomic(world: ScenarioWorld, view: ExecutionView) -> None:
    """Record what survived the crash, then retry once without faults."""
    world.vars["after_crash"] = await rows_of(world)
    storage = open_storage(world.url, pool_size=2)
    try:
        retry = build_materializer(storage, world.clock, world.ids.fork("retry"), NullProbe())
        world.vars["retry"] = await retry.materialize(world.vars["schedule_id"])
    finally:
        await storage.close()


async def check_atomic(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    sid, nominal, folded = world.vars["schedule_id"], world.vars["nominal"], world.vars["coalesced"]
    before: dict[str, list[dict[str, Any]]] = world.vars["after_crash"]
    fault_steps = [t.step for t, _ in view.faults_fired]
    committed = not fault_steps or fault_steps[0] == m.STEP_COMMITTED
    found: list[Violation] = []
    if committed:
        found += [
            Violation(v.invariant, "after commit: " + v.message, v.details)
            for v in complete_ledger(before, sid, nominal, folded)
        ]
    else:
        left = {t: len(before[t]) for t in SCHEDULING_TABLES if t != "schedules"}
        left["process_events"] = sum(
            not str(e["event_type"]).startswith("schedule.created")
            for e in before["process_events"]
        )
        survivors = {t: n for t, n in left.items() if n}
        if survivors:
            found.append(
                Violation("materialize.atomic", f"crash at {fault_steps[0]} left rows: {survivors}")
            )
        schedule = before["schedules"][0]
        if schedule["next_fire_at"] != world.vars["first"] or schedule["state"] != "ACTIVE":
            found.append(
                Violation("materialize.atomic", f"crash at {fault_steps[0]}: schedule not due")
            )
    result: MaterializeResult = world.vars["retry"]
    expected_status = "not_due" if committed else "decided"
    if result.status.value != expected_status or result.occurrence is None:
        found.append(
            Violation(
                "materialize.retry", f"retry returned {result.status.value}, not {expected_status}"
            )
        )
    found += complete_ledger(await rows_of(world), sid, nominal, folded)
    if result.occurrence is not None and not found:
        stored = (await rows_of(world))["schedule_occurrences"][0]
        if stored["id"] != result.occurrence.id or stored["run_id"] != result.occurrence.run_id:
            found.append(Violation("materialize.retry", "retry returned another occurrence"))
    return found


ONCE = register(
    Scenario(
        name="materialize.once",
        summary="two schedule workers race on one due schedule: exactly one occurrence",
        setup=setup,
        workers={"a": materialize_worker, "b": materialize_worker},
        check=check_once,
        steps=STEPS,
        footprints=FOOTPRINTS,
        template=_template,
        max_steps=120,
    )
)

# The same race with no footprints: every transition conflicts, so the exhaustive search
# prunes nothing. Its verdicts must equal the pruned search's (a cross-check that the
# hand-written FOOTPRINTS above hide no interleaving with a different outcome).
ONCE_UNPRUNED = register(
    dataclasses.replace(
        ONCE,
        name="materialize.once_unpruned",
        summary="materialize.once explored without footprint pruning (cross-check)",
        footprints={},
    )
)

ONCE3 = register(
    Scenario(
        name="materialize.once3",
        summary="three schedule workers race on one due schedule: exactly one occurrence",
        setup=setup,
        workers={"a": materialize_worker, "b": materialize_worker, "c": materialize_worker},
        check=check_once,
        steps=STEPS,
        footprints=FOOTPRINTS,
        template=_template,
        max_steps=160,
    )
)

ATOMIC = register(
    Scenario(
        name="materialize.atomic",
        summary="crash after every write of one materialization; retry recovers",
        # One older instant is due too: the coalescing event is one more crash point.
        setup=setup_at(timedelta(seconds=30), skip_instants=1),
        workers={"a": materialize_worker},
        quiet=quiet_atomic,
        check=check_atomic,
        steps=STEPS,
        fault_steps=STEPS,
        template=_template,
        max_steps=60,
    )
)


async def ontime_worker(ctx: WorkerContext) -> None:
    """Waits one microsecond on the virtual clock, then scans."""
    await ctx.clock.sleep(1e-6)
    await materialize_worker(ctx)


async def check_not_early(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    rows = await rows_of(world)
    nominal = world.vars["nominal"]
    found = complete_ledger(rows, world.vars["schedule_id"], nominal)
    for occ in rows["schedule_occurrences"]:
        if occ["materialized_at"] != nominal:
            found.append(
                Violation("materialize.not_early", f"materialized at {occ['materialized_at']}")
            )
    for op in world.history.operations():
        value = op.value
        if op.process == "early" and (not isinstance(value, dict) or value["status"] != "not_due"):
            found.append(Violation("materialize.not_early", f"the early scan returned {value}"))
    return found


NOT_EARLY = register(
    Scenario(
        name="materialize.not_early",
        summary="a scan 1 us before next_fire_at writes nothing; one at the instant decides",
        setup=setup_at(-timedelta(microseconds=1)),
        workers={"early": materialize_worker, "ontime": ontime_worker},
        check=check_not_early,
        steps=STEPS,
        footprints=FOOTPRINTS,
        template=_template,
        max_steps=80,
    )
)
