"""Lifecycle scenarios (gate.schedule.lifecycle_linear under the simulator).

Setup: one daily schedule created through the service and updated once (revision 2,
so revision 1 is stale from the start); the clock stands 30 s past its first instant,
so a scan would materialize it. Then simulated workers run lifecycle operations
through the real ``ScheduleService`` (API role) and due scans through the real
``ScheduleMaterializer`` (scheduler role), each parked at every named write:
``service.<op>.{locked,mutated,event_appended,committed}`` and ``materialize.*``.

* ``lifecycle.race`` - ``a``: update (current revision, new cadence) then cancel; ``b``:
  pause then resume (current revision); ``stale``: an update with revision 1; ``scan``:
  a due read, then a materialization;
* ``lifecycle.crash`` - ``owner`` (pause, resume, cancel), ``scan`` and ``stale``, for the
  crash sweep: a fault of each kind after every service write. A crashed operation is
  indeterminate (recorded ``info``): the checker accepts it taking effect or not.

The quiet phase reads the schedule back (a ``read`` operation). The check: the history
(per schedule) is linearizable against ``simulation.worlds.lifecycle.LifecycleModel``
(the spec's closed transitions, the cached next firing, the scan), so every history
is equivalent to one allowed serial order; independently, a schedule once observed
CANCELLED is CANCELLED at the end, and each resume event fires at the cadence's first
instant strictly after it (paused time never backfills).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduling.bootstrap import build_api
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.errors import ConflictError, SchedulingError
from scheduling.domain.recurrence.engine import next_after
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe
from scheduling.service import materializer as m
from scheduling.service.schedules import ScheduleService
from scheduling.storage import Storage
from scheduling.testing import open_storage, swap_service
from simulation.engine.checkers import check_linearizable_per_key
from simulation.engine.checkers.violation import Violation
from simulation.engine.errors import injected_fault_of
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.provider.templates import migrated_template
from simulation.scenarios import register
from simulation.scenarios.materialize import build_materializer, storage_on
from simulation.worlds.lifecycle import (
    CADENCES,
    LifecycleModel,
    call_lifecycle,
    read_back,
    record_scan,
)
from simulation.worlds.service import definition, principal, seed_durable, world_settings

ServiceFactory = Callable[[Storage, Clock, IdGenerator, Probe], ScheduleService]
Script = Sequence[tuple[str, int | None]]
"""A worker's operations in order: (kind, expected revision); ``None`` means the current
revision, read (and recorded as a ``read``) just before; kind ``scan`` ignores it."""

CURRENT, STALE = 2, 1
OP_DONE = "lifecycle.op_done"
"""The harness parks each worker here after every operation, whatever its outcome. A
conflict or no-op ends the service's transaction by ROLLBACK, which releases the row
lock without a product step after it; parking here keeps the woken waiter and the
releasing worker's next operation from racing (docs/simulator.md, determinism)."""
NEW_CADENCE = 1
"""``update`` switches to ``lifecycle_support.CADENCES[1]`` (weekly, UTC)."""


def service_steps(*ops: str) -> tuple[str, ...]:
    return tuple(
        f"service.{op}.{write}"
        for op in ops
        for write in ("locked", "mutated", "event_appended", "committed")
    )


def _template(server: Any) -> str:
    return migrated_template(server)


def build_service(
    storage: Storage,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe,
    cls: type[ScheduleService] = ScheduleService,
) -> ScheduleService:
    """The service as production wires it (``bootstrap.build_api``), over the durable
    directories; ``cls`` is a deliberately broken subclass in a test of the test."""
    role = build_api(world_settings(), clock=clock, ids=ids, probe=probe, storage=storage)
    role = swap_service(role, cls)
    return role.service


async def setup(world: ScenarioWorld) -> None:
    who = principal("sim-lifecycle")
    storage = open_storage(world.url, pool_size=2)
    try:
        await seed_durable(storage.as_role("trusted"), [who], at=world.clock.now())
        service = build_service(storage, world.clock, world.ids.fork("setup"), NullProbe())
        created = await service.create(who, "lifecycle-0", definition(cadence=CADENCES[0]))
        sid = created.schedule.id
        world.clock.advance(60)
        updated = await service.update(
            who, sid, 1, definition(title="revised", cadence=CADENCES[0])
        )
    finally:
        await storage.close()
    schedule = updated.schedule
    assert schedule.current_revision == CURRENT
    assert schedule.next_fire_at is not None
    fire = format_instant(schedule.next_fire_at)
    world.vars.update(
        who=who,
        schedule_id=sid,
        created_at=created.schedule.created_at.isoformat(),
        # LifecycleModel state: (state, revision, next_fire_at, cadence, failures, in_flight)
        start=("ACTIVE", CURRENT, fire, 0, 0, False),
    )
    world.clock.advance_to(schedule.next_fire_at + timedelta(seconds=30))


def lifecycle_worker(
    script: Script, cls: type[ScheduleService] = ScheduleService
) -> Callable[[WorkerContext], Awaitable[None]]:
    """Runs ``script`` in order; each operation is recorded in the history."""

    async def worker(ctx: WorkerContext) -> None:
        engine = ctx.sqlalchemy_engine()
        storage = storage_on(engine)
        scheduler = storage.as_role("scheduler")
        service = build_service(storage, ctx.clock, ctx.ids.fork("service"), ctx.probe, cls)
        materializer = build_materializer(
            storage, ctx.clock, ctx.ids.fork("materializer"), ctx.probe
        )
        sid, who = ctx.vars["schedule_id"], ctx.vars["who"]
        try:
            for kind, expected in script:
                now = ctx.clock.now().isoformat()
                if kind == "scan":
                    await _faultable(
                        record_scan(ctx.history.invoke, scheduler, materializer, [sid], now)
                    )
                    await ctx.probe.step(OP_DONE)
                    continue
                if expected is None:
                    read = ctx.history.invoke("read", schedule=0)
                    detail = await service.get(who, sid)
                    read.ok(read_back(detail.schedule))
                    expected = detail.schedule.current_revision
                args: dict[str, Any] = {"schedule": 0, "expected_revision": expected, "now": now}
                if kind == "update":
                    args["cadence"] = NEW_CADENCE
                ref = ctx.history.invoke(kind, **args)
                try:
                    value = await call_lifecycle(
                        service, who, kind, sid, expected, NEW_CADENCE, f"{ctx.name}-{kind}"
                    )
                except ConflictError as exc:
                    ref.ok(("conflict", exc.details.get("current_revision")))
                except SchedulingError as exc:
                    ref.fail(("error", exc.code))
                except Exception as exc:
                    fault = injected_fault_of(exc)
                    if fault is None:
                        raise
                    ref.info(f"fault:{fault.kind.value}")
                    return  # a crashed client does not go on
                else:
                    ref.ok(value)
                await ctx.probe.step(OP_DONE)
        finally:
            await engine.dispose()

    return worker


async def _faultable(scan: Awaitable[None]) -> None:
    """A scan crashed by an injected fault leaves its operation open (indeterminate)."""
    try:
        await scan
    except Exception as exc:
        if injected_fault_of(exc) is None:
            raise


async def quiet_read(world: ScenarioWorld, view: ExecutionView) -> None:
    """Read the schedule back without faults: the final state joins the history."""
    storage = open_storage(world.url, pool_size=2)
    try:
        service = build_service(storage, world.clock, world.ids.fork("quiet"), NullProbe())
        ref = world.history.invoke("quiet", "read", schedule=0)
        detail = await service.get(world.vars["who"], world.vars["schedule_id"])
        ref.ok(read_back(detail.schedule))
    finally:
        await storage.close()


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    model = LifecycleModel(world.vars["created_at"], start=world.vars["start"])
    found = check_linearizable_per_key(
        world.history, lambda _key: model, key=lambda op: op.args["schedule"]
    )
    return found + await direct_checks(world)


async def direct_checks(world: ScenarioWorld) -> list[Violation]:
    """Model-independent: CANCELLED never reopens; a resume never backfills."""
    sid = world.vars["schedule_id"]
    conn = await world.connect()
    try:
        state = await conn.fetchval("SELECT state FROM schedules WHERE id = $1", sid)
        resumed = await conn.fetch(
            "SELECT e.payload, r.definition FROM process_events e"
            " JOIN schedule_revisions r ON r.schedule_id = e.schedule_id"
            " AND r.revision = (e.payload->>'revision')::int"
            " WHERE e.event_type = 'schedule.resumed' AND e.schedule_id = $1",
            sid,
        )
    finally:
        await conn.close()
    found = []
    for op in world.history.operations():
        cancelled = isinstance(op.value, tuple) and op.value[:2] == ("ok", "CANCELLED")
        if op.status == "ok" and cancelled and state != "CANCELLED":
            found.append(Violation("lifecycle.cancel_final", f"{op.op_id} cancelled; now {state}"))
    for payload, revision_definition in resumed:
        payload, revision_definition = _json(payload), _json(revision_definition)
        at = datetime.fromisoformat(payload["occurred_at"])
        cadence = revision_definition.get("cadence", CADENCES[0])
        expected = next_after(parse_cadence(cadence), at)
        if (
            expected is None
            or expected <= at
            or payload["next_fire_at"] != format_instant(expected)
        ):
            found.append(
                Violation(
                    "lifecycle.no_backfill",
                    f"resumed at {at.isoformat()} fires at {payload['next_fire_at']}",
                )
            )
    return found


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


# At most two workers take the row lock (``a``, ``b``; the scan skips locked rows and a
# stale update fails before locking): with two or more waiters queued behind an UPDATE,
# PostgreSQL's choice of the next holder is not deterministic, so a replay could
# diverge (docs/simulator.md, "Lifecycle scenarios").
RACE_SCRIPTS: dict[str, Script] = {
    "a": [("update", None), ("cancel", None)],
    "b": [("pause", None), ("resume", None)],
    "scan": [("scan", 0)],
    "stale": [("update", STALE)],
}
# One owner pauses, resumes, then cancels (so every service write is reached in the
# discovery run and crashed in turn) while a scan and stale writes race it.
CRASH_SCRIPTS: dict[str, Script] = {
    "owner": [("pause", None), ("resume", None), ("cancel", None)],
    "scan": [("scan", 0)],
    "stale": [("update", STALE), ("cancel", STALE)],
}
RACE_STEPS = (
    *service_steps("update", "pause", "resume", "cancel"),
    m.STEP_LOCKED,
    m.STEP_DECIDED,
    m.STEP_COMMITTED,
)
CRASH_POINTS = service_steps("pause", "resume", "cancel")


def lifecycle_scenario(
    name: str,
    summary: str,
    scripts: dict[str, Script],
    *,
    steps: tuple[str, ...],
    fault_steps: tuple[str, ...] | None = None,
    cls: type[ScheduleService] = ScheduleService,
) -> Scenario:
    """A lifecycle scenario; ``cls`` is the service class (tests inject a broken one)."""
    return Scenario(
        name=name,
        summary=summary,
        setup=setup,
        workers={n: lifecycle_worker(script, cls) for n, script in scripts.items()},
        quiet=quiet_read,
        check=check,
        steps=steps,
        fault_steps=fault_steps,
        template=_template,
        max_steps=200,
    )


RACE = register(
    lifecycle_scenario(
        "lifecycle.race",
        "update, pause/resume, cancel, stale writes and a due scan race on one schedule",
        RACE_SCRIPTS,
        steps=RACE_STEPS,
    )
)
CRASH = register(
    lifecycle_scenario(
        "lifecycle.crash",
        "crash after every service write of pause/resume and cancel racing a scan",
        CRASH_SCRIPTS,
        steps=CRASH_POINTS,
        fault_steps=CRASH_POINTS,
    )
)


def with_service(scenario: Scenario, name: str, cls: type[ScheduleService]) -> Scenario:
    """The same scenario with every worker's service of class ``cls``."""
    scripts = RACE_SCRIPTS if set(scenario.workers) == set(RACE_SCRIPTS) else CRASH_SCRIPTS
    return dataclasses.replace(
        scenario,
        name=name,
        workers={n: lifecycle_worker(scripts[n], cls) for n in scenario.workers},
    )
