"""Tests of the tests: boundedness is measured by the harness, not reported by the
product. Each wrong implementation below answers correctly and never touches the
product's ``OperationCounter`` (so the counter-based assertions pass it); the
harness-measured line bounds (``gates.checks.work_meter``) must turn the gates red.

* a 36,525-step loop over 100 years of dailies in ``count_inclusive``;
* a 6,969-step loop in a calendar kind's ``next_after`` / ``latest_at_or_before``;
* the same loops hidden inside the calculator a schedule worker's scan uses.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import gates.checks.test_misfire as misfire
from gates.checks.test_recurrence_bounded import (
    CALENDAR_CASES,
    DAILY_CASES,
    Lookups,
    assert_bounded,
    assert_metered_bounded,
)
from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence
from scheduling.domain.revision import ScheduleRevision
from scheduling.recurrence import (
    DueCalculation,
    OperationCounter,
    RecurrenceCalculator,
    count_inclusive,
    latest_at_or_before,
    next_after,
)

HERE = (__file__,)
DAY = timedelta(days=1)
CENTURY_OF_DAILIES = 36_525
CALENDAR_LOOP = 6_969


def day_walking_count(
    cadence: Cadence, start: datetime, end: datetime, counter: OperationCounter | None = None
) -> int:
    """The right count, after walking every day of the span (no counter touched)."""
    day = start
    while day <= end:
        day += DAY
    return count_inclusive(cadence, start, end)


def calendar_steps(n: int) -> None:
    """Step ``n`` months one at a time (what a per-occurrence calendar loop does)."""
    month = 0
    while month < n:
        month += 1


def calendar_looping_next(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> datetime | None:
    """The right answer after 6,969 calendar steps (one per month of 580 years)."""
    calendar_steps(CALENDAR_LOOP)
    return next_after(cadence, instant)


def calendar_looping_latest(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> datetime | None:
    calendar_steps(CALENDAR_LOOP)
    return latest_at_or_before(cadence, instant)


SINCE = datetime(1990, 1, 1, tzinfo=UTC)
DAILY = parse_cadence({"kind": "DAILY", "local_time": "09:00", "timezone": "America/New_York"})


def test_century_of_dailies_count_loop_is_caught() -> None:
    long_now = SINCE + timedelta(days=CENTURY_OF_DAILIES, hours=5)
    assert count_inclusive(DAILY, SINCE, long_now) >= CENTURY_OF_DAILIES
    wrong = Lookups(count_inclusive=day_walking_count, extra_roots=HERE)
    with pytest.raises(AssertionError, match="count_inclusive"):
        assert_metered_bounded(DAILY, SINCE, SINCE + timedelta(days=7), long_now, wrong)
    # The whole calculator-facet assertion (counter bounds included) fails too.
    with pytest.raises(AssertionError, match="count_inclusive"):
        assert_bounded(DAILY, SINCE, long_now, lookups=wrong)


@pytest.mark.parametrize("kind", ["MONTHLY", "YEARLY"])
@pytest.mark.parametrize("which", ["next_after", "latest_at_or_before"])
def test_calendar_loop_is_caught(kind: str, which: str) -> None:
    payload, days = next((p, d) for p, d in CALENDAR_CASES if p["kind"] == kind)
    cadence = parse_cadence(payload)
    long_now = SINCE + timedelta(days=days, hours=7)
    if which == "next_after":
        wrong = Lookups(next_after=calendar_looping_next, extra_roots=HERE)
    else:
        wrong = Lookups(latest_at_or_before=calendar_looping_latest, extra_roots=HERE)
    with pytest.raises(AssertionError, match=which):
        assert_metered_bounded(cadence, SINCE, SINCE + timedelta(days=7), long_now, wrong)


def test_the_real_lookups_pass_every_case() -> None:
    for payload, days in [*DAILY_CASES, *CALENDAR_CASES]:
        cadence = parse_cadence(payload)
        long_now = SINCE + timedelta(days=days, hours=7)
        assert_metered_bounded(cadence, SINCE, SINCE + timedelta(days=7), long_now)


class DayWalkingCalculator(RecurrenceCalculator):
    """Correct decisions, after one step per missed day; never touches the counter."""

    def due(
        self,
        revision: ScheduleRevision,
        now: datetime,
        *,
        next_fire_at: datetime | None = None,
    ) -> DueCalculation:
        day = next_fire_at
        while day is not None and day <= now:
            day += DAY
        return super().due(revision, now, next_fire_at=next_fire_at)


class CalendarLoopingCalculator(RecurrenceCalculator):
    def due(
        self,
        revision: ScheduleRevision,
        now: datetime,
        *,
        next_fire_at: datetime | None = None,
    ) -> DueCalculation:
        if next_fire_at is not None and now - next_fire_at > timedelta(days=366):
            calendar_steps(CALENDAR_LOOP)
        return super().due(revision, now, next_fire_at=next_fire_at)


def day_walking(counter: OperationCounter) -> RecurrenceCalculator:
    return DayWalkingCalculator(counter)


def calendar_looping(counter: OperationCounter) -> RecurrenceCalculator:
    return CalendarLoopingCalculator(counter)


@pytest.mark.postgres
async def test_scan_with_a_day_walking_calculator_fails_misfire_bounded(pg_url: str) -> None:
    short, long = await misfire.two_outages(
        pg_url,
        misfire.DAILY,
        timedelta(days=7),
        misfire.days(100),
        long_late=timedelta(seconds=20),
        calculators=day_walking,
        extra_roots=HERE,
    )
    misfire.assert_one_scan(long, materialized=True)
    # The product's counter sees nothing wrong ...
    assert long["ops"] <= misfire.SAME_ORDER * short["ops"]
    # ... the harness does.
    with pytest.raises(AssertionError, match="product lines"):
        misfire.assert_bounded(short, long)


@pytest.mark.postgres
async def test_scan_with_a_calendar_loop_fails_calendar_misfire_bounded(pg_url: str) -> None:
    short, long = await misfire.two_outages(
        pg_url,
        misfire.MONTHLY,
        misfire.days(1),
        misfire.days(1000),
        long_late=timedelta(minutes=3),
        calculators=calendar_looping,
        extra_roots=HERE,
    )
    misfire.assert_one_scan(long, materialized=True)
    assert long["ops"] <= misfire.SAME_ORDER * short["ops"]
    with pytest.raises(AssertionError, match="product lines"):
        misfire.assert_bounded(short, long)
