"""``rule.purge.terminal`` and ``rule.repair.next_fire`` on PostgreSQL, through the
maintenance role production builds (``bootstrap.build_maintenance``), beyond
``test_rules_maintenance``:

* The sweep the role runs each interval (``purge_once``) takes one batch per
  configured tenant, each tenant's own: with a batch of 1, two tenants' expired
  cancelled schedules are purged one per tenant per sweep, every configured tenant in
  the same sweep, and a sweep inside the retention purges nothing anywhere.
* Repair: an ACTIVE schedule whose cache is empty has a wrong cache (it would never
  fire); the repair replaces it with the first instant after now, with its event.
* Repair at the very instant just decided: a cache set back to that instant is
  repaired to the first instant strictly after it, never kept.

Tests of the test: ``scheduling-gates mutate`` (``svc.purge_all_first_tenant``,
``svc.repair_keeps_missing_cache``, ``svc.repair_at_or_after_last``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.bootstrap import MaintenanceRole, build_maintenance
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.recurrence import next_after
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import TENANT_B, definition, principal, seed_durable, world_settings

pytestmark = pytest.mark.postgres

THEIRS = principal("sweep-neighbour", TENANT_B)


def role(h: MaterializeWorld, **env: str) -> MaintenanceRole:
    return build_maintenance(
        world_settings(**env), clock=h.clock, ids=h.world.ids.fork("sweep"), storage=h.storage
    )


async def exists(h: MaterializeWorld, sid: object) -> bool:
    return bool(await h.sql("SELECT id FROM schedules WHERE id = :i", i=sid))


@pytest.mark.rule("rule.purge.terminal")
async def test_each_sweep_takes_one_batch_of_every_configured_tenant(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_durable(h.admin, [THEIRS])
        ours = [await h.create(title=f"ours {i}", key=f"ours-{i}") for i in range(2)]
        theirs = await h.create(THEIRS, title="theirs", key="theirs")
        for sid in ours:
            await h.world.service.cancel(WHO, sid, 1)
        await h.world.service.cancel(THEIRS, theirs, 1)
        cancelled_at = (await h.schedule(theirs))["updated_at"]
        sweep = role(
            h,
            AGENT_SCHEDULE_TENANTS=f"{WHO.tenant_id},{THEIRS.tenant_id}",
            AGENT_SCHEDULE_TERMINAL_PURGE_BATCH="1",
        )
        assert sweep.tenants == (WHO.tenant_id, THEIRS.tenant_id), sweep.tenants
        retention = timedelta(days=sweep.purge.retention.terminal_retention_days)
        h.clock.advance_to(cancelled_at + retention - timedelta(microseconds=1))
        assert await sweep.purge_once() == {WHO.tenant_id: 0, THEIRS.tenant_id: 0}
        assert all([await exists(h, sid) for sid in (*ours, theirs)]), "purged inside retention"
        h.clock.advance_to(cancelled_at + retention)
        first = await sweep.purge_once()
        assert first == {WHO.tenant_id: 1, THEIRS.tenant_id: 1}, first
        assert not await exists(h, theirs), "the sweep skipped the second tenant"
        assert [await exists(h, sid) for sid in ours].count(True) == 1, "not a batch of 1"
        second = await sweep.purge_once()
        assert second == {WHO.tenant_id: 1, THEIRS.tenant_id: 0}, second
        assert not any([await exists(h, sid) for sid in ours])
        assert await sweep.purge_once() == {WHO.tenant_id: 0, THEIRS.tenant_id: 0}
    finally:
        await h.close()


@pytest.mark.rule("rule.repair.next_fire")
async def test_an_active_schedule_without_a_cache_is_repaired(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        h.clock.advance(3600)
        await h.sql("UPDATE schedules SET next_fire_at = NULL WHERE id = :i", i=sid)
        repairs = role(h).repair
        repair = await repairs.repair_next_fire(sid)
        expected = next_after(parse_cadence(dict(definition().cadence)), h.clock.now())
        assert repair.repaired, "an ACTIVE schedule's empty cache was kept"
        assert (repair.previous, repair.current) == (None, expected), repair
        assert (await h.schedule(sid))["next_fire_at"] == expected
        events = [
            e
            for e in (await h.ledger()).of(sid).events
            if e["event_type"] == "schedule.next_fire_repaired"
        ]
        assert len(events) == 1, events
        assert events[0]["payload"]["next_fire_at"] == format_instant(expected), events
        assert not (await repairs.repair_next_fire(sid)).repaired
    finally:
        await h.close()


@pytest.mark.rule("rule.repair.next_fire")
async def test_a_cache_naming_the_instant_just_decided_is_repaired_past_it(pg_url: str) -> None:
    """Decided at the very instant, then the cache set back to it and repaired at that
    same instant: the decided instant is the last recorded one, so the repair is the
    first instant strictly after it, never the decided instant again."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        decided = await h.next_fire(sid)
        h.clock.advance_to(decided)
        assert len((await h.scan()).results) == 1
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=decided, i=sid)
        repair = await role(h).repair.repair_next_fire(sid)
        expected = next_after(parse_cadence(dict(definition().cadence)), decided)
        assert repair.repaired, "a cache naming the instant just decided was kept"
        assert (repair.previous, repair.current) == (decided, expected), repair
        assert (await h.schedule(sid))["next_fire_at"] == expected
    finally:
        await h.close()
