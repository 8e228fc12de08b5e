"""The first instant datetime can hold (0001-01-01T00:00:00Z, a Monday) is a nominal
instant of a daily or Monday cadence at 00:00 UTC, and every query agrees: nothing can
precede it, so the "at or after" and inclusive forms must not step before it (they once
raised ``OverflowError`` or left it out of a count)."""

from __future__ import annotations

from datetime import UTC, datetime, time

from scheduling.domain.cadence import DailyCadence, WeeklyCadence
from scheduling.recurrence import count_inclusive, first_at_or_after, latest_at_or_before

FIRST_INSTANT = datetime(1, 1, 1, tzinfo=UTC)
DAILY = DailyCadence(time(0), "UTC")


def test_the_first_instant_is_counted_where_it_is_latest() -> None:
    assert latest_at_or_before(DAILY, FIRST_INSTANT) == FIRST_INSTANT
    assert count_inclusive(DAILY, FIRST_INSTANT, FIRST_INSTANT) == 1


def test_a_weekly_count_from_the_first_instant() -> None:
    # Mondays 1, 8, 15, 22, 29 and Sundays 7, 14, 21, 28 of January, year 1.
    weekly = WeeklyCadence(time(0), "UTC", (1, 7))
    assert count_inclusive(weekly, FIRST_INSTANT, datetime(1, 1, 31, tzinfo=UTC)) == 9


def test_first_at_or_after_the_first_instant() -> None:
    assert first_at_or_after(DAILY, FIRST_INSTANT) == FIRST_INSTANT
    noon = DailyCadence(time(12), "UTC")
    assert first_at_or_after(noon, FIRST_INSTANT) == datetime(1, 1, 1, 12, tzinfo=UTC)
