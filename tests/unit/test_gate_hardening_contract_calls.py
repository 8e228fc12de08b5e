"""Test of the test for gate.schedule.repository_contract: a protocol method counts as
exercised only when the suite called it on the adapter under test, through the
recording proxy bound to the adapter's concrete class. A suite that calls a same-named
method on another object satisfies the old syntactic check and is now reported."""

from __future__ import annotations

import tomllib
from collections import Counter
from typing import Any
from uuid import UUID

from gates.checks.contract_calls import Call, CallLog, RecordingFactory
from gates.checks.test_repository_contract import (
    REGISTRY,
    Results,
    _load,
    _protocol_methods,
    _suite_tests,
    _used_members,
    registry_problems,
)
from scheduling.adapters.memory import MemoryUnitOfWorkFactory

BASE: dict[str, Any] = tomllib.loads(REGISTRY.read_text(encoding="utf-8"))
OCCURRENCES = next(p for p in BASE["ports"] if p["attribute"] == "occurrences")
SUITE = OCCURRENCES["suite"]


class LookAlike:
    """Not an adapter: it merely has the protocol's method names."""

    def __init__(self) -> None:
        self.called: list[str] = []

    async def insert(self, occurrence: Any) -> Any:
        self.called.append("insert")
        return occurrence


def every_call(registry: dict[str, Any]) -> set[Call]:
    """The log of a run in which every suite reached every member on every adapter."""
    calls: set[Call] = set()
    for port in registry["ports"]:
        for adapter in port["adapters"]:
            for method in _protocol_methods(_load(port["protocol"])):
                calls.add((port["suite"], adapter, port["attribute"], method))
    return calls


def all_passed(registry: dict[str, Any]) -> Results:
    results: Results = {}
    for port in registry["ports"]:
        found = _suite_tests(port["suite"], REGISTRY.parent)
        assert found is not None
        for adapter in port["adapters"]:
            results[(port["suite"], adapter)] = Counter(passed=len(found[0]))
    return results


# The body of a contract test that calls ``insert`` on a look-alike, never on the
# adapter; it reads through the adapter (``latest``) so its adapter calls are not empty.
LOOKALIKE_SUITE = """
class TestLookAlike:
    async def test_insert(self, uow_factory, other):
        async with uow_factory.begin() as uow:
            await other.insert(None)
            await uow.occurrences.latest(SCHEDULE)
"""


async def run_lookalike_suite(log: CallLog) -> LookAlike:
    other = LookAlike()
    factory = RecordingFactory(MemoryUnitOfWorkFactory(), log, SUITE, "memory")
    async with factory.begin() as uow:
        await other.insert(None)
        await uow.occurrences.latest(UUID(int=1))
    return other


async def test_a_same_named_call_on_another_object_is_not_counted() -> None:
    # The syntactic check the gate used alone is fooled: ``insert`` is "called".
    called, _ = _used_members(LOOKALIKE_SUITE)
    assert "insert" in called
    log = CallLog()
    other = await run_lookalike_suite(log)
    assert other.called == ["insert"]
    assert (SUITE, "memory", "occurrences", "latest") in log.calls
    assert (SUITE, "memory", "occurrences", "insert") not in log.calls
    # Feed the gate a run where only this suite's memory calls are the look-alike's.
    calls = {c for c in every_call(BASE) if c[:3] != (SUITE, "memory", "occurrences")}
    calls |= log.calls
    problems = registry_problems(BASE, all_passed(BASE), calls=calls)
    assert (
        "ScheduleOccurrenceRepository on memory: the suite never reached the adapter's own insert"
        in problems
    ), problems
    # The same log with the adapter's own insert is clean for that method.
    calls.add((SUITE, "memory", "occurrences", "insert"))
    assert not any(p.endswith("own insert") for p in registry_problems(BASE, None, calls=calls))


async def test_the_proxy_calls_the_concrete_class_and_records_only_its_own_methods() -> None:
    log = CallLog()
    factory = RecordingFactory(MemoryUnitOfWorkFactory(), log, SUITE, "memory")
    async with factory.begin() as uow:
        repo = uow.occurrences
        # An instance attribute shadowing the method is not what the proxy calls.
        target = repo._target
        target.latest = LookAlike().insert
        assert await repo.latest(UUID(int=2)) is None
        await uow.commit()
    assert log.calls == {
        (SUITE, "memory", "", "occurrences"),
        (SUITE, "memory", "occurrences", "latest"),
        (SUITE, "memory", "", "commit"),
    }


def test_the_shipped_registry_is_clean_with_every_call_recorded() -> None:
    assert registry_problems(BASE, all_passed(BASE), calls=every_call(BASE)) == []
    missing = every_call(BASE) - {(SUITE, "postgres", "occurrences", "for_run")}
    assert registry_problems(BASE, None, calls=missing) == [
        "ScheduleOccurrenceRepository on postgres: the suite never reached the adapter's own"
        " for_run"
    ]
