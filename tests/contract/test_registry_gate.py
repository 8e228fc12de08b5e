"""Tests of the repository_contract gate's checker: it must report every way the
registry and the contract run can disagree."""

from __future__ import annotations

import copy
import tomllib
from collections import Counter
from typing import Any

from gates.checks.test_repository_contract import (
    REGISTRY,
    Results,
    _suite_tests,
    discovered_factories,
    registry_problems,
)

BASE: dict[str, Any] = tomllib.loads(REGISTRY.read_text(encoding="utf-8"))


def _all_passed(registry: dict[str, Any]) -> Results:
    results: Results = {}
    for port in registry["ports"]:
        found = _suite_tests(port["suite"], REGISTRY.parent)
        assert found is not None
        for adapter in port["adapters"]:
            results[(port["suite"], adapter)] = Counter(passed=len(found[0]))
    return results


def test_the_shipped_registry_is_sound_when_every_suite_passes() -> None:
    assert registry_problems(BASE, _all_passed(BASE), factories=discovered_factories()) == []


def test_an_adapter_registered_without_its_suite_running_is_reported() -> None:
    registry = copy.deepcopy(BASE)
    results = _all_passed(registry)
    registry["adapters"]["sqlite"] = {"factory": "scheduling.adapters.memory.uow:MemoryStore"}
    registry["ports"][0]["adapters"].append("sqlite")
    problems = registry_problems(registry, results)
    assert any("on sqlite: 0 of" in p for p in problems), problems


def test_a_failing_or_partial_suite_is_reported() -> None:
    results = _all_passed(BASE)
    key = (BASE["ports"][1]["suite"], "postgres")
    results[key] = Counter(passed=results[key]["passed"] - 1, failed=1)
    problems = registry_problems(BASE, results)
    assert any("on postgres" in p for p in problems), problems


def test_a_missing_spec_port_suite_or_adapter_is_reported() -> None:
    registry = copy.deepcopy(BASE)
    registry["ports"] = [p for p in registry["ports"] if p.get("spec_port") != "occurrence"]
    registry["ports"][0]["suite"] = "test_schedule_repository.py::NoSuchSuite"
    registry["ports"][1]["adapters"].append("ghost")
    problems = registry_problems(registry, None)
    assert "the spec's occurrence port has no registered contract suite" in problems
    assert any("NoSuchSuite" in p for p in problems), problems
    assert any("'ghost' is not a registered adapter" in p for p in problems), problems


def test_an_unregistered_adapter_factory_in_the_code_is_reported() -> None:
    factories = discovered_factories() | {"scheduling.adapters.sqlite.uow:SqliteUnitOfWorkFactory"}
    problems = registry_problems(BASE, None, factories=factories)
    assert problems == [
        "adapter factory scheduling.adapters.sqlite.uow:SqliteUnitOfWorkFactory"
        " is not registered in registry.toml"
    ]


def test_a_method_only_mentioned_not_called_is_reported() -> None:
    from gates.checks.test_repository_contract import _used_members

    called, read = _used_members(
        "class S:\n"
        "    def test_x(self, repo):\n"
        "        # repo.purge_terminal(...) is never called here\n"
        "        assert 'repo.due(' != repo.next_fire_at\n"
        "        repo.list(1)\n"
    )
    assert called == {"list"}
    assert {"next_fire_at", "list"} <= read
    assert "due" not in read
    assert "purge_terminal" not in read
