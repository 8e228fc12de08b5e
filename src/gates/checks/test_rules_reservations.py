"""Spec rules beyond the gates, on PostgreSQL: admission reservations and their
reconciliation, the bounded admission backoff of a concurrency denial, the schedule
worker's per-definition isolation and how long its loop sleeps (spec "Capacity,
fairness, and cost", "Ports").
Tests of the test: ``scheduling-gates mutate`` (mutants ``admission.reserves_actual_cost``,
``admission.terminal_runs_keep_reserving``, ``admission.failed_runs_keep_reserving``,
``admission.daily_cost_only_completed``, ``worker.retry_not_set_aside``,
``worker.error_stops_the_pass``, ``worker.sleep_ignores_next_fire``,
``worker.sleep_ignores_backoff``)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from gates.checks.admission_support import end_run, fire, outcome, scheduled_run
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.admission import MAX_BACKOFF_SECONDS
from scheduling.service.admission import DAILY_COST, MONTHLY_COST
from scheduling.service.materializer import MaterializeResult, MaterializeStatus
from scheduling.testing import ConfiguredTenantConfiguration, PostgresAdmissionController
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import CEILINGS, LIMITS

pytestmark = pytest.mark.postgres

MAX_COST = LIMITS.max_cost  # every definition's pinned max_cost (the reservation)


def ceilings(**changes: Any) -> ConfiguredTenantConfiguration:
    return ConfiguredTenantConfiguration(default=CEILINGS.model_copy(update=changes))


async def finish(h: MaterializeWorld, run_id: UUID, cost: Decimal) -> None:
    """The run ends COMPLETED with its terminal usage ``cost`` (committed)."""
    await h.sql(
        "UPDATE runs SET status = 'COMPLETED', finished_at = :t, cost = :c WHERE id = :i",
        t=h.clock.now(),
        c=cost,
        i=run_id,
    )


def disposition(result: MaterializeResult) -> tuple[str, str | None]:
    assert result.status is MaterializeStatus.DECIDED, result
    assert result.occurrence is not None
    return result.occurrence.disposition.value, result.occurrence.reason_code


def run_of(result: MaterializeResult) -> UUID:
    assert result.occurrence is not None, result
    assert result.occurrence.run_id is not None, result
    return result.occurrence.run_id


@pytest.mark.rule("rule.admission.reservations")
async def test_reservations_charge_max_cost_and_reconcile_on_terminal_usage(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        # Room for two reservations and a little committed usage, never three reservations.
        ceiling = 2 * MAX_COST + Decimal("1")
        h.tenants = ceilings(max_monthly_cost=ceiling, max_daily_cost=Decimal(10_000))
        a = await h.create(title="a", key="a")
        b = await h.create(title="b", key="b")
        c = await h.create(title="c", key="c")
        h.clock.advance_to(await h.next_fire(a) + timedelta(seconds=1))
        first_a = await h.materializer().materialize(a)
        first_b = await h.materializer().materialize(b)
        assert disposition(first_a) == disposition(first_b) == ("MATERIALIZED", None)
        run_a, run_b = run_of(first_a), run_of(first_b)
        # Two active runs with no usage yet still reserve their max_cost each.
        costs = await h.sql("SELECT cost FROM runs WHERE status = 'QUEUED'")
        assert [Decimal(r["cost"]) for r in costs] == [Decimal(0), Decimal(0)]
        assert disposition(await h.materializer().materialize(c)) == ("MISSED", MONTHLY_COST)
        assert (await h.ledger()).of(c).runs == []

        # Reconciliation: A's reservation is replaced by its (smaller) terminal usage.
        await finish(h, run_a, Decimal("0.5"))
        h.clock.advance_to(await h.next_fire(c) + timedelta(seconds=1))
        second_c = await h.materializer().materialize(c)
        assert disposition(second_c) == ("MATERIALIZED", None)  # 0.5 + 2 reserved + 2 fits

        # ... and a terminal usage counts in full: B's 1.5 plus C's reservation and the
        # candidate's no longer fit, so the next occurrence of A is MISSED.
        await finish(h, run_b, Decimal("1.5"))
        assert disposition(await h.materializer().materialize(a)) == ("MISSED", MONTHLY_COST)
        evidence = await h.sql(
            "SELECT status, cost FROM runs ORDER BY created_at, id",
        )
        assert [r["status"] for r in evidence] == ["COMPLETED", "COMPLETED", "QUEUED"]
    finally:
        await h.close()


@pytest.mark.rule("rule.admission.reservations")
@pytest.mark.parametrize("status", ["COMPLETED", "FAILED", "CANCELLED"])
@pytest.mark.parametrize(
    ("window", "wait", "code"),
    [
        pytest.param("daily", timedelta(hours=1), DAILY_COST, id="daily"),
        pytest.param("monthly", timedelta(days=10), MONTHLY_COST, id="monthly"),
    ],
)
async def test_every_terminal_runs_cost_counts(
    pg_url: str, status: str, window: str, wait: timedelta, code: str
) -> None:
    """Reconciliation whatever the ending: a scheduled run that ended COMPLETED, FAILED
    or CANCELLED with a committed cost of 1.5 no longer holds a concurrency slot or its
    reservation (one active run allowed, yet the firing is not retried), and its
    committed cost counts in the rolling day and 30 days (1.5 and the firing's 2 exceed
    3; a failed or cancelled run's usage is not free)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_active_runs=1, **{f"max_{window}_cost": Decimal(3)})
        run = await scheduled_run(h, "earlier")
        await end_run(h, run, status, Decimal("1.5"))
        h.clock.advance(wait.total_seconds())
        assert outcome(await fire(h, "probe")) == ("MISSED", code), status
    finally:
        await h.close()


@pytest.mark.rule("rule.admission.retry_backoff")
async def test_a_concurrency_denial_is_retried_after_a_bounded_backoff(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_active_runs=1)
        ids = [await h.create(title=f"s{i}", key=f"s{i}") for i in range(2)]
        h.clock.advance_to(await h.next_fire(ids[0]) + timedelta(seconds=1))
        worker = h.worker(h.materializer(), batch_size=10)
        first = await worker.run_once()
        statuses = sorted(r.status.value for r in first.results)
        assert statuses == ["decided", "retry"], statuses
        loser = next(r for r in first.results if r.status is MaterializeStatus.RETRY)
        assert loser.retry_after_seconds is not None
        assert loser.retry_after_seconds > 0
        assert (await h.ledger()).of(loser.schedule_id).occurrences == []
        assert (await h.schedule(loser.schedule_id))["next_fire_at"] <= h.clock.now()
        # Within the backoff the loser is set aside, not hammered.
        again = await worker.run_once()
        assert again.deferred == [loser.schedule_id], again
        assert loser.schedule_id not in again.scanned
        # After the backoff, with the slot free, it is retried and materializes.
        winner = next(r for r in first.results if r.status is MaterializeStatus.DECIDED)
        await finish(h, run_of(winner), Decimal(0))
        h.clock.advance(loser.retry_after_seconds + 1)
        later = await worker.run_once()
        assert [r.schedule_id for r in later.results] == [loser.schedule_id]
        assert disposition(later.results[0]) == ("MATERIALIZED", None)
        # The backoff is bounded whatever the controller is configured with.
        other = await h.create(title="bounded", key="bounded")
        h.clock.advance_to(await h.next_fire(other) + timedelta(seconds=1))
        patient = PostgresAdmissionController(h.tenants, backoff_seconds=1e6)
        denied = await h.materializer(admission=patient).materialize(other)
        assert denied.status is MaterializeStatus.RETRY
        assert denied.retry_after_seconds == MAX_BACKOFF_SECONDS
    finally:
        await h.close()


@pytest.mark.rule("rule.worker.isolated_definitions")
async def test_a_corrupt_definition_neither_rolls_back_nor_blocks_its_batch(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = sorted([await h.create(title=f"s{i}", key=f"s{i}") for i in range(3)], key=str)
        fire = await h.next_fire(ids[0])
        # Same instant for all three, so the batch is in id order: the corrupt one first.
        bad = ids[0]
        await h.corrupt(bad)
        h.clock.advance_to(fire + timedelta(seconds=1))
        worker = h.worker(h.materializer(), expect_errors=True, batch_size=10)
        report = await worker.run_once()
        assert list(report.errors) == [bad], report.errors
        assert sorted(map(str, (r.schedule_id for r in report.results))) == sorted(
            map(str, ids[1:])
        )
        ledger = await h.ledger()
        assert ledger.of(bad).occurrences == []
        assert (await h.schedule(bad))["next_fire_at"] == fire
        for good in ids[1:]:
            assert [o["disposition"] for o in ledger.of(good).occurrences] == ["MATERIALIZED"]
    finally:
        await h.close()


@pytest.mark.rule("rule.worker.isolated_definitions")
async def test_a_set_aside_definition_does_not_fill_the_next_batch(pg_url: str) -> None:
    """With a batch of one, the corrupt definition due first is set aside after its
    failure; the next pass, before that backoff ends, still reads a batch that holds the
    healthy sibling due after it (the set-aside one does not take the batch's place)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        bad = await h.create(title="bad", key="bad")
        good = await h.create(title="good", key="good")
        fire = await h.next_fire(bad)
        await h.corrupt(bad)
        await h.sql(
            "UPDATE schedules SET next_fire_at = :t WHERE id = :i",
            t=fire - timedelta(minutes=1),
            i=bad,
        )
        h.clock.advance_to(fire + timedelta(seconds=1))
        worker = h.worker(h.materializer(), expect_errors=True, batch_size=1)
        first = await worker.run_once()
        assert list(first.errors) == [bad], first.errors
        second = await worker.run_once()
        assert [r.schedule_id for r in second.results] == [good], second
        ledger = await h.ledger()
        assert [o["disposition"] for o in ledger.of(good).occurrences] == ["MATERIALIZED"]
        assert ledger.of(bad).occurrences == []
    finally:
        await h.close()


@pytest.mark.rule("rule.worker.wakes_in_time")
async def test_the_loop_sleeps_until_the_next_firing_the_poll_or_the_backoff(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_active_runs=1)
        ids = [await h.create(title=f"w{i}", key=f"w{i}") for i in range(2)]
        fire = await h.next_fire(ids[0])
        assert await h.next_fire(ids[1]) == fire
        h.clock.advance_to(fire - timedelta(seconds=100))
        polling = h.worker(h.materializer(), fallback_poll_seconds=30)
        patient = h.worker(h.materializer(), fallback_poll_seconds=300)
        slept = {
            "poll_first": await polling.sleep_seconds(),
            "firing_first": await patient.sleep_seconds(),
        }
        # Due now: one is decided, the other denied (one active run) and set aside for
        # an admission backoff shorter than the contention pause; the loop wakes when
        # that backoff ends, not a pause later.
        backoff = 0.25
        h.clock.advance_to(fire + timedelta(seconds=1))
        admission = PostgresAdmissionController(h.tenants, backoff_seconds=backoff)
        worker = h.worker(h.materializer(admission=admission), fallback_poll_seconds=300)
        assert backoff < worker.settings.contention_pause_seconds
        statuses = sorted(r.status.value for r in (await worker.run_once()).results)
        assert statuses == ["decided", "retry"], statuses
        slept["set_aside"] = await worker.sleep_seconds()
        gate_evidence.record("slept_seconds", slept)
        assert slept == {"poll_first": 30, "firing_first": 100, "set_aside": backoff}
    finally:
        await h.close()
