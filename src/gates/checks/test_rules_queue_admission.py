"""Spec rules beyond the gates, on PostgreSQL: what the admission controller's usage
read counts at the edges the other admission checks leave open (spec "Capacity,
fairness, and cost").

- A claimed (RUNNING) scheduled run still reserves its full ``max_cost`` against the
  rolling daily and monthly ceilings until its terminal write: the reservation is not
  released at the claim, nor replaced by the partial cost committed so far.
- A scheduled run cancelled through the run cancel service (the front door, not a
  direct row write) frees its reservation and its committed cost counts in the rolling
  day and 30 days: the cancel stamps the ``finished_at`` the windows count by.
- The windows are half-open: a run created exactly a minute before the decision no
  longer counts for the rate, and a run finished exactly a day (30 days) before it no
  longer counts for the daily (monthly) cost.

Tests of the test: ``scheduling-gates mutate`` (mutants
``queue.reservation_released_at_claim``, ``queue.monthly_ignores_reservations``,
``queue.rate_window_inclusive``, ``queue.day_window_inclusive``,
``queue.month_window_inclusive``, ``queue.cancel_leaves_finished_at_unset``).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from gates.checks.admission_support import (
    ceilings,
    decide,
    end_run,
    once,
    outcome,
    scheduled_run,
    start_run,
)
from scheduling.domain.identity import Principal
from scheduling.service.admission import DAILY_COST, MONTHLY_COST
from scheduling.service.cancellation import RunCancellation
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import LIMITS

pytestmark = pytest.mark.postgres

MAX_COST = LIMITS.max_cost  # every definition's pinned max_cost (USD 2): the reservation

WINDOWS = {
    "daily": ("max_daily_cost", DAILY_COST, timedelta(days=1)),
    "monthly": ("max_monthly_cost", MONTHLY_COST, timedelta(days=30)),
}


@pytest.mark.rule("rule.admission.reservations")
@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("spent", [Decimal(0), Decimal("0.5")])
async def test_a_claimed_run_still_reserves_its_max_cost(
    pg_url: str, window: str, spent: Decimal
) -> None:
    """One scheduled run, claimed (RUNNING) and having committed ``spent`` so far; the
    ceiling (USD 3) fits one reservation (2) but not two: the next firing is MISSED with
    the window's reason. A reservation released at the claim (or replaced by the partial
    cost) would admit it. Once that run ends with its partial cost, the firing fits."""
    ceiling, code, _ = WINDOWS[window]
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(**{ceiling: Decimal(3)})
        run = await scheduled_run(h, "claimed")
        await start_run(h, run)
        await h.sql("UPDATE runs SET cost = :c WHERE id = :i", c=spent, i=run)
        start = h.clock.now()
        refused = await once(h, "refused", start + timedelta(seconds=30))
        admitted = await once(h, "admitted", start + timedelta(seconds=40))
        result = await decide(h, refused, start + timedelta(seconds=31))
        assert outcome(result) == ("MISSED", code), (window, spent)
        # Reconciled at the terminal write: the run's committed cost replaces its
        # reservation (0.5 + 2 fit in 3; the reservation's 2 + 2 did not).
        await end_run(h, run, "COMPLETED", Decimal("0.5"))
        result = await decide(h, admitted, start + timedelta(seconds=41))
        assert outcome(result) == ("MATERIALIZED", None), (window, spent)
    finally:
        await h.close()


@pytest.mark.rule("rule.admission.dispositions")
async def test_a_run_stops_counting_for_the_rate_exactly_a_minute_after_its_creation(
    pg_url: str,
) -> None:
    """One materialization a minute: a firing decided exactly one minute after the first
    run's creation is admitted (the window is the minute before the decision, open at
    its far end; an inclusive window is a microsecond longer than a minute)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_materializations_per_minute=1)
        start = h.clock.now()
        edge = await once(h, "edge", start + timedelta(seconds=45))
        first = await scheduled_run(h, "first")
        (row,) = await h.sql("SELECT created_at FROM runs WHERE id = :i", i=first)
        minute_later = row["created_at"] + timedelta(minutes=1)
        assert outcome(await decide(h, edge, minute_later)) == ("MATERIALIZED", None)
    finally:
        await h.close()


@pytest.mark.rule("rule.admission.dispositions")
@pytest.mark.parametrize("window", sorted(WINDOWS))
async def test_a_cost_stops_counting_exactly_a_window_after_its_finish(
    pg_url: str, window: str
) -> None:
    """A scheduled run that cost USD 2 finished exactly a day (30 days) before the
    decision no longer counts in the rolling window: with a ceiling of 3 the next
    firing's reservation of 2 is admitted (counted, 2 + 2 would exceed 3)."""
    ceiling, _, length = WINDOWS[window]
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(**{ceiling: Decimal(3)})
        run = await scheduled_run(h, "earlier")
        start = h.clock.now()
        at = start + timedelta(seconds=30)
        probe = await once(h, "probe", at)
        decided_at = at + timedelta(seconds=1)
        await end_run(h, run, "COMPLETED", MAX_COST)
        await h.sql("UPDATE runs SET finished_at = :t WHERE id = :i", t=decided_at - length, i=run)
        assert outcome(await decide(h, probe, decided_at)) == ("MATERIALIZED", None), window
    finally:
        await h.close()


CANCELLER = Principal(WHO.tenant_id, WHO.principal_id, frozenset({"run.cancel"}))


@pytest.mark.rule("rule.admission.reservations")
@pytest.mark.parametrize("window", sorted(WINDOWS))
async def test_a_cancelled_runs_committed_cost_counts(pg_url: str, window: str) -> None:
    """A claimed scheduled run that committed USD 1.5 is cancelled through the run
    cancel service (as its owner, over the API role). Its reservation is freed and its
    1.5 counts: with a ceiling of 3 the next firing's 2 would exceed it (MISSED); a
    cancel that left the run without ``finished_at`` would drop the 1.5 from the
    windows and admit it."""
    ceiling, code, _ = WINDOWS[window]
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(**{ceiling: Decimal(3)})
        run = await scheduled_run(h, "cancelled")
        await start_run(h, run)
        await h.sql("UPDATE runs SET cost = 1.5 WHERE id = :i", i=run)
        cancelled = await RunCancellation(h.api, h.clock).cancel(CANCELLER, run)
        assert cancelled.status.value == "CANCELLED"
        start = h.clock.now()
        probe = await once(h, "probe", start + timedelta(seconds=30))
        result = await decide(h, probe, start + timedelta(seconds=31))
        assert outcome(result) == ("MISSED", code), window
    finally:
        await h.close()
