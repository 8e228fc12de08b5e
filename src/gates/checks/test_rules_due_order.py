"""rule.worker.isolated_definitions on PostgreSQL: which due schedules a bounded batch
holds when more are due than one pass takes.

The spec says ``run_once()`` reads "one deterministic bounded due-ID batch" and does not
name its order; the worker's order is the oldest due first (``next_fire_at``, then id),
and it is what keeps a live scheduler's lag bounded: an order by id alone is as
deterministic, but a schedule whose id sorts last waits behind every newer due schedule
whose id sorts before it, for as long as they keep coming.

Both checks arrange the due instants against the ids (the worlds' ids are seeded, not
chosen): each schedule's cadence is set by a full-definition update after its id is
known. (1) Five schedules due at five instants in neither their ids' order nor its
reverse, a batch of two: each pass decides the two oldest still due. (2) The
consequence, with a batch of one and a pass every 30 s: four instants 30 s apart, the
oldest on the greatest id, each with a 60 s grace window; the scheduler keeps pace (one
a pass, one due every 30 s), so each instant is decided 30 s after it, within its
grace, and every one is MATERIALIZED. Ordered by id, the oldest waits behind the three
newer ones and is recorded MISSED (``grace_expired``) 120 s after its instant, though
the scheduler was never behind. (``schedules.due_by_id``.)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

import pytest

from scheduling.testing import ConfiguredTenantConfiguration
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import CEILINGS, START, definition

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.worker.isolated_definitions")]

# The world starts at 08:00 UTC: every instant below is later that day.
DAY = START.date()


def instant(seconds: int) -> datetime:
    """``seconds`` after 10:00 UTC on ``DAY``."""
    return datetime.combine(DAY, datetime.min.time(), START.tzinfo) + timedelta(
        hours=10, seconds=seconds
    )


def daily_at(at: datetime) -> dict[str, str]:
    return {"kind": "DAILY", "local_time": at.strftime("%H:%M:%S"), "timezone": "UTC"}


async def arrange(h: MaterializeWorld, ranks: list[int], spacing: int, grace: int) -> list[UUID]:
    """``len(ranks)`` schedules; the k-th oldest due one (k-th instant, ``spacing`` s
    apart) is the one whose id has rank ``ranks[k]`` in id order. Returns them oldest
    due first."""
    # Enough headroom that admission admits every one of them.
    h.tenants = ConfiguredTenantConfiguration(
        default=CEILINGS.model_copy(update={"max_active_runs": 100})
    )
    created = [await h.create(title=f"due-{n}", key=f"due-{n}") for n in range(len(ranks))]
    by_id = sorted(created, key=lambda sid: sid.bytes)  # PostgreSQL's uuid order
    oldest_first = [by_id[r] for r in ranks]
    for k, sid in enumerate(oldest_first):
        changed = definition(cadence=daily_at(instant(k * spacing)), misfire_grace_seconds=grace)
        await h.world.service.update(WHO, sid, 1, changed)
    fires = [await h.next_fire(sid) for sid in oldest_first]
    assert fires == [instant(k * spacing) for k in range(len(ranks))], fires
    return oldest_first


async def test_a_batch_smaller_than_the_due_set_takes_the_oldest_due_first(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        # Due order by id rank: neither ascending nor descending ids.
        oldest_first = await arrange(h, [2, 0, 4, 1, 3], spacing=600, grace=3600)
        h.clock.advance_to(instant(4 * 600) + timedelta(seconds=1))
        worker = h.worker(h.materializer(), batch_size=2)
        passes = []
        for _ in range(3):
            report = await worker.run_once()
            passes.append({r.schedule_id for r in report.results})
        expected = [set(oldest_first[:2]), set(oldest_first[2:4]), set(oldest_first[4:])]
        assert passes == expected, "a pass did not take the oldest due schedules first"
    finally:
        await h.close()


async def test_a_scheduler_that_keeps_pace_decides_every_instant_within_its_grace(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        # The oldest instant on the greatest id, the newest on the smallest.
        oldest_first = await arrange(h, [3, 2, 1, 0], spacing=30, grace=60)
        worker = h.worker(h.materializer(), batch_size=1)
        decided = []
        for k in range(len(oldest_first)):
            # One pass 30 s after each instant: one due schedule arrives per pass.
            h.clock.advance_to(instant(k * 30 + 30))
            report = await worker.run_once()
            decided += [r.schedule_id for r in report.results]
        # The consequence first: ordered otherwise, the oldest is MISSED past its grace.
        ledger = await h.ledger()
        dispositions = {
            str(sid): [o["disposition"] for o in ledger.of(sid).occurrences] for sid in oldest_first
        }
        assert dispositions == {str(sid): ["MATERIALIZED"] for sid in oldest_first}
        assert decided == oldest_first, "a pass did not take the oldest due schedule"
    finally:
        await h.close()
