"""Tests of the tests for the misfire gates' materializer facets: a calculator that
walks the missed instants one by one (the loop the gates forbid) must fail the
boundedness assertion, even for yearly February 29, where the old absolute bound
(fewer than 2,000 operations) let ~1,000 steps pass. The broken calculator is
injected into the check's seam; the product is unchanged."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import gates.checks.test_misfire as misfire
from scheduling.domain.revision import ScheduleRevision
from scheduling.recurrence import DueCalculation, OperationCounter, RecurrenceCalculator, next_after

pytestmark = pytest.mark.postgres

OLD_ABSOLUTE_BOUND = 2_000


class WalkingCalculator(RecurrenceCalculator):
    """Correct answers, but it steps through every missed instant first."""

    def due(
        self,
        revision: ScheduleRevision,
        now: datetime,
        *,
        next_fire_at: datetime | None = None,
    ) -> DueCalculation:
        current = next_fire_at
        while current is not None and current <= now:
            current = next_after(revision.cadence_value, current, self.counter)
        return super().due(revision, now, next_fire_at=next_fire_at)


def walking(counter: OperationCounter) -> RecurrenceCalculator:
    return WalkingCalculator(counter)


async def test_the_old_yearly_bound_let_a_walking_calculator_pass(pg_url: str) -> None:
    # The old check's yearly case: 400 years (~97 instants). The walk stays under the
    # old absolute bound, so that check passed against it.
    _, old_span = await misfire.two_outages(
        pg_url,
        misfire.YEARLY,
        misfire.days(12),
        misfire.days(400),
        long_late=timedelta(days=3),
        calculators=walking,
    )
    assert len(old_span["walk"]) < 100
    assert old_span["ops"] < OLD_ABSOLUTE_BOUND


@pytest.mark.parametrize(
    ("cadence", "short_years", "long_years", "late", "materialized"),
    [
        (misfire.YEARLY, 12, 4000, timedelta(days=3), False),
        (misfire.MONTHLY, 1, 1000, timedelta(minutes=3), True),
    ],
    ids=["yearly", "monthly"],
)
async def test_the_hardened_check_catches_the_walk(
    pg_url: str,
    cadence: dict[str, Any],
    short_years: int,
    long_years: int,
    late: timedelta,
    materialized: bool,
) -> None:
    short, long = await misfire.two_outages(
        pg_url,
        cadence,
        misfire.days(short_years),
        misfire.days(long_years),
        long_late=late,
        calculators=walking,
    )
    # Everything else about the scan is still right ...
    misfire.assert_one_scan(long, materialized=materialized)
    # ... but the relative bound is not met.
    with pytest.raises(AssertionError):
        misfire.assert_bounded(short, long)


async def test_the_real_calculator_passes_the_same_outages(pg_url: str) -> None:
    short, long = await misfire.two_outages(
        pg_url, misfire.YEARLY, misfire.days(12), misfire.days(4000), long_late=timedelta(days=3)
    )
    misfire.assert_bounded(short, long)
