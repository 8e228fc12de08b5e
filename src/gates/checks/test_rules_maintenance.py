"""Spec rules beyond the gates, on PostgreSQL: the non-blocking due claim (``FOR UPDATE
SKIP LOCKED``), ``next_fire_at`` repair (only with ``schedule.next_fire_repaired``) and
the terminal purge (retention, counted from when a schedule became terminal, whether
cancelled or completed by its firing; dependency order; sessions and runs kept). Each runs
in the role the product uses for it (scheduler, maintenance)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from scheduling.bootstrap import build_maintenance
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.recurrence import next_after
from scheduling.service import MaintenanceService
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import (
    TENANT_B,
    definition,
    principal,
    seed_durable,
    world_settings,
)

pytestmark = pytest.mark.postgres

THEIRS = principal("purge-neighbour", TENANT_B)
CLAIM_PATIENCE_S = 10.0
"""A scan blocked on the held row never returns; this only turns a hang into a FAIL."""


def maintenance(h: MaterializeWorld, service: str, **env: str) -> MaintenanceService:
    """``service`` (``purge``: the maintenance role; ``repair``: the scheduler role) of
    the maintenance role production builds (``bootstrap.build_maintenance``), with the
    world's settings and ``env`` on top."""
    built = build_maintenance(
        world_settings(**env),
        clock=h.clock,
        ids=h.world.ids.fork(f"maint-{service}"),
        storage=h.storage,
    )
    found: MaintenanceService = getattr(built, service)
    return found


@pytest.mark.rule("rule.claim.skip_locked")
async def test_a_row_held_by_another_worker_does_not_stall_the_scan(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        held = await h.create(title="held", key="held")
        free = await h.create(title="free", key="free")
        h.clock.advance_to(await h.next_fire(held) + timedelta(seconds=1))
        async with h.admin.engine.connect() as other:
            tx = await other.begin()
            # Another worker's claim: the row is locked until its transaction ends.
            await other.execute(
                text("SELECT id FROM schedules WHERE id = :i FOR UPDATE"), {"i": held}
            )
            report = await asyncio.wait_for(h.scan(h.worker(h.materializer())), CLAIM_PATIENCE_S)
            decided = {
                r.schedule_id for r in report.results if r.status is MaterializeStatus.DECIDED
            }
            assert free in decided, report
            assert held not in decided, report
            assert (await h.ledger()).of(held).occurrences == []
            await tx.rollback()
        # Released: a later scan decides the held schedule once.
        again = await h.scan()
        assert [r.schedule_id for r in again.results] == [held]
        assert len((await h.ledger()).of(held).occurrences) == 1
    finally:
        await h.close()


@pytest.mark.rule("rule.repair.next_fire")
async def test_a_wrong_cache_is_repaired_only_with_its_event(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        repairs = maintenance(h, "repair")
        untouched = await repairs.repair_next_fire(sid)
        assert not untouched.repaired
        wrong = datetime(2026, 3, 2, 13, 7, tzinfo=UTC)
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=wrong, i=sid)
        repair = await repairs.repair_next_fire(sid)
        assert repair.repaired
        cadence = parse_cadence(dict(definition().cadence))
        expected = next_after(cadence, h.clock.now())
        assert repair.current == expected
        assert (await h.schedule(sid))["next_fire_at"] == expected
        events = [
            e
            for e in (await h.ledger()).of(sid).events
            if e["event_type"] == "schedule.next_fire_repaired"
        ]
        assert len(events) == 1, events
        # The audit says which way: from the wrong cache to the right instant.
        payload = events[0]["payload"]
        assert payload["previous_next_fire_at"] == format_instant(wrong), payload
        assert payload["next_fire_at"] == format_instant(expected), payload
        # A second repair finds the cache right and emits nothing.
        assert not (await repairs.repair_next_fire(sid)).repaired
        types = (await h.ledger()).of(sid).event_types()
        assert types.count("schedule.next_fire_repaired") == 1

        # After a decision: a cache naming the instant already decided is wrong (it
        # would decide it twice), and its repair is the first instant after now, days
        # later, never the next one after the decided instant (a backfill).
        decided = await h.next_fire(sid)
        h.clock.advance_to(decided + timedelta(seconds=1))
        assert len((await h.scan()).results) == 1
        h.clock.advance(3 * 86400 + 3600)
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=decided, i=sid)
        again = await repairs.repair_next_fire(sid)
        assert again.repaired, "a cache naming the decided instant was kept"
        assert again.current == next_after(cadence, h.clock.now()), again
        assert again.current != next_after(cadence, decided), "the repair backfills"
        assert (await h.schedule(sid))["next_fire_at"] == again.current
    finally:
        await h.close()


@pytest.mark.rule("rule.repair.next_fire")
async def test_the_materializer_repairs_a_due_cache_that_names_no_instant(
    pg_url: str,
) -> None:
    """A cache that is due but names no nominal instant (an hour after the last one,
    which it is later than: that instant counts as decided) is repaired by the
    materializer with its event, and nothing is decided: no occurrence of the older
    instant, however due it looks."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        nominal = await h.next_fire(sid)
        wrong = nominal + timedelta(hours=1)
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=wrong, i=sid)
        h.clock.advance_to(nominal + timedelta(hours=2))
        result = await h.materializer().materialize(sid)
        assert result.status is MaterializeStatus.REPAIRED, result
        cadence = parse_cadence(dict(definition().cadence))
        expected = next_after(cadence, h.clock.now())
        assert (await h.schedule(sid))["next_fire_at"] == expected
        ledger = (await h.ledger()).of(sid)
        assert ledger.occurrences == [], "an instant older than the cache was decided"
        repaired = [e for e in ledger.events if e["event_type"] == "schedule.next_fire_repaired"]
        assert len(repaired) == 1, ledger.event_types()
        assert repaired[0]["payload"]["previous_next_fire_at"] == format_instant(wrong)
        assert repaired[0]["payload"]["next_fire_at"] == format_instant(expected)
    finally:
        await h.close()


@pytest.mark.rule("rule.repair.next_fire")
async def test_a_schedule_that_is_not_active_keeps_its_empty_cache(pg_url: str) -> None:
    """A paused (by its owner or by the failure limit), completed or cancelled schedule
    has no next instant: its NULL ``next_fire_at`` is right, so repair changes nothing
    and writes no event (a repair would make a paused schedule due again)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        repairs = maintenance(h, "repair")
        paused = await h.create(key="paused")
        await h.world.service.pause(WHO, paused, 1)
        auto = await h.create(key="auto-paused")
        await h.sql(
            "UPDATE schedules SET state = 'PAUSED', pause_reason = 'failure_limit',"
            " next_fire_at = NULL WHERE id = :i",
            i=auto,
        )
        cancelled = await h.create(key="cancelled")
        await h.world.service.cancel(WHO, cancelled, 1)
        completed = await h.create(
            key="completed",
            cadence={"kind": "ONCE", "at": format_instant(h.clock.now() + timedelta(hours=1))},
        )
        h.clock.advance(3601)
        assert len((await h.scan()).results) == 1
        stopped = {"paused": paused, "auto-paused": auto, "cancelled": cancelled}
        stopped["completed"] = completed
        for label, sid in stopped.items():
            before = await h.schedule(sid)
            assert before["state"] != "ACTIVE", before
            assert before["next_fire_at"] is None, before
            repair = await repairs.repair_next_fire(sid)
            assert not repair.repaired, (label, repair)
            assert await h.schedule(sid) == before, label
            types = (await h.ledger()).of(sid).event_types()
            assert "schedule.next_fire_repaired" not in types, (label, types)
    finally:
        await h.close()


@pytest.mark.rule("rule.purge.terminal")
async def test_terminal_purge_keeps_runs_and_respects_retention(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_durable(h.admin, [THEIRS])
        old = [await h.create(title=f"old {i}", key=f"old-{i}") for i in range(3)]
        live = await h.create(title="live", key="live")
        theirs = await h.create(THEIRS, title="theirs", key="theirs")
        h.clock.advance_to(await h.next_fire(live) + timedelta(seconds=1))
        report = await h.scan()
        assert len(report.results) == 5
        for sid in old:
            await h.world.service.cancel(WHO, sid, 1)
        await h.world.service.cancel(THEIRS, theirs, 1)
        cancelled_at = (await h.schedule(old[-1]))["updated_at"]
        runs = await h.sql("SELECT count(*) AS n FROM runs")
        sessions = await h.sql("SELECT count(*) AS n FROM sessions")
        purge = maintenance(h, "purge", AGENT_SCHEDULE_TERMINAL_PURGE_BATCH="2")
        retention = timedelta(days=purge.retention.terminal_retention_days)
        h.clock.advance_to(cancelled_at + retention - timedelta(microseconds=1))
        assert await purge.purge_terminal(WHO.tenant_id) == 0, "purged inside retention"
        # Exactly the retention old is "at least" that old; at most a batch at a time.
        h.clock.advance_to(cancelled_at + retention)
        assert await purge.purge_terminal(WHO.tenant_id) == 2, "not one batch of 2"
        assert await purge.purge_terminal(WHO.tenant_id) == 1
        assert await purge.purge_terminal(WHO.tenant_id) == 0
        for table, column in (
            ("schedules", "id"),
            ("schedule_revisions", "schedule_id"),
            ("schedule_occurrences", "schedule_id"),
            ("schedule_idempotency_keys", "schedule_id"),
        ):
            for sid in old:
                rows = await h.sql(f"SELECT count(*) AS n FROM {table} WHERE {column} = :i", i=sid)
                assert rows[0]["n"] == 0, table
        assert (await h.schedule(live))["state"] == "ACTIVE"
        # Another tenant's terminal schedule waits for that tenant's own sweep.
        assert (await h.schedule(theirs))["state"] == "CANCELLED", "another tenant's purged"
        assert await purge.purge_terminal(THEIRS.tenant_id) == 1
        assert await h.sql("SELECT id FROM schedules WHERE id = :i", i=theirs) == []
        kept = await h.sql("SELECT count(*) AS n FROM runs")
        assert kept == runs, "purge deleted a linked run"
        assert await h.sql("SELECT count(*) AS n FROM sessions") == sessions, "a session"
        events = await h.sql(
            "SELECT count(*) AS n FROM process_events WHERE schedule_id = :i", i=old[0]
        )
        assert events[0]["n"] >= 2, "purge deleted process events"
    finally:
        await h.close()


@pytest.mark.rule("rule.purge.terminal")
async def test_retention_counts_from_a_completion_by_firing(pg_url: str) -> None:
    """A one-time schedule completed by its sole decision, ten days after it was
    created: its terminal ``updated_at`` is the decision's instant, so it is kept for
    the whole retention counted from then (not from its creation), then purged. Its run
    failing and being accounted minutes later counts the failure but does not move that
    instant (the retention would otherwise start at the run's end)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        created_at = h.clock.now()
        at = (created_at + timedelta(days=10)).replace(microsecond=0)
        sid = await h.create(cadence={"kind": "ONCE", "at": format_instant(at)}, key="once")
        h.clock.advance_to(at + timedelta(seconds=1))
        report = await h.scan()
        assert [r.status for r in report.results] == [MaterializeStatus.DECIDED], report
        row = await h.schedule(sid)
        assert row["state"] == "COMPLETED", row
        completed_at = h.clock.now()
        assert row["updated_at"] == completed_at, (row["updated_at"], completed_at)
        run_id = report.results[0].run_id
        assert run_id is not None
        h.clock.advance(240)
        await h.sql(
            "UPDATE runs SET status = 'FAILED', finished_at = :t,"
            ' failure = \'{"reason": "schedule.runtime.agent_failed"}\' WHERE id = :i',
            t=h.clock.now(),
            i=run_id,
        )
        accountant = h.scheduler_role(ids=h.world.ids.fork("late-run")).accountant
        accounted = await accountant.account_run(run_id)
        assert accounted is not None
        assert accounted.consecutive_failures == 1, accounted
        row = await h.schedule(sid)
        assert row["consecutive_failures"] == 1, row
        assert row["updated_at"] == completed_at, "the late run moved the terminal instant"
        purge = maintenance(h, "purge")
        retention = timedelta(days=purge.retention.terminal_retention_days)
        h.clock.advance_to(completed_at + retention - timedelta(microseconds=1))
        assert await purge.purge_terminal(WHO.tenant_id) == 0, "purged inside its retention"
        h.clock.advance_to(completed_at + retention)
        assert await purge.purge_terminal(WHO.tenant_id) == 1
        assert await h.sql("SELECT id FROM schedules WHERE id = :i", i=sid) == []
    finally:
        await h.close()
