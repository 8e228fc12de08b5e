"""Covering walks: the declared steps a simulator gate demands, reached by construction.

A seeded random walk reaches a step only in some interleavings: in ``lifecycle.race``
the resume writes happen only when the pause committed first (about 1 walk in 8), in
``overlap.release`` A's new run is queued only when the run worker finished first
(about 3 in 5). The "step never reached" guard then depends on the seed. A covering
walk is a guided execution that runs whole tasks one after another in a given order
(``GuideOracle``: a task keeps the turn while it is enabled), so it takes the same
path whatever the seed; the orders are chosen so that together they reach every
declared step. The gate checks the union of the seeded walks and the covering walks
against its unchanged guard, and the covering walks must pass the scenario's checks
too. Without the covering walks (or with an order that does not reach a step) the
guard still reports the step, as the tests of the tests show.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulation.engine.simulator import Exploration, Simulator

# Decisions a task keeps the turn for; more than any scenario's ``max_steps``.
TURNS = 1000


def in_order(tasks: Sequence[str]) -> list[str]:
    """A guide running each task to completion before the next (a name that is not
    enabled - finished, or not started yet - is skipped by the oracle)."""
    return [task for task in tasks for _ in range(TURNS)]


async def covering_walks(
    sim: Simulator, exploration: Exploration, orders: Sequence[Sequence[str]]
) -> Exploration:
    """One guided execution per task order, as an exploration of its own."""
    walks = Exploration(exploration.scenario, "covering", exploration.seed)
    walks.seeds.append(exploration.seed)
    for order in orders:
        walks.add(await sim.guided(exploration.scenario, exploration.seed, in_order(order), ()))
    return walks


def combined(seeded: Exploration, walks: Exploration) -> Exploration:
    """The seeded exploration with the covering walks' steps, faults, statuses and
    failures added: what the gate's ``not_covered`` guard is checked against."""
    out = Exploration(seeded.scenario, f"{seeded.mode}+covering", seeded.seed)
    out.seeds = [*seeded.seeds]
    out.exhausted = seeded.exhausted
    out.saved = [*seeded.saved, *walks.saved]
    out.replayed_first = [*seeded.replayed_first]
    out.failures = [*seeded.failures, *walks.failures]
    out.planned_faults_unfired = [*seeded.planned_faults_unfired, *walks.planned_faults_unfired]
    for source in (seeded, walks):
        for key, n in source.counts.items():
            out.counts[key] = out.counts.get(key, 0) + n
        for step, n in source.reached.items():
            out.reached[step] = out.reached.get(step, 0) + n
        for fault, n in source.faults_fired.items():
            out.faults_fired[fault] = out.faults_fired.get(fault, 0) + n
    out.last = walks.last or seeded.last
    return out


def walk_evidence(walks: Exploration, orders: Sequence[Sequence[str]]) -> dict[str, object]:
    """What the covering walks ran and reached (gate evidence)."""
    return {
        "orders": [list(o) for o in orders],
        "statuses": dict(sorted(walks.counts.items())),
        "steps_reached": dict(sorted(walks.reached.items())),
        "not_covered_alone": walks.not_covered(),
        # Guided, not seeded: every run takes these paths (failures print their order).
        "deterministic": True,
    }
