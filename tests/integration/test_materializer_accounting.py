"""Tests of the test for the admission rules (src/gates/checks/test_rules_admission.py):
without the tenant advisory lock both racers take the last slot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gates.checks.test_rules_admission import BarrierProbe, ceilings, due_pair
from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.materialization import PostgresMaterializationStore
from scheduling.service.materializer import STEP_ADMISSION, ScheduleMaterializer
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


class UnlockedAdmission(PostgresAdmissionController):
    """The mutant: no tenant advisory lock from admission ..."""

    async def _lock(self, uow: Any, tenant_id: str) -> None:
        return None


class UnlockedStore(PostgresMaterializationStore):
    """... nor from the context read (ADR 1750)."""

    lock_admission = False


# Only turns a hang into a failure; nothing is decided by it running out.
HANG_BOUND_S = 120.0


class BothArrive:
    """Holds each racer at the admission step until both have arrived. Without the
    lock nothing keeps either from getting there, so this waits for the event alone,
    not for wall time: the gate check's BarrierProbe lets the first racer go after 1 s
    (it must, for the locked racer is held at the lock), and at load 7.5 the second
    once arrived later, after the first had committed, and found the slot taken."""

    def __init__(self, parties: int = 2) -> None:
        self.parties = parties
        self.arrived = 0
        self.all_arrived = asyncio.Event()

    async def step(self, name: str) -> None:
        if name != STEP_ADMISSION:
            return
        self.arrived += 1
        if self.arrived >= self.parties:
            self.all_arrived.set()
        await asyncio.wait_for(self.all_arrived.wait(), HANG_BOUND_S)


def unlocked(h: MaterializeWorld, probe: BothArrive) -> ScheduleMaterializer:
    materializer = h.materializer(admission=UnlockedAdmission(h.tenants, probe=probe))
    materializer._store = UnlockedStore()
    return materializer


async def test_without_the_advisory_lock_both_take_the_last_slot(pg_url: str) -> None:
    """Shows the race test above can fail: the lock is what serializes admissions."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_active_runs=1)
        a, b = await due_pair(h)
        probe = BothArrive()
        results = await asyncio.gather(
            unlocked(h, probe).materialize(a),
            unlocked(h, probe).materialize(b),
        )
        assert [r.status.value for r in results] == ["decided", "decided"]
    finally:
        await h.close()


async def _passes(probe: BarrierProbe | BothArrive, passed: list[str], name: str) -> None:
    await probe.step(STEP_ADMISSION)
    passed.append(name)


async def _yield_to_the_loop(times: int = 50) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_both_arrive_holds_the_first_racer_until_the_second_comes() -> None:
    probe, passed = BothArrive(), []
    first = asyncio.create_task(_passes(probe, passed, "first"))
    await _yield_to_the_loop()
    assert passed == []
    assert probe.arrived == 1
    await _passes(probe, passed, "second")
    await first
    assert sorted(passed) == ["first", "second"]


async def test_the_timed_barrier_lets_the_first_racer_go_alone() -> None:
    # Test of the test: the 1 s barrier releases a racer whose rival is late, which is
    # how the test above once saw one slot taken instead of two.
    probe, passed = BarrierProbe(), []
    await asyncio.wait_for(_passes(probe, passed, "first"), HANG_BOUND_S)
    assert passed == ["first"]
    assert probe.arrived == 1
