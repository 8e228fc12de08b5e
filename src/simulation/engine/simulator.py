"""Runs scenarios: one execution, or an exploration (random, exhaustive, crash sweep).

One execution = setup -> concurrent phase under the interleaver -> quiet phase -> check,
on one database, producing an ``Execution`` with its canonical trace. An exploration
runs many and aggregates what a gate needs as evidence (``Exploration.evidence()``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from simulation.engine.checkers.violation import Violation
from simulation.engine.clock import VirtualClock
from simulation.engine.environment import code_commit, tzdata_version
from simulation.engine.errors import Divergence, FaultKind, SimulationError
from simulation.engine.faults import (
    CLIENT_FAULT_KINDS,
    FaultPolicy,
    FaultSpec,
    Transition,
    specs_from_json,
)
from simulation.engine.history import History
from simulation.engine.ids import SeededIds
from simulation.engine.interleaver import (
    START_STEP,
    WAKE_STEP,
    ClockMove,
    Decision,
    Interleaver,
    Oracle,
    PhaseResult,
    WorkerMain,
)
from simulation.engine.jsonable import to_jsonable
from simulation.engine.oracles import ExhaustiveSearch, GuideOracle, RandomOracle, ReplayOracle
from simulation.engine.pg_observer import PgObserver
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.engine.server_crash import ServerCrash
from simulation.engine.store import FailureStore
from simulation.engine.targets import DatabaseTarget
from simulation.engine.trace import FORMAT, TraceKey, read_trace, trace_text

MODES = ("random", "exhaustive", "crash")


@dataclass
class Execution:
    """One execution's verdict and trace.

    ``status``: ``pass``, ``fail``, ``pruned`` (an interleaving equivalent to one
    already explored; stopped early, not checked) or ``bounded`` (hit the step bound).
    """

    key: TraceKey
    index: int
    status: str
    violations: list[Violation]
    phase: PhaseResult
    trace: dict[str, Any]
    saved_to: Path | None = None
    """Where the failure store keeps this trace (set for failures of an exploration)."""

    @property
    def text(self) -> str:
        return trace_text(self.trace)

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    @property
    def decisions(self) -> list[Decision]:
        return [e for e in self.phase.events if isinstance(e, Decision)]

    def step_order(self) -> list[str]:
        """``task:step`` per decision, with ``[fault]`` where one was injected."""
        return [
            f"{d.chosen.task}:{d.chosen.step}" + (f"[{d.fault.value}]" if d.fault else "")
            for d in self.decisions
        ]


@dataclass
class Exploration:
    """Aggregate of many executions of one scenario: the evidence a gate reports."""

    scenario: Scenario
    mode: str
    seed: int
    counts: dict[str, int] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    failures: list[Execution] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)
    replayed_first: list[dict[str, str]] = field(default_factory=list)
    reached: dict[str, int] = field(default_factory=dict)
    faults_fired: dict[str, int] = field(default_factory=dict)
    planned_faults_unfired: list[str] = field(default_factory=list)
    exhausted: bool = False
    last: Execution | None = None
    # The last execution that ran to the end (a pruned or bounded one cannot replay).
    last_complete: Execution | None = None
    # Told of every execution as it completes (the CLI's progress line); not evidence.
    listener: Callable[[Execution], None] | None = field(default=None, repr=False, compare=False)

    def add(self, execution: Execution) -> None:
        self.last = execution
        if execution.status in ("pass", "fail"):
            self.last_complete = execution
        if self.listener is not None:
            self.listener(execution)
        self.counts[execution.status] = self.counts.get(execution.status, 0) + 1
        for step, n in execution.phase.reached.items():
            self.reached[step] = self.reached.get(step, 0) + n
        for transition, kind in execution.phase.faults_fired:
            label = f"{kind.value}@{transition.step}"
            self.faults_fired[label] = self.faults_fired.get(label, 0) + 1
        if execution.failed:
            self.failures.append(execution)

    @property
    def executions(self) -> int:
        return sum(self.counts.values())

    @property
    def interleavings_explored(self) -> int:
        """Executions run to completion and checked (pruned ones are not counted)."""
        return self.counts.get("pass", 0) + self.counts.get("fail", 0)

    def not_covered(self) -> list[str]:
        """Declared steps never reached and planned faults that never fired."""
        missing = [f"step {s} never reached" for s in self.scenario.steps if s not in self.reached]
        return missing + [f"fault {f} never fired" for f in self.planned_faults_unfired]

    def evidence(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "mode": self.mode,
            "seed": self.seed,
            "seeds": list(self.seeds),
            "executions": self.executions,
            "interleavings_explored": self.interleavings_explored,
            "statuses": dict(sorted(self.counts.items())),
            "exhausted": self.exhausted,
            "steps_declared": list(self.scenario.steps),
            "steps_reached": {k: v for k, v in sorted(self.reached.items())},
            "not_covered": self.not_covered(),
            "faults_fired": dict(sorted(self.faults_fired.items())),
            "replayed_first": list(self.replayed_first),
            "failures": [
                {
                    "seed": f.key.seed,
                    "execution": f.index,
                    "violations": [v.invariant for v in f.violations],
                    "replay": None if f.saved_to is None else replay_command(f.saved_to),
                }
                for f in self.failures
            ],
            "saved_traces": [str(p) for p in self.saved],
        }


def replay_command(path: Path | str) -> str:
    return f"scheduling-sim replay {path}"


class Simulator:
    """Runs scenarios against real PostgreSQL databases from ``databases``.

    ``server``: how to crash the server those databases live on, for the
    ``crash_server`` fault kind (only ever a cluster of the caller's own)."""

    def __init__(
        self,
        databases: DatabaseTarget,
        *,
        store: FailureStore | None = None,
        poll_interval: float = 0.002,
        stuck_timeout: float = 30.0,
        on_execution: Callable[[Execution], None] | None = None,
        server: ServerCrash | None = None,
    ) -> None:
        self._databases = databases
        self._server = server
        self._store = store
        self._on_execution = on_execution
        self._poll = poll_interval
        self._stuck_timeout = stuck_timeout
        self._postgres: str | None = None

    # -- one execution ---------------------------------------------------------------

    async def execute(
        self,
        scenario: Scenario,
        *,
        seed: int,
        mode: str,
        oracle: Oracle,
        faults: FaultPolicy,
        index: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> Execution:
        url = await self._databases.acquire()
        observer = await PgObserver.connect(url)
        world: ScenarioWorld | None = None
        try:
            if self._postgres is None:
                self._postgres = await observer.server_version()
            key = TraceKey(
                scenario.name, seed, mode, code_commit(), self._postgres, tzdata_version()
            )
            clock = VirtualClock(scenario.start)
            interleaver: Interleaver | None = None
            history = History(clock, epoch=lambda: interleaver.epoch if interleaver else 0)
            world = ScenarioWorld(url, clock, SeededIds(seed), history)
            await scenario.setup(world)
            interleaver = Interleaver(
                clock=clock,
                observer=observer,
                oracle=oracle,
                faults=faults,
                history=history,
                max_steps=scenario.max_steps,
                poll_interval=self._poll,
                stuck_timeout=self._stuck_timeout,
                server=self._server,
                recovered=(
                    None if scenario.recovered is None else partial(scenario.recovered, world)
                ),
            )
            clock.attach(interleaver)
            workers: list[tuple[Any, WorkerMain]] = []
            for rank, name in enumerate(sorted(scenario.workers)):
                task = interleaver.new_task(name)
                ctx = WorkerContext(world, task, interleaver, rank)
                workers.append((task, partial(scenario.workers[name], ctx)))
            phase = await interleaver.run(workers)
            clock.attach(None)
            violations: list[Violation] = []
            status = {"pruned": "pruned", "bounded": "bounded"}.get(phase.status, "pass")
            if phase.status == "complete":
                view = ExecutionView(
                    phase.outcomes, [(t, k.value) for t, k in phase.faults_fired], phase.status
                )
                if scenario.quiet is not None:
                    await scenario.quiet(world, view)
                violations = list(await scenario.check(world, view))
                violations += _worker_errors(scenario, phase)
                status = "fail" if violations else "pass"
            trace = _trace(key, index, scenario, faults, phase, world, status, violations, extra)
            return Execution(key, index, status, violations, phase, trace)
        finally:
            if world is not None:
                await world.close()
            await observer.close()
            await self._databases.release(url)

    # -- modes -----------------------------------------------------------------------

    def _policy(
        self, scenario: Scenario, seed: int, rate: float, kinds: Sequence[FaultKind]
    ) -> FaultPolicy:
        return FaultPolicy(
            specs=scenario.faults,
            rate=rate,
            kinds=tuple(kinds),
            eligible_steps=frozenset(scenario.eligible_fault_steps),
            rng=random.Random(f"{seed}/faults"),
        )

    async def run_random(
        self,
        scenario: Scenario,
        seed: int,
        *,
        fault_rate: float = 0.0,
        kinds: Sequence[FaultKind] = CLIENT_FAULT_KINDS,
    ) -> Execution:
        """One seeded random walk: the trace is a function of (seed, code)."""
        policy = self._policy(scenario, seed, fault_rate, kinds)
        return await self.execute(
            scenario,
            seed=seed,
            mode="random",
            oracle=RandomOracle(random.Random(seed)),
            faults=policy,
        )

    async def explore(
        self,
        scenario: Scenario,
        *,
        mode: str = "random",
        seed: int = 0,
        executions: int = 20,
        fault_rate: float = 0.0,
        kinds: Sequence[FaultKind] = CLIENT_FAULT_KINDS,
        replay_saved: bool = True,
        rotate_kinds: bool = False,
    ) -> Exploration:
        """Random: ``executions`` seeds from ``seed``. Exhaustive: every interleaving
        (up to ``executions``). Crash: a fault of each kind after every eligible step;
        with ``rotate_kinds``, one kind per step instead, the n-th step getting
        ``kinds[(n + seed) % len(kinds)]``, so any ``len(kinds)`` consecutive steps
        meet every kind (a quarter of the cost for four kinds)."""
        if mode not in MODES:
            raise SimulationError(f"unknown mode {mode!r}; expected one of {MODES}")
        result = Exploration(scenario, mode, seed, listener=self._on_execution)
        if replay_saved and self._store is not None:
            await self._replay_saved(scenario, result)
        if mode == "random":
            for i in range(executions):
                result.seeds.append(seed + i)
                result.add(
                    await self.run_random(scenario, seed + i, fault_rate=fault_rate, kinds=kinds)
                )
        elif mode == "exhaustive":
            await self._exhaustive(scenario, seed, executions, result)
        else:
            await self._crash_sweep(scenario, seed, kinds, result, rotate=rotate_kinds)
        if self._store is not None:
            for failure in result.failures:
                if failure.saved_to is None:
                    failure.saved_to = self._store.save(failure.trace)
                    result.saved.append(failure.saved_to)
        return result

    async def _exhaustive(
        self, scenario: Scenario, seed: int, limit: int, result: Exploration
    ) -> None:
        def independent(a: Transition, b: Transition) -> bool:
            faulty = any(s.matches(a) or s.matches(b) for s in scenario.faults)
            return not faulty and scenario.independent(a, b)

        search = ExhaustiveSearch(independent)
        result.seeds.append(seed)
        unfired: set[FaultSpec] = set(scenario.faults)
        index = 0
        while index < limit:
            policy = self._policy(scenario, seed, 0.0, ())
            execution = await self.execute(
                scenario,
                seed=seed,
                mode="exhaustive",
                oracle=search.oracle(),
                faults=policy,
                index=index,
            )
            unfired &= set(policy.unfired())
            result.add(execution)
            index += 1
            if not search.advance():
                result.exhausted = True
                break
        result.planned_faults_unfired = [_spec_label(s) for s in sorted(unfired, key=repr)]

    async def _crash_sweep(
        self,
        scenario: Scenario,
        seed: int,
        kinds: Sequence[FaultKind],
        result: Exploration,
        *,
        rotate: bool = False,
    ) -> None:
        result.seeds.append(seed)
        discovery = await self.run_random(scenario, seed)
        result.add(discovery)
        eligible = set(scenario.eligible_fault_steps)
        points = [d.chosen for d in discovery.decisions if d.chosen.step in eligible]
        index = 1
        for number, point in enumerate(points):
            fired_here = (kinds[(number + seed) % len(kinds)],) if rotate else kinds
            for kind in fired_here:
                spec = FaultSpec(point.step, kind, point.task, point.visit)
                policy = FaultPolicy(specs=(spec,))
                execution = await self.execute(
                    scenario,
                    seed=seed,
                    mode="crash",
                    oracle=RandomOracle(random.Random(seed)),
                    faults=policy,
                    index=index,
                    extra={"crash_point": spec.as_json()},
                )
                index += 1
                result.add(execution)
                if policy.unfired():
                    result.planned_faults_unfired.append(_spec_label(spec))

    # -- replay and saved failures ---------------------------------------------------

    async def replay(self, scenario: Scenario, trace: dict[str, Any]) -> Execution:
        """Re-execute a trace's decisions exactly (faults included)."""
        key = trace["key"]
        extra: dict[str, Any] = {k: trace[k] for k in ("crash_point", "guide") if k in trace}
        policy = FaultPolicy(specs=specs_from_json(trace.get("faults_planned", [])))
        return await self.execute(
            scenario,
            seed=int(key["seed"]),
            mode=str(key["mode"]),
            oracle=ReplayOracle(trace["events"]),
            faults=policy,
            index=int(trace["execution"]),
            extra=extra,
        )

    async def guided(
        self, scenario: Scenario, seed: int, guide: Sequence[str], faults: Sequence[FaultSpec]
    ) -> Execution:
        """Follow a guide of task names, then run non-preemptively (used by shrink)."""
        return await self.execute(
            scenario,
            seed=seed,
            mode="shrunk",
            oracle=GuideOracle(guide),
            faults=FaultPolicy(specs=tuple(faults)),
            extra={"guide": list(guide)},
        )

    async def _replay_saved(self, scenario: Scenario, result: Exploration) -> None:
        assert self._store is not None
        for path in self._store.entries(scenario.name):
            try:
                execution = await self.replay(scenario, read_trace(path))
            except (Divergence, ValueError, KeyError) as exc:
                self._store.remove(path)
                result.replayed_first.append({"trace": str(path), "result": f"stale: {exc}"})
                continue
            if execution.failed:
                execution.saved_to = path
                result.add(execution)
                result.replayed_first.append({"trace": str(path), "result": "still fails"})
            else:
                self._store.remove(path)
                result.replayed_first.append({"trace": str(path), "result": "now passes"})


def _spec_label(spec: FaultSpec) -> str:
    return f"{spec.kind.value}@{spec.step}" + (f" ({spec.task}#{spec.visit})" if spec.task else "")


def _worker_errors(scenario: Scenario, phase: PhaseResult) -> list[Violation]:
    if scenario.allow_worker_errors:
        return []
    faulted = {t.task for t, _ in phase.faults_fired}
    return [
        Violation("worker.error", f"worker {name} ended with {outcome}", {"task": name})
        for name, outcome in sorted(phase.outcomes.items())
        if outcome.startswith("raised:") and name not in faulted
    ]


def _trace(
    key: TraceKey,
    index: int,
    scenario: Scenario,
    faults: FaultPolicy,
    phase: PhaseResult,
    world: ScenarioWorld,
    status: str,
    violations: list[Violation],
    extra: dict[str, Any] | None,
) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    for event in phase.events:
        if isinstance(event, ClockMove):
            events.append({"i": event.index, "clock": to_jsonable(event.to)})
        else:
            events.append(event.as_json())
    trace: dict[str, Any] = {
        "format": FORMAT,
        "key": key.as_json(),
        "execution": index,
        "start": to_jsonable(world.clock.start),
        "end": to_jsonable(world.clock.now()),
        "phase": phase.status,
        "events": events,
        "faults_planned": [s.as_json() for s in faults.specs],
        "faults_fired": [
            {"task": t.task, "step": t.step, "visit": t.visit, "kind": k.value}
            for t, k in phase.faults_fired
        ],
        "tasks": dict(sorted(phase.outcomes.items())),
        "steps_declared": list(scenario.steps),
        "steps_reached": {
            k: v for k, v in sorted(phase.reached.items()) if k not in (START_STEP, WAKE_STEP)
        },
        "history": world.history.as_json(),
        "status": status,
        "violations": [v.as_json() for v in violations],
    }
    trace.update(extra or {})
    return trace
