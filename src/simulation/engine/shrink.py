"""Shrinking a failing trace to the shortest step order that still fails.

A candidate is a *guide*: task names the interleaver follows at the first decisions
(skipping names not enabled), after which it runs non-preemptively (keep the current
task going). Faults stay pinned to their (task, step, visit). The search drops faults
it does not need, takes the shortest failing prefix of the original order, then
removes single entries while the run still fails with one of the original invariants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simulation.engine.errors import SimulationError
from simulation.engine.faults import FaultSpec, specs_from_json
from simulation.engine.scenario import Scenario
from simulation.engine.simulator import Execution, Simulator


@dataclass
class ShrinkResult:
    original_length: int
    guide: list[str]
    faults: list[FaultSpec]
    execution: Execution
    attempts: int
    log: list[str] = field(default_factory=list)


def _fired_specs(trace: dict[str, Any]) -> list[FaultSpec]:
    items = [
        {"step": f["step"], "kind": f["kind"], "task": f["task"], "visit": f["visit"]}
        for f in trace.get("faults_fired", [])
    ]
    return list(specs_from_json(items))


async def shrink(
    simulator: Simulator, scenario: Scenario, trace: dict[str, Any], *, budget: int = 300
) -> ShrinkResult:
    if trace.get("status") != "fail":
        raise SimulationError("only a failing trace can be shrunk")
    invariants = {v["invariant"] for v in trace["violations"]}
    seed = int(trace["key"]["seed"])
    original = [str(e["chosen"]) for e in trace["events"] if "chosen" in e]
    attempts = 0
    last_fail: Execution | None = None

    async def fails(guide: Sequence[str], faults: Sequence[FaultSpec]) -> bool:
        nonlocal attempts, last_fail
        if attempts >= budget:
            return False
        attempts += 1
        execution = await simulator.guided(scenario, seed, guide, faults)
        ok = execution.failed and bool(invariants & {v.invariant for v in execution.violations})
        if ok:
            last_fail = execution
        return ok

    faults = _fired_specs(trace)
    log: list[str] = []
    if not await fails(original, faults):
        raise SimulationError("the trace does not fail when followed as a guide")
    best_exec = last_fail
    for spec in list(faults):
        fewer = [f for f in faults if f != spec]
        if await fails(original, fewer):
            faults, best_exec = fewer, last_fail
            log.append(f"dropped fault {spec.kind.value}@{spec.step}")
    guide = list(original)
    for n in range(len(original) + 1):
        if await fails(original[:n], faults):
            guide, best_exec = original[:n], last_fail
            log.append(f"prefix of {n} decisions fails")
            break
    improved = True
    while improved:
        improved = False
        for i in range(len(guide)):
            trial = guide[:i] + guide[i + 1 :]
            if await fails(trial, faults):
                guide, best_exec, improved = trial, last_fail, True
                log.append(f"removed entry {i}")
                break
    assert best_exec is not None
    return ShrinkResult(len(original), guide, faults, best_exec, attempts, log)
