"""Tests of the test for the admission rules (src/gates/checks/test_rules_admission.py):
without the tenant advisory lock both racers take the last slot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gates.checks.test_rules_admission import BarrierProbe, ceilings, due_pair
from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.materialization import PostgresMaterializationStore
from scheduling.service.materializer import ScheduleMaterializer
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


class UnlockedAdmission(PostgresAdmissionController):
    """The mutant: no tenant advisory lock from admission ..."""

    async def _lock(self, uow: Any, tenant_id: str) -> None:
        return None


class UnlockedStore(PostgresMaterializationStore):
    """... nor from the context read (ADR 1750)."""

    lock_admission = False


def unlocked(h: MaterializeWorld, probe: BarrierProbe) -> ScheduleMaterializer:
    materializer = h.materializer(admission=UnlockedAdmission(h.tenants, probe=probe))
    materializer._store = UnlockedStore()
    return materializer


async def test_without_the_advisory_lock_both_take_the_last_slot(pg_url: str) -> None:
    """Shows the race test above can fail: the lock is what serializes admissions."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_active_runs=1)
        a, b = await due_pair(h)
        probe = BarrierProbe()
        results = await asyncio.gather(
            unlocked(h, probe).materialize(a),
            unlocked(h, probe).materialize(b),
        )
        assert [r.status.value for r in results] == ["decided", "decided"]
    finally:
        await h.close()
