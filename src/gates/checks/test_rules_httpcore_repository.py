"""gate.schedule.repository_contract on PostgreSQL: a compare-and-set that lost names the
revision the row holds now.

A schedule read at revision 1 and then updated to revision 2 is mutated with the stale
read as the command's expected state, once principal-scoped (the API role) and once on
the trusted path (``principal=None``, the scheduler's prepared statement): each raises
``schedule.persistence.stale`` whose ``current_revision`` is the row's (2), never the
caller's stale 1, which the service hands on as the conflict's current revision (spec
"State transitions": a stale value returns a conflict carrying the current revision);
and the row is unchanged.

Tests of the test: ``scheduling-gates mutate`` (``httpcore.stale_conflict_reports_expected``).
"""

from __future__ import annotations

from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import ConflictError
from scheduling.domain.schedule import PauseReason, ScheduleState
from scheduling.ports.repositories import ScheduleCommand
from scheduling.service import SchedulePatch
from scheduling.testing import open_storage
from simulation.worlds.service import build_world, definition, principal, seed_durable

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.repository_contract")]

OWNER = principal("stale-cas-owner")
STALE = "schedule.persistence.stale"


async def test_a_lost_compare_and_set_names_the_current_revision(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    storage = open_storage(pg_url, pool_size=2)
    try:
        await seed_durable(storage.factory("trusted"), [OWNER])
        service = build_world(storage).service
        created = await service.create(OWNER, "stale-cas", definition())
        read = created.schedule
        assert read.current_revision == 1
        patched = await service.patch(OWNER, read.id, 1, SchedulePatch(title="Moved"), "cas-2")
        assert patched.schedule.current_revision == 2
        paused = read.model_copy(
            update={
                "state": ScheduleState.PAUSED,
                "pause_reason": PauseReason.USER,
                "next_fire_at": None,
            }
        )
        before = await service.get(OWNER, read.id)
        seen: dict[str, Any] = {}
        for name, factory, who in (
            ("api", storage.factory("api"), OWNER),
            ("trusted", storage.factory("trusted"), None),
        ):
            with pytest.raises(ConflictError) as lost:
                async with factory.begin(OWNER if who is not None else None) as uow:
                    await uow.schedules.mutate(ScheduleCommand(read, paused, who))
            assert lost.value.code == STALE, name
            assert lost.value.details.get("current_revision") == 2, (name, lost.value.details)
            seen[name] = lost.value.details.get("current_revision")
        after = await service.get(OWNER, read.id)
        assert (after.schedule, after.revision.revision) == (before.schedule, 2)
        gate_evidence.record("stale_current_revision", seen)
    finally:
        await storage.close()
