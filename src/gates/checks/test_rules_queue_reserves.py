"""``rule.config.release_validation``: a production run worker refuses a run capacity
that lacks either reserve, not only one that lacks both (spec "Configuration and
deployment": at least one async worker slot and one interactive reserved slot; spec
"Capacity, fairness, and cost": an async backlog must not consume the interactive
reserve, and interactive work must not consume the minimum async capacity).

From production settings that pass ``validate_release``, ``build_run_worker`` is handed
in-memory storage (refused anyway, so no database is needed) and a capacity: one
without an interactive reserve, one without an async reserve and one without either
are each also refused with the worker-topology code; one with both reserves is not.

Test of the test: ``scheduling-gates mutate`` (mutant ``queue.reserves_either_suffices``).
"""

from __future__ import annotations

import functools

import pytest

from gates.checks.test_rules_wiring_refusals import edge, production, refused
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.testing import MemoryStorage

RULE = "rule.config.release_validation"

CAPACITIES = {
    "no interactive reserve": (QueueCapacity(4, 0, 1), True),
    "no async reserve": (QueueCapacity(4, 1, 0), True),
    "no reserve at all": (QueueCapacity(4, 0, 0), True),
    "both reserves": (QueueCapacity(4, 1, 1), False),
}


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("priority", [RunPriority.INTERACTIVE, RunPriority.ASYNC])
def test_a_production_run_worker_needs_both_reserves(
    priority: RunPriority, gate_evidence: GateEvidence
) -> None:
    settings = production()
    found: dict[str, list[str]] = {}
    for name, (capacity, _) in CAPACITIES.items():
        found[name] = refused(
            functools.partial(
                bootstrap.build_run_worker,
                settings,
                priority,
                storage=MemoryStorage(),
                capacity=capacity,
                **edge(),
            )
        )
    gate_evidence.record(f"refused_{priority.name.lower()}", found)
    expected = {
        name: sorted(
            [bootstrap.MEMORY_REPOSITORIES, *([bootstrap.WORKER_TOPOLOGY] if unreserved else [])]
        )
        for name, (_, unreserved) in CAPACITIES.items()
    }
    assert found == expected
