"""Spec rules beyond the gates: admission (the PostgreSQL controller's tenant advisory
lock and its ALLOW/RETRY/REJECT dispositions, what each ceiling counts and whose runs)
and post-run failure accounting, on PostgreSQL. Tests of the test:
tests/integration/test_materializer_accounting.py and ``scheduling-gates mutate``
(among others ``admission.usage_all_tenants``, ``admission.usage_counts_on_demand``,
``admission.scheduled_means_async_priority``, ``admission.rate_counts_only_active``,
``admission.rate_window_61_seconds``, ``admission.running_not_active``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from gates.checks.admission_support import (
    OTHER,
    Outcome,
    ceilings,
    decide,
    end_run,
    fire,
    on_demand_run,
    once,
    open_two_tenants,
    outcome,
    scheduled_run,
    start_run,
)
from scheduling.domain.cadence import format_instant
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.runtime import RunPriority
from scheduling.service.admission import CONCURRENCY, DAILY_COST, MONTHLY_COST, RATE
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres


class BarrierProbe:
    """Holds each materializer at the admission step until both arrived (or 1 s passed):
    without the lock both read the usage before either commits."""

    def __init__(self, parties: int = 2) -> None:
        self.parties = parties
        self.arrived = 0
        self.event = asyncio.Event()

    async def step(self, name: str) -> None:
        if name != "materialize.admission_locked":
            return
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), 1.0)


async def due_pair(h: MaterializeWorld) -> tuple[UUID, UUID]:
    a = await h.create(title="A", key="a")
    b = await h.create(title="B", key="b")
    h.clock.advance_to(await h.next_fire(a) + timedelta(seconds=1))
    return a, b


@pytest.mark.rule("rule.admission.tenant_lock")
async def test_racing_for_the_last_slot_serializes(pg_url: str) -> None:
    for attempt in range(2):
        h = await MaterializeWorld.open(pg_url, seed=attempt)
        try:
            await h.sql("UPDATE runs SET status = 'COMPLETED' WHERE status = 'QUEUED'")
            h.tenants = ceilings(max_active_runs=1)
            a = await h.create(title="A", key=f"a{attempt}")
            b = await h.create(title="B", key=f"b{attempt}")
            h.clock.advance_to(await h.next_fire(a) + timedelta(seconds=1))
            probe = BarrierProbe()
            results = await asyncio.gather(
                h.materializer(probe=probe).materialize(a),
                h.materializer(probe=probe).materialize(b),
            )
            statuses = sorted(r.status.value for r in results)
            assert statuses == ["decided", "retry"], statuses
            active = await h.sql("SELECT count(*) AS n FROM runs WHERE status = 'QUEUED'")
            assert active[0]["n"] == 1
            # RETRY (a concurrency denial) writes no occurrence and leaves the loser due.
            loser = a if results[0].status is MaterializeStatus.RETRY else b
            assert (await h.ledger()).of(loser).occurrences == []
            assert (await h.schedule(loser))["next_fire_at"] <= h.clock.now()
        finally:
            await h.close()


@pytest.mark.rule("rule.admission.dispositions")
@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"max_materializations_per_minute": 1}, RATE),
        ({"max_daily_cost": Decimal(3)}, DAILY_COST),
        ({"max_monthly_cost": Decimal(3)}, MONTHLY_COST),
    ],
)
async def test_rate_and_cost_rejections_record_missed(
    pg_url: str, changes: dict[str, Any], code: str
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(**changes)
        a, b = await due_pair(h)
        first = await h.materializer().materialize(a)
        second = await h.materializer().materialize(b)
        assert first.status is second.status is MaterializeStatus.DECIDED
        assert second.occurrence is not None
        assert second.occurrence.disposition.value == "MISSED"
        assert second.occurrence.reason_code == code
        ledger = (await h.ledger()).of(b)
        assert ledger.runs == []
        assert ledger.sessions == []
        row = await h.schedule(b)
        assert row["next_fire_at"] > h.clock.now()
        assert row["consecutive_failures"] == 1
    finally:
        await h.close()


async def decide_one_time(
    h: MaterializeWorld, key: str, lead: float = 30
) -> tuple[str, str | None, UUID | None]:
    """A one-time schedule due ``lead`` seconds from now, decided 1 s after its
    instant: (disposition, reason, run)."""
    at = h.clock.now() + timedelta(seconds=lead)
    sid = await h.create(key=key, cadence={"kind": "ONCE", "at": format_instant(at)})
    h.clock.advance_to(at + timedelta(seconds=1))
    result = await h.materializer().materialize(sid)
    assert result.status is MaterializeStatus.DECIDED, result
    assert result.occurrence is not None
    occurrence = result.occurrence
    return occurrence.disposition.value, occurrence.reason_code, occurrence.run_id


@pytest.mark.rule("rule.admission.dispositions")
async def test_the_rate_counts_only_the_last_minute(pg_url: str) -> None:
    """One per minute: a second run 59 s after the first is refused, one 61 s after
    it is admitted (a longer window, or none, refuses it too)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_materializations_per_minute=1)
        first = await decide_one_time(h, "first")
        assert first[0] == "MATERIALIZED"
        created = h.clock.now()
        within = await decide_one_time(h, "within", lead=58)  # decided at +59 s
        assert h.clock.now() == created + timedelta(seconds=59)
        assert within[:2] == ("MISSED", RATE)
        after = await decide_one_time(h, "after", lead=1)  # decided at +61 s
        assert h.clock.now() == created + timedelta(seconds=61)
        assert after[0] == "MATERIALIZED"
    finally:
        await h.close()


# The windows' edges are a microsecond apart (timestamps' resolution), so a window a
# second too long or too short is seen.
TICK = timedelta(microseconds=1)

# (ceiling changes, the earlier run's finish relative to the decision, outcome, reason)
COST_WINDOWS: dict[str, tuple[dict[str, Any], timedelta, str, str | None]] = {
    "daily_reaching_the_ceiling_exactly": (
        {"max_daily_cost": Decimal(4)},
        -timedelta(hours=1),
        "MATERIALIZED",
        None,
    ),
    "daily_window_still_counting": (
        {"max_daily_cost": Decimal(3)},
        -timedelta(days=1) + TICK,
        "MISSED",
        DAILY_COST,
    ),
    "daily_window_ended": (
        {"max_daily_cost": Decimal(3)},
        -timedelta(days=1) - TICK,
        "MATERIALIZED",
        None,
    ),
    "monthly_reaching_the_ceiling_exactly": (
        {"max_monthly_cost": Decimal(4)},
        -timedelta(days=10),
        "MATERIALIZED",
        None,
    ),
    "monthly_window_still_counting": (
        {"max_monthly_cost": Decimal(3)},
        -timedelta(days=30) + TICK,
        "MISSED",
        MONTHLY_COST,
    ),
    "monthly_window_ended": (
        {"max_monthly_cost": Decimal(3)},
        -timedelta(days=30) - TICK,
        "MATERIALIZED",
        None,
    ),
}


@pytest.mark.rule("rule.admission.dispositions")
@pytest.mark.parametrize("case", sorted(COST_WINDOWS))
async def test_the_cost_windows_end_where_they_say(pg_url: str, case: str) -> None:
    """A finished scheduled run that cost USD 2, placed a microsecond inside or outside
    the rolling day or 30 days before the decision; the next run reserves its USD 2. A
    committed cost plus the charge equal to the ceiling is admitted ("would exceed")."""
    changes, finished, expected, code = COST_WINDOWS[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(**changes)
        disposition, _, run_id = await decide_one_time(h, "earlier")
        assert disposition == "MATERIALIZED"
        decided_at = h.clock.now() + timedelta(seconds=31)  # decide_one_time's decision
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', cost = 2, finished_at = :t WHERE id = :i",
            t=decided_at + finished,
            i=run_id,
        )
        decided = await decide_one_time(h, "next")
        assert h.clock.now() == decided_at
        assert decided[:2] == (expected, code), case
    finally:
        await h.close()


async def finish(
    h: MaterializeWorld, run_id: UUID, status: str, failure: dict[str, Any] | None
) -> None:
    await h.sql(
        "UPDATE runs SET status = :s, finished_at = :t, failure = CAST(:f AS jsonb),"
        " cost = 0.5 WHERE id = :i",
        s=status,
        t=h.clock.now(),
        f=None if failure is None else json.dumps(failure),
        i=run_id,
    )


async def fire_next(h: MaterializeWorld, sid: UUID) -> UUID:
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    result = await h.materializer().materialize(sid)
    assert result.run_id is not None, result
    return result.run_id


@pytest.mark.rule("rule.accounting.failures")
async def test_accounting_rules_idempotency_and_auto_pause(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(max_consecutive_failures=2)
        # The scheduler role as production startup builds it: its accountant and the
        # worker whose post-run sweep uses it.
        role = h.scheduler_role(ids=h.world.ids.fork("acct"), materializer=h.materializer())
        accountant = role.accountant
        failure = {
            "reason": "schedule.runtime.agent_failed",
            "error_class": "ScriptedFailure",
            "provider": "scripted",
            "provider_code": "overloaded",
            "http_status": 503,
            "provider_parameter": "max_tokens",
            "message": "the provider said something long and private",
            "raw": {"headers": "whatever the provider sent"},
        }
        run_1 = await fire_next(h, sid)
        await finish(h, run_1, "FAILED", failure)
        first = await accountant.account_run(run_1)
        assert first is not None
        assert first.consecutive_failures == 1
        repeat = await accountant.account_run(run_1)
        assert repeat is not None
        assert repeat.already_accounted
        assert (await h.schedule(sid))["consecutive_failures"] == 1
        events = [e for e in (await h.ledger()).of(sid).events if e["event_type"] == RUN_ACCOUNTED]
        assert len(events) == 1
        # The six sanitized classification fields, exactly (spec "State transitions").
        assert events[0]["payload"]["failure"] == {
            k: v for k, v in failure.items() if k not in ("message", "raw")
        }
        assert events[0]["payload"]["run_status"] == "FAILED"

        run_2 = await fire_next(h, sid)
        # A cancelled run that somehow carries a failure column: its event says none.
        await finish(h, run_2, "CANCELLED", {"reason": "schedule.runtime.agent_failed"})
        cancelled = await accountant.account_run(run_2)
        assert cancelled is not None
        assert cancelled.consecutive_failures == 1

        run_3 = await fire_next(h, sid)
        await finish(h, run_3, "COMPLETED", None)
        worker = role.worker
        assert await worker.account() == 1
        assert (await h.schedule(sid))["consecutive_failures"] == 0

        for _ in range(2):
            run = await fire_next(h, sid)
            await finish(h, run, "FAILED", {"reason": "schedule.runtime.step_limit"})
            await accountant.account_run(run)
        row = await h.schedule(sid)
        assert row["state"] == "PAUSED"
        assert row["pause_reason"] == "failure_limit"
        assert row["next_fire_at"] is None
        types = (await h.ledger()).of(sid).event_types()
        assert types.count("schedule.auto_paused") == 1
        assert types.count(RUN_ACCOUNTED) == 5
        # Each accounting event records the resulting count and the failure only of a
        # run that failed.
        accounted = [
            e["payload"]
            for e in (await h.ledger()).of(sid).events
            if e["event_type"] == RUN_ACCOUNTED
        ]
        shown = [(p["run_status"], p["consecutive_failures"]) for p in accounted]
        assert shown == [
            ("FAILED", 1),
            ("CANCELLED", 1),
            ("COMPLETED", 0),
            ("FAILED", 1),
            ("FAILED", 2),
        ], shown
        assert [p["failure"] is None for p in accounted] == [False, True, True, False, False]
        assert await worker.account() == 0
    finally:
        await h.close()


@pytest.mark.rule("rule.accounting.failures")
async def test_misses_count_and_reach_the_limit(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(max_consecutive_failures=2, misfire_grace_seconds=60)
        for _ in range(2):
            h.clock.advance_to(await h.next_fire(sid) + timedelta(minutes=5))
            result = await h.materializer().materialize(sid)
            assert result.occurrence is not None
            assert result.occurrence.disposition.value == "MISSED"
        row = await h.schedule(sid)
        assert (row["state"], row["pause_reason"], row["consecutive_failures"]) == (
            "PAUSED",
            "failure_limit",
            2,
        )
        assert (await h.ledger()).of(sid).event_types().count("schedule.auto_paused") == 1
    finally:
        await h.close()


@pytest.mark.rule("rule.accounting.failures")
async def test_a_run_failing_after_its_schedule_stopped_is_accounted(pg_url: str) -> None:
    """Pausing or cancelling a schedule does not cancel its run. When that run fails at
    the failure limit, the hook still counts it and writes its outcome; only an ACTIVE
    schedule is auto-paused, so the user's pause and the cancel stand unchanged."""
    h = await MaterializeWorld.open(pg_url)
    try:
        role = h.scheduler_role(ids=h.world.ids.fork("acct"), materializer=h.materializer())
        ended: dict[str, tuple[Any, ...]] = {}
        for stop in ("pause", "cancel"):
            sid = await h.create(key=f"stopped-{stop}", max_consecutive_failures=1)
            run = await fire_next(h, sid)
            revision = (await h.schedule(sid))["current_revision"]
            await getattr(h.world.service, stop)(WHO, sid, revision)
            await finish(h, run, "FAILED", {"reason": "schedule.runtime.step_limit"})
            accounted = await role.accountant.account_run(run)
            assert accounted is not None
            assert (accounted.consecutive_failures, accounted.auto_paused) == (1, False)
            row = await h.schedule(sid)
            types = (await h.ledger()).of(sid).event_types()
            outcomes = await h.sql(
                "SELECT count(*) AS n FROM schedule_outbox WHERE schedule_id = :i", i=sid
            )
            ended[stop] = (
                row["state"],
                row["pause_reason"],
                row["consecutive_failures"],
                types.count(RUN_ACCOUNTED),
                types.count("schedule.auto_paused"),
                outcomes[0]["n"],
            )
        assert ended == {
            "pause": ("PAUSED", "user", 1, 1, 0, 1),
            "cancel": ("CANCELLED", None, 1, 1, 0, 1),
        }, ended
    finally:
        await h.close()


# What each ceiling counts, and whose runs it counts (spec "Capacity, fairness, and
# cost": the ceilings are the tenant's, of its scheduled runs; ADR 0801: a scheduled run
# is one whose metadata names a schedule). Each term is one world: the tenant's own
# scheduled run refuses the next firing, a run of another tenant or an on-demand run
# of the tenant's own (interactive or async priority) leaves it admitted.
# term -> (ceiling changes, the run's end (status, cost) or None if it stays active,
#          time from that end to the firing, the refusal its own scheduled run causes)
ADMISSION_TERMS: dict[
    str, tuple[dict[str, Any], tuple[str, Decimal] | None, timedelta, Outcome]
] = {
    # A claimed (RUNNING) run is as active as a QUEUED one.
    "concurrency_running": ({"max_active_runs": 1}, None, timedelta(0), ("RETRY", CONCURRENCY)),
    # A run of the minute counts although it already ended.
    "rate_ended": (
        {"max_materializations_per_minute": 1},
        ("COMPLETED", Decimal(0)),
        timedelta(0),
        ("MISSED", RATE),
    ),
    # An active run reserves its max_cost (2): 2 + the firing's 2 exceed 3.
    "reservation": ({"max_daily_cost": Decimal(3)}, None, timedelta(0), ("MISSED", DAILY_COST)),
    "daily_cost": (
        {"max_daily_cost": Decimal(3)},
        ("COMPLETED", Decimal(2)),
        timedelta(hours=1),
        ("MISSED", DAILY_COST),
    ),
    "monthly_cost": (
        {"max_monthly_cost": Decimal(3)},
        ("COMPLETED", Decimal(2)),
        timedelta(days=10),
        ("MISSED", MONTHLY_COST),
    ),
}
RUN_OWNERS = ("own_scheduled", "other_tenant_scheduled", "own_on_demand", "own_on_demand_async")


@pytest.mark.rule("rule.admission.dispositions")
@pytest.mark.parametrize("owner", RUN_OWNERS)
@pytest.mark.parametrize("term", sorted(ADMISSION_TERMS))
async def test_only_the_tenants_own_scheduled_runs_count(
    pg_url: str, term: str, owner: str
) -> None:
    """One earlier run, then a firing of the tenant's schedule. Only when that run is
    the tenant's own scheduled run does the firing meet the term's refusal; another
    tenant's scheduled run and the tenant's on-demand runs (even async ones) consume
    none of its concurrency, rate, reservation, or daily or monthly cost."""
    changes, end, wait, refusal = ADMISSION_TERMS[term]
    h = await open_two_tenants(pg_url)
    try:
        h.tenants = ceilings(**changes)
        if owner == "own_scheduled":
            run = await scheduled_run(h, "earlier", WHO)
        elif owner == "other_tenant_scheduled":
            run = await scheduled_run(h, "earlier", OTHER)
        elif owner == "own_on_demand":
            run = await on_demand_run(h, RunPriority.INTERACTIVE, WHO)
        else:
            run = await on_demand_run(h, RunPriority.ASYNC, WHO)
        if term == "concurrency_running":
            await start_run(h, run)
        if end is not None:
            await end_run(h, run, *end)
        h.clock.advance(wait.total_seconds())
        expected = refusal if owner == "own_scheduled" else ("MATERIALIZED", None)
        assert outcome(await fire(h, "probe", WHO)) == expected, (term, owner)
    finally:
        await h.close()


@pytest.mark.rule("rule.admission.dispositions")
async def test_the_rate_window_is_a_minute_to_the_microsecond(pg_url: str) -> None:
    """One materialization a minute. The first run ends at once (FAILED): it still
    counts, as every scheduled run created in the minute does, until a minute after
    its creation - a firing one microsecond before that is refused, one a
    microsecond after is admitted."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_materializations_per_minute=1)
        start = h.clock.now()
        inside = await once(h, "inside", start + timedelta(seconds=40))
        outside = await once(h, "outside", start + timedelta(seconds=50))
        first = await scheduled_run(h, "first")
        await end_run(h, first, "FAILED", Decimal(0))
        (row,) = await h.sql("SELECT created_at FROM runs WHERE id = :i", i=first)
        minute_later = row["created_at"] + timedelta(minutes=1)
        assert outcome(await decide(h, inside, minute_later - TICK)) == ("MISSED", RATE)
        assert outcome(await decide(h, outside, minute_later + TICK)) == ("MATERIALIZED", None)
    finally:
        await h.close()
