"""Overlap scenarios (gate.schedule.no_overlap under the simulator).

Setup: schedule A fires once (MATERIALIZED) and its run is then held leased RUNNING,
with a lease beyond A's next instant; schedule B is created so that its first instant
is A's second one; the clock stands two seconds past that instant. Then:

* ``overlap.held`` - two schedule workers (``ScheduleWorker.run_once``: the due read,
  then one materialization per due id) scan concurrently;
* ``overlap.held3`` - the same with three workers (random walks);
* ``overlap.crash`` - one worker and schedule A alone, for the crash sweep (a fault of
  every kind after every write of the overlap-skip transaction).

The quiet phase rescans once without faults (liveness: every due instant decided).
The check: A's second instant is recorded exactly once, as SKIPPED_OVERLAP with the
overlap reason and no links; no second run or session exists for A; the held run row
is unchanged; A's failure count is unchanged and its cadence advanced; B (when present)
materialized exactly once; the ledger checker passes. Without faults the concurrent
phase alone decided everything (the rescan decides nothing) and exactly one worker
reported each decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from scheduling.bootstrap import build_scheduler
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.runtime import QueueCapacity
from scheduling.service import materializer as m
from scheduling.service.materializer import OVERLAP, MaterializeResult, ScheduleMaterializer
from scheduling.service.schedule_worker import PassReport, ScheduleWorker
from scheduling.storage import Storage
from scheduling.testing import open_storage
from simulation.engine.checkers import check_ledger, check_linearizable
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
from simulation.scenarios.materialize import STEPS, build_materializer, rows_of, storage_on
from simulation.worlds.runtime import UNACCOUNTED, run_worker
from simulation.worlds.service import (
    build_world,
    definition,
    principal,
    scheduler_settings,
    seed_durable,
)

MaterializerFactory = Callable[[Storage, Clock, IdGenerator, Probe], ScheduleMaterializer]

# The overlap-skip transaction writes only these (no admission, session or run).
SKIP_STEPS = (m.STEP_LOCKED, m.STEP_DECIDED, m.STEP_COMMITTED)
LABELS = ("A", "B")


def labelled(step: str, label: str) -> str:
    """The step name a worker reports while materializing schedule ``label``."""
    return f"{step}[{label}]"


class LabelledProbe:
    """Reports each materializer step with the schedule it is for (``step[A]``), so
    footprints can name rows: the two schedules' transactions touch disjoint rows and
    commute, which keeps the exhaustive search small."""

    def __init__(self, inner: Probe) -> None:
        self._inner = inner
        self.label = ""

    async def step(self, name: str) -> None:
        await self._inner.step(labelled(name, self.label) if self.label else name)


class LabelledMaterializer(ScheduleMaterializer):
    """The built materializer, with ``probe`` labelled for each schedule it
    materializes (``labels``: schedule id to ``A``/``B``). A wrapper the schedule worker
    is constructed with, not a replaced method: everything but ``materialize`` is the
    inner materializer's."""

    def __init__(
        self, inner: ScheduleMaterializer, probe: LabelledProbe, labels: dict[UUID, str]
    ) -> None:
        # No super().__init__: every collaborator is the inner (production-built) one's.
        self._inner, self._labelled, self._labels = inner, probe, labels

    async def materialize(self, schedule_id: UUID) -> MaterializeResult:
        self._labelled.label = self._labels.get(schedule_id, "?")
        return await self._inner.materialize(schedule_id)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def _rows(label: str, *kinds: str) -> list[str]:
    return [f"{kind}:{label}" for kind in kinds]


def _footprints() -> dict[str, Footprint]:
    """What the code after each step may touch, per row group (over-approximated; see
    docs/simulator.md). ``committed`` is followed by the lock of the next due schedule,
    whichever it is; after ``locked`` the skip path writes its decision (ADR 2330)."""
    every = [f"{k}:{x}" for x in LABELS for k in ("schedules", "occurrences")]
    # The lock reads the current revision in the same statement (ADR 1700) and takes
    # the tenant's admission lock after the row lock (ADR 2250).
    scan = Footprint.of(
        reads=[*every, "revisions"],
        writes=[*(f"schedules:{x}" for x in LABELS), "admission_lock"],
    )
    out = {"sim.start": scan}
    shared = ["revisions", "principals", "agent_versions"]
    for x in LABELS:
        own = _rows(x, "schedules", "occurrences", "sessions", "session_events", "runs")
        own += _rows(x, "checkpoints", "events")
        runs = [f"runs:{y}" for y in LABELS]
        out |= {
            # The context read, then on the skip path the decision in one statement:
            # occurrence, advance and audit events (ADR 2330).
            labelled(m.STEP_LOCKED, x): Footprint.of(
                reads=[*shared, *runs, f"occurrences:{x}"],
                writes=["admission_lock", *_rows(x, "occurrences", "schedules", "events")],
            ),
            # The usage read, then the decision with its run in one statement.
            labelled(m.STEP_ADMISSION, x): Footprint.of(reads=runs, writes=own),
            # The COMMIT follows the decision: every write becomes visible, locks go.
            labelled(m.STEP_DECIDED, x): Footprint.of(writes=[*own, "admission_lock"]),
            labelled(m.STEP_ADVANCED, x): Footprint.of(writes=[*own, "admission_lock"]),
            labelled(m.STEP_COMMITTED, x): scan,
        }
    return out


FOOTPRINTS = _footprints()


def _template(server: Any) -> str:
    return migrated_template(server)


def setup_held(*, with_b: bool = True, lease: bool = True) -> Callable[[ScenarioWorld], Any]:
    """A's first run held RUNNING across A's second instant (and B due at it); with
    ``lease=False`` the run stays QUEUED, for a run worker to claim and finish."""

    async def setup(world: ScenarioWorld) -> None:
        who = principal("sim-overlap")
        storage = open_storage(world.url, pool_size=2)
        admin = storage.factory("trusted")
        try:
            await seed_durable(admin, [who], at=world.clock.now())
            service = build_world(storage, start=world.clock.now())
            a = (await service.service.create(who, "overlap-a", definition(title="A"))).schedule
            assert a.next_fire_at is not None
            first = a.next_fire_at
            for clock in (world.clock, service.clock):
                clock.advance_to(first + timedelta(seconds=1))
            fired = await build_materializer(
                storage, world.clock, world.ids.fork("setup"), NullProbe()
            ).materialize(a.id)
            assert fired.run_id is not None, fired
            second = fired.next_fire_at
            assert second is not None
            world.vars["b"] = None
            if with_b:
                for clock in (world.clock, service.clock):
                    clock.advance_to(first + timedelta(hours=2))
                b = (await service.service.create(who, "overlap-b", definition(title="B"))).schedule
                assert b.next_fire_at == second, (b.next_fire_at, second)
                world.vars["b"] = b.id
        finally:
            await storage.close()
        conn = await world.connect()
        if lease:
            await conn.execute(
                "UPDATE runs SET status = 'RUNNING', lease_owner = 'held', lease_expires_at = $1,"
                " fencing_token = 1 WHERE id = $2",
                second + timedelta(hours=1),
                fired.run_id,
            )
        else:
            # Still QUEUED when the next instant is due, and not past its deadline.
            await conn.execute(
                "UPDATE runs SET deadline_at = $1 WHERE id = $2",
                second + timedelta(hours=1),
                fired.run_id,
            )
        world.vars["held"] = dict(
            await conn.fetchrow("SELECT * FROM runs WHERE id = $1", fired.run_id)
        )
        await conn.close()
        world.vars.update(a=a.id, first=first, second=second, run_id=fired.run_id)
        world.clock.advance_to(second + timedelta(seconds=2))

    return setup


def _labels(world_vars: dict[str, Any]) -> dict[UUID, str]:
    out = {world_vars["a"]: "A"}
    if world_vars["b"] is not None:
        out[world_vars["b"]] = "B"
    return out


def summarize(report: PassReport, labels: dict[UUID, str]) -> dict[str, Any]:
    """A scan as the history records it: per schedule label, status and disposition."""

    def one(result: MaterializeResult) -> list[Any]:
        occ = result.occurrence
        disposition = None if occ is None else occ.disposition.value
        return [labels.get(result.schedule_id, "?"), result.status.value, disposition]

    return {
        "results": sorted(one(r) for r in report.results),
        "errors": sorted(labels.get(k, "?") for k in report.errors),
    }


PENDING_STEP = "overlap.scan_pending"


def scan_worker(
    factory: MaterializerFactory = build_materializer, *, pending: int = 0
) -> Callable[..., Any]:
    """One schedule worker pass (the real ``ScheduleWorker``) over watched connections.
    With ``pending`` > 0 the worker first parks that many times at a harness step, so
    its pass may start anywhere relative to the other tasks (e.g. after a run ended)."""

    async def worker(ctx: WorkerContext) -> None:
        for _ in range(pending):
            await ctx.probe.step(PENDING_STEP)
        engine = ctx.sqlalchemy_engine()
        storage = storage_on(engine)
        labels = _labels(ctx.vars)
        probe = LabelledProbe(ctx.probe)
        built = factory(storage, ctx.clock, ctx.ids, probe)
        materializer = LabelledMaterializer(built, probe, labels)
        scanner = _scanner(storage, ctx.clock, ctx.ids, materializer)
        op = ctx.history.invoke("scan")
        try:
            report = await scanner.run_once()
        except Exception as exc:
            if injected_fault_of(exc) is None:
                raise
            op.info(type(injected_fault_of(exc)).__name__)
            return
        finally:
            await engine.dispose()
        # A fault inside one materialization is isolated by the worker (report.errors):
        # that decision is indeterminate, so the scan as a whole is recorded as info.
        summary = summarize(report, _labels(ctx.vars))
        if summary["errors"]:
            op.info(summary)
        else:
            op.ok(summary)

    return worker


def _scanner(
    storage: Storage,
    clock: Clock,
    ids: IdGenerator,
    materializer: ScheduleMaterializer,
) -> ScheduleWorker:
    """The scheduler role's schedule worker (``bootstrap.build_scheduler``) scanning with
    ``materializer`` (the probe-labelled or deliberately broken one of the scenario)."""
    role = build_scheduler(
        scheduler_settings(), clock=clock, ids=ids, storage=storage, materializer=materializer
    )
    return role.worker


async def quiet_rescan(world: ScenarioWorld, view: ExecutionView) -> None:
    """Recovery without faults: one more pass must leave every due instant decided."""
    storage = open_storage(world.url, pool_size=2)
    try:
        ids = world.ids.fork("quiet")
        materializer = build_materializer(storage, world.clock, ids, NullProbe())
        report = await _scanner(storage, world.clock, ids, materializer).run_once()
    finally:
        await storage.close()
    world.vars["quiet"] = summarize(report, _labels(world.vars))


def check_overlap(rows: dict[str, list[dict[str, Any]]], v: dict[str, Any]) -> list[Violation]:
    """The ledger the no_overlap gate demands (see module docstring)."""
    a, b, first, second = v["a"], v["b"], v["first"], v["second"]
    expected = {a: [first, second]} | ({b: [second]} if b is not None else {})
    found = check_ledger(
        rows["schedule_occurrences"], rows["runs"], rows["sessions"], expected=expected
    )

    def bad(invariant: str, message: str) -> None:
        found.append(Violation(invariant, message))

    occ_a = sorted(
        (o for o in rows["schedule_occurrences"] if o["schedule_id"] == a),
        key=lambda o: o["nominal_fire_at"],
    )
    at_second = [o for o in occ_a if o["nominal_fire_at"] == second]
    if [o["disposition"] for o in occ_a] != ["MATERIALIZED", "SKIPPED_OVERLAP"]:
        bad("overlap.skipped_once", f"A's occurrences: {[o['disposition'] for o in occ_a]}")
    for o in at_second:
        if o["reason_code"] != OVERLAP or o["run_id"] is not None or o["session_id"] is not None:
            bad("overlap.skipped_once", f"A's skip row: reason {o['reason_code']}, linked")
    sessions_a = [s for s in rows["sessions"] if s["metadata"].get("schedule_id") == str(a)]
    runs_a = [r for r in rows["runs"] if r["session_id"] in {s["id"] for s in sessions_a}]
    if len(sessions_a) != 1 or len(runs_a) != 1:
        bad("overlap.no_second_run", f"A has {len(sessions_a)} sessions, {len(runs_a)} runs")
    held = [r for r in rows["runs"] if r["id"] == v["run_id"]]
    if held != [v["held"]]:
        bad("overlap.run_unchanged", "the held run row changed")
    skipped_events = [
        e
        for e in rows["process_events"]
        if e["schedule_id"] == a and e["event_type"] == "schedule.occurrence.skipped_overlap"
    ]
    if len(skipped_events) != 1:
        bad("overlap.skipped_once", f"{len(skipped_events)} skipped_overlap events for A")
    schedule_a = next(s for s in rows["schedules"] if s["id"] == a)
    if schedule_a["consecutive_failures"] != 0 or schedule_a["state"] != "ACTIVE":
        bad(
            "overlap.not_a_failure",
            f"A: {schedule_a['state']}, {schedule_a['consecutive_failures']}",
        )
    if schedule_a["next_fire_at"] is None or schedule_a["next_fire_at"] <= second:
        bad("overlap.advanced", "A's next_fire_at did not advance past the skipped instant")
    if b is not None:
        occ_b = [o for o in rows["schedule_occurrences"] if o["schedule_id"] == b]
        if [o["disposition"] for o in occ_b] != ["MATERIALIZED"] or occ_b[0]["run_id"] is None:
            bad(
                "overlap.other_materializes",
                f"B's occurrences: {[o['disposition'] for o in occ_b]}",
            )
    if len(rows["runs"]) != (2 if b is not None else 1):
        bad("overlap.no_second_run", f"{len(rows['runs'])} runs in total")
    return found


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    found = check_overlap(await rows_of(world), world.vars)
    if view.faults_fired:
        return found
    # Without faults the concurrent phase decided everything, each decision once.
    if world.vars["quiet"]["results"] and any(
        r[1] == "decided" for r in world.vars["quiet"]["results"]
    ):
        found.append(
            Violation("overlap.liveness", f"the rescan still decided {world.vars['quiet']}")
        )
    decided: dict[str, list[str]] = {}
    for op in world.history.operations():
        if op.op != "scan" or op.status != "ok":
            found.append(Violation("overlap.scan", f"{op.op_id} ended {op.status} {op.value}"))
            continue
        for label, status, disposition in op.value["results"]:
            if status == "decided":
                decided.setdefault(label, []).append(f"{disposition} by {op.process}")
    expected = {"A": 1} | ({"B": 1} if world.vars["b"] is not None else {})
    if {k: len(d) for k, d in decided.items()} != expected:
        found.append(Violation("overlap.one_decision", f"decisions reported: {decided}"))
    return found


def held_scenario(
    name: str,
    summary: str,
    workers: int,
    *,
    factory: MaterializerFactory = build_materializer,
    with_b: bool = True,
    faults: bool = False,
) -> Scenario:
    """An overlap scenario; ``factory`` builds each worker's materializer (tests inject
    a broken one to prove the check can fail)."""
    names = "abcdefgh"[:workers]
    steps = tuple(labelled(step, "A") for step in SKIP_STEPS)
    if with_b:
        steps += tuple(labelled(step, "B") for step in STEPS)
    return Scenario(
        name=name,
        summary=summary,
        setup=setup_held(with_b=with_b),
        workers={n: scan_worker(factory) for n in names},
        quiet=quiet_rescan,
        check=check,
        steps=steps,
        fault_steps=tuple(labelled(step, "A") for step in SKIP_STEPS) if faults else None,
        footprints=FOOTPRINTS,
        template=_template,
        max_steps=60 * workers,
    )


HELD = register(
    held_scenario(
        "overlap.held",
        "a run held across the next instant; two schedule workers scan: one overlap skip",
        2,
    )
)
ALONE = register(
    held_scenario(
        "overlap.alone",
        "a run held across the next instant; two workers race on its schedule (exhaustive)",
        2,
        with_b=False,
    )
)
HELD3 = register(
    held_scenario("overlap.held3", "the same with three schedule workers (random walks)", 3)
)
CRASH = register(
    held_scenario(
        "overlap.crash",
        "crash after every write of the overlap-skip transaction; the rescan recovers",
        1,
        with_b=False,
        faults=True,
    )
)


def with_factory(scenario: Scenario, name: str, factory: MaterializerFactory) -> Scenario:
    """The same scenario with every worker's materializer built by ``factory``."""
    return dataclasses.replace(
        scenario, name=name, workers={n: scan_worker(factory) for n in scenario.workers}
    )


# -- the run finishing at an interleaved point -------------------------------------------


async def runner_worker(ctx: WorkerContext) -> None:
    """The real run worker (scripted agent) claims A's queued run and finishes it.

    Post-run accounting is left to the schedule worker's sweep: the footprints model
    the run worker's own transactions (claim, steps, finish) only."""
    engine = ctx.sqlalchemy_engine()
    op = ctx.history.invoke("finish")
    try:
        runner = run_worker(
            storage_on(engine),
            ctx.clock,
            "runner",
            capacity=QueueCapacity(4, 1, 1),
            probe=ctx.probe,
            on_finished=UNACCOUNTED,
        )
        outcome = await runner.run_once()
    finally:
        await engine.dispose()
    status = None if outcome is None else str(outcome.status)
    op.ok("terminal" if status in ("COMPLETED", "FAILED", "CANCELLED") else status)


@dataclasses.dataclass(frozen=True)
class ReleaseModel:
    """A's held run and A's next instant: the decision is SKIPPED_OVERLAP while the run
    is in flight, MATERIALIZED once it finished, and happens once."""

    def initial(self) -> Any:
        return (True, False)  # (run in flight, instant decided)

    def apply(self, state: Any, op: str, args: Any) -> tuple[Any, Any]:
        in_flight, decided = state
        if op == "finish":
            return (False, decided), "terminal"
        if decided:
            return state, "already decided"
        disposition = "SKIPPED_OVERLAP" if in_flight else "MATERIALIZED"
        return (in_flight, True), {"results": [["A", "decided", disposition]], "errors": []}


async def check_release(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    """Exactly one decision for A's instant, consistent with when the run finished."""
    rows = await rows_of(world)
    v = world.vars
    a, first, second = v["a"], v["first"], v["second"]
    found = check_ledger(
        rows["schedule_occurrences"], rows["runs"], rows["sessions"], expected={a: [first, second]}
    )
    held = next(r for r in rows["runs"] if r["id"] == v["run_id"])
    if held["status"] not in ("COMPLETED", "FAILED", "CANCELLED"):
        found.append(Violation("overlap.release", f"the run worker left the run {held['status']}"))
    occ = [o for o in rows["schedule_occurrences"] if o["nominal_fire_at"] == second]
    expected_runs = 1 + sum(o["disposition"] == "MATERIALIZED" for o in occ)
    if len(rows["runs"]) != expected_runs:
        found.append(Violation("overlap.no_second_run", f"{len(rows['runs'])} runs"))
    # Scans that decided nothing (not due, or A locked by the other worker) took no
    # effect; the deciding scan and the finish must be linearizable.
    ops = [
        op
        for op in world.history.operations()
        if op.op == "finish"
        or (op.status == "ok" and any(r[1] == "decided" for r in op.value["results"]))
    ]
    if sum(op.op == "scan" for op in ops) != 1:
        found.append(Violation("overlap.one_decision", f"{len(ops) - 1} scans decided A"))
    result = check_linearizable(ops, ReleaseModel(), history=world.history)
    violation = result.violation("A")
    if violation is not None:
        found.append(violation)
    return found


RUN_STEPS = ("run.claimed", "run.started", "run.charged", "run.checkpointed", "run.finished")
RELEASE = register(
    Scenario(
        name="overlap.release",
        summary="two schedule workers scan while the run worker finishes A's run (random walks)",
        setup=setup_held(with_b=False, lease=False),
        workers={
            "a": scan_worker(pending=4),
            "b": scan_worker(pending=4),
            "runner": runner_worker,
        },
        check=check_release,
        # Both outcomes are reached across the seeds: the skip (run in flight) and the
        # materialization with its run (the run ended first; only it reaches admission).
        steps=(
            *(labelled(step, "A") for step in SKIP_STEPS),
            labelled(m.STEP_ADMISSION, "A"),
            *RUN_STEPS,
        ),
        template=_template,
        max_steps=200,
    )
)
