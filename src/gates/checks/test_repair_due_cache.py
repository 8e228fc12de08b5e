"""rule.repair.next_fire, a cache that is due but right: the repair check recognises a
stored ``next_fire_at`` that is itself a nominal instant (at or after it, inclusive) as
consistent, however overdue it is, so a repair run during downtime never moves the
cache past an instant nobody decided yet (that instant would vanish without an
occurrence, a MISSED record or a coalesced count)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.bootstrap import build_maintenance
from scheduling.service import MaintenanceService
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import world_settings

pytestmark = pytest.mark.postgres


def repairs(h: MaterializeWorld) -> MaintenanceService:
    """The repair service of the maintenance role production builds."""
    built = build_maintenance(
        world_settings(), clock=h.clock, ids=h.world.ids.fork("maint-repair"), storage=h.storage
    )
    found: MaintenanceService = built.repair
    return found


@pytest.mark.rule("rule.repair.next_fire")
async def test_an_overdue_right_cache_is_kept(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        nominal = await h.next_fire(sid)
        # Downtime: the instant is due (an hour overdue) and no scan decided it yet.
        h.clock.advance_to(nominal + timedelta(hours=1))
        repair = await repairs(h).repair_next_fire(sid)
        assert not repair.repaired, repair
        assert await h.next_fire(sid) == nominal
        types = (await h.ledger()).of(sid).event_types()
        assert "schedule.next_fire_repaired" not in types, types
        # The scan that follows still decides that instant.
        assert len((await h.scan()).results) == 1
        occurrences = (await h.ledger()).of(sid).occurrences
        assert [o["nominal_fire_at"] for o in occurrences] == [nominal], occurrences
    finally:
        await h.close()
