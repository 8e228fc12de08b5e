"""The scenario registry. Built-in scenario modules register on import.

To add scenarios, write a module that calls ``register(...)`` and list it in
``SCENARIO_MODULES``.
"""

from __future__ import annotations

import importlib

from simulation.engine.errors import SimulationError
from simulation.engine.scenario import Scenario

SCENARIO_MODULES: tuple[str, ...] = (
    "simulation.scenarios.demo",
    "simulation.scenarios.ledger_demo",
    "simulation.scenarios.materialize",
    "simulation.scenarios.materialize_paths",
    "simulation.scenarios.overlap",
    "simulation.scenarios.lifecycle",
)

_REGISTRY: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    existing = _REGISTRY.get(scenario.name)
    if existing is not None and existing is not scenario:
        raise SimulationError(f"scenario {scenario.name!r} registered twice")
    _REGISTRY[scenario.name] = scenario
    return scenario


def all_scenarios() -> dict[str, Scenario]:
    for module in SCENARIO_MODULES:
        importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))


def get_scenario(name: str) -> Scenario:
    scenarios = all_scenarios()
    if name not in scenarios:
        raise SimulationError(f"unknown scenario {name!r}; known: {', '.join(scenarios)}")
    return scenarios[name]
