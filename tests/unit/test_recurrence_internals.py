"""The calculator's building blocks: the transition reader agrees with zoneinfo, tzdata's
shape matches the calculator's assumptions, and calendar arithmetic equals brute force."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from importlib import resources

import pytest

from scheduling.domain.cadence import MonthDay
from scheduling.domain.recurrence.calendar import Daily, Monthly, Weekly, Yearly, count_between
from scheduling.domain.recurrence.counter import OperationCounter
from scheduling.domain.recurrence.tzif import zone_transitions
from scheduling.domain.recurrence.zones import load_zone, zone_bytes, zone_keys

SPAN = (datetime(1800, 1, 1, tzinfo=UTC), datetime(2080, 1, 1, tzinfo=UTC))


def test_zones_come_from_the_tzdata_package() -> None:
    key = "America/New_York"
    packaged = resources.files("tzdata.zoneinfo").joinpath("America", "New_York").read_bytes()
    assert zone_bytes(key) == packaged
    assert load_zone(key).key == key
    assert load_zone(key) is load_zone(key)
    assert "Factory" not in zone_keys()
    assert len(zone_keys()) > 500


def test_transition_reader_agrees_with_zoneinfo_everywhere() -> None:
    checked = 0
    for key in sorted(zone_keys()):
        zone = load_zone(key)
        for t in zone_transitions(key).between(*SPAN):
            before = (t.instant - timedelta(seconds=1)).astimezone(zone).utcoffset()
            after = t.instant.astimezone(zone).utcoffset()
            assert before is not None
            assert after is not None
            assert (before.total_seconds(), after.total_seconds()) == (t.before, t.after), (key, t)
            checked += 1
    assert checked > 50_000


def test_tzdata_has_no_gap_or_fold_longer_than_a_day() -> None:
    """The calculator relies on this: no two dates share an instant, and a two-day slack
    around the reference's local date can never hide an occurrence."""
    for key in sorted(zone_keys()):
        for t in zone_transitions(key).explicit:
            assert abs(t.after - t.before) <= 86400, (key, t)


def _brute(selector: object, day: date) -> bool:
    if isinstance(selector, Daily):
        return True
    if isinstance(selector, Weekly):
        return day.isoweekday() in selector.weekdays
    if isinstance(selector, Monthly):
        return day.day in selector.selected_in(day.year, day.month)
    assert isinstance(selector, Yearly)
    return MonthDay(day.month, day.day) in selector.dates


SELECTORS = [
    Daily(),
    Weekly((1, 3, 7)),
    Weekly((5,)),
    Monthly((1, 15, 31), True),
    Monthly((30,), False),
    Monthly((), True),
    Monthly((29, 31), False),
    Yearly((MonthDay(2, 29),)),
    Yearly((MonthDay(1, 1), MonthDay(2, 28), MonthDay(2, 29), MonthDay(12, 31))),
]


@pytest.mark.parametrize("selector", SELECTORS, ids=repr)
def test_calendar_arithmetic_equals_brute_force(selector: object) -> None:
    rnd = random.Random(20261130)
    counter = OperationCounter()
    for _ in range(150):
        a = date(1890, 1, 1) + timedelta(days=rnd.randrange(80_000))
        b = a + timedelta(days=rnd.randrange(900))
        expected = sum(_brute(selector, a + timedelta(days=i)) for i in range((b - a).days + 1))
        assert count_between(selector, a, b, counter) == expected  # type: ignore[arg-type]
        first = a
        while not _brute(selector, first):
            first += timedelta(days=1)
        assert selector.first_on_or_after(a, counter) == first  # type: ignore[attr-defined]
        last = b
        while not _brute(selector, last):
            last -= timedelta(days=1)
        assert selector.last_on_or_before(b, counter) == last  # type: ignore[attr-defined]


def test_count_costs_the_same_for_a_week_and_a_century() -> None:
    from scheduling import parse_cadence
    from scheduling.recurrence import count_inclusive

    cadence = parse_cadence(
        {"kind": "DAILY", "local_time": "02:30", "timezone": "America/New_York"}
    )
    week, century = OperationCounter(), OperationCounter()
    start = datetime(1950, 1, 1, tzinfo=UTC)
    assert count_inclusive(cadence, start, start + timedelta(days=7), week) == 7
    assert count_inclusive(cadence, start, datetime(2050, 1, 1, tzinfo=UTC), century) == 36525
    assert century.resolutions == week.resolutions
    assert century.total <= week.total + 10
