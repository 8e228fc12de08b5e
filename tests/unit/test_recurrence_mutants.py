"""Tests of the tests: the civil-time and bounded-work gate assertions must go red
against deliberately broken calculators.

Each mutant is a classic scheduler bug: zoneinfo's naive gap answer, +24h arithmetic,
the later instant of a fold, skipping a gap day, counting missed occurrences one by
one, and the calendar bugs of monthly/yearly cadences (an absent day clamped to the
month end, last_day off by one, February 29 every year, a date selected twice firing
twice). If an assertion stopped catching its mutant, the gate it backs would be
proving nothing. (The domain-invariant check's tests of the test are in
test_gate_hardening_calendar_domain_invariants.py.)
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gates.checks.recurrence_support import (
    REAL,
    Aim,
    Api,
    aims,
    assert_count,
    assert_next_and_latest,
    assert_resolution_on,
    assert_sequence,
    civil_cadences,
    oracle_resolve,
    selected,
    transition_aims,
    window_days,
)
from gates.checks.test_recurrence_bounded import assert_bounded
from scheduling import parse_cadence
from scheduling.domain.cadence import (
    Cadence,
    CivilCadence,
    DailyCadence,
    MonthDay,
    MonthlyCadence,
    OnceCadence,
    YearlyCadence,
)
from scheduling.domain.recurrence.calendar import selector_for
from scheduling.domain.recurrence.counter import OperationCounter, ensure
from scheduling.domain.recurrence.zones import load_zone
from scheduling.recurrence import DueCalculation, calculate_due, next_firing

Resolver = Callable[[CivilCadence, date], datetime | None]


def _naive(cadence: CivilCadence, day: date) -> datetime | None:
    """zoneinfo's own answer: fold=0 everywhere (gap -> 07:30Z, not 07:00Z)."""
    return datetime.combine(day, cadence.local_time, tzinfo=load_zone(cadence.timezone)).astimezone(
        UTC
    )


def _fold_later(cadence: CivilCadence, day: date) -> datetime | None:
    """The later instant of an ambiguous time (fires in the second pass)."""
    wall = datetime.combine(day, cadence.local_time, tzinfo=load_zone(cadence.timezone))
    return wall.replace(fold=1).astimezone(UTC)


def _gap_skipped(cadence: CivilCadence, day: date) -> datetime | None:
    """A nonexistent wall time never fires that day."""
    zone = load_zone(cadence.timezone)
    instant = datetime.combine(day, cadence.local_time, tzinfo=zone).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != datetime.combine(day, cadence.local_time):
        return None
    return instant


def _enumerating(resolver: Resolver, reach: int = 20) -> Api:
    """A calculator that enumerates local dates (``reach`` days either side of the
    reference) and resolves each with ``resolver``."""

    def instants(cadence: Cadence, around: datetime, days: int) -> list[datetime]:
        if isinstance(cadence, OnceCadence):
            return [cadence.at]
        selector = selector_for(cadence)
        counter = OperationCounter()
        found = []
        day = around.date() - timedelta(days=days)
        while day <= around.date() + timedelta(days=days):
            if selector.first_on_or_after(day, counter) == day:
                resolved = resolver(cadence, day)
                if resolved is not None:
                    found.append(resolved)
            day += timedelta(days=1)
        return sorted(set(found))

    def next_after(cadence: Cadence, instant: datetime) -> datetime | None:
        return next((n for n in instants(cadence, instant, reach) if n > instant), None)

    def latest(cadence: Cadence, instant: datetime) -> datetime | None:
        return next((n for n in reversed(instants(cadence, instant, reach)) if n <= instant), None)

    def count(cadence: Cadence, start: datetime, end: datetime) -> int:
        days = (end - start).days + 3
        return sum(
            1 for n in instants(cadence, start + (end - start) / 2, days) if start <= n <= end
        )

    return Api(next_after, latest, count)


def _plus_24h() -> Api:
    """next = latest + 24h (or + 7 days for weekly): elapsed-time arithmetic."""

    def next_after(cadence: Cadence, instant: datetime) -> datetime | None:
        latest = REAL.latest_at_or_before(cadence, instant)
        if latest is None or isinstance(cadence, OnceCadence):
            return REAL.next_after(cadence, instant)
        step = timedelta(days=1) if isinstance(cadence, DailyCadence) else timedelta(days=7)
        return latest + step

    return Api(next_after, REAL.latest_at_or_before, REAL.count_inclusive)


MUTANTS = {
    "naive-zoneinfo-gap": _enumerating(_naive),
    "fold-later": _enumerating(_fold_later),
    "gap-skipped": _enumerating(_gap_skipped),
    "plus-24h": _plus_24h(),
}

# The same resolvers over a year either side, for monthly and yearly cadences.
YEAR_WIDE = {
    "naive-zoneinfo-gap": _enumerating(_naive, 400),
    "fold-later": _enumerating(_fold_later, 400),
    "gap-skipped": _enumerating(_gap_skipped, 400),
}

# A known case that each mutant gets wrong (and the real calculator right).
NY = "America/New_York"
KNOWN = {
    "naive-zoneinfo-gap": (DailyCadence(time(2, 30), NY), datetime(2026, 3, 7, 12, tzinfo=UTC)),
    "fold-later": (DailyCadence(time(1, 30), NY), datetime(2026, 10, 31, 12, tzinfo=UTC)),
    "gap-skipped": (DailyCadence(time(2, 30), NY), datetime(2026, 3, 7, 12, tzinfo=UTC)),
    "plus-24h": (DailyCadence(time(9), NY), datetime(2026, 3, 7, 15, tzinfo=UTC)),
}


def _property(api: Api) -> Callable[[], None]:
    @settings(
        max_examples=300,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
        deadline=None,
    )
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        aim: Aim = data.draw(aims(zones=[NY, "Europe/London", "Australia/Sydney"]))
        cadence = data.draw(civil_cadences(aim, ("DAILY", "WEEKLY")))
        assert_next_and_latest(api, cadence, aim.reference)
        assert_sequence(api, cadence, aim.reference, 3)

    return property_


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_known_case_catches_each_mutant(name: str) -> None:
    cadence, reference = KNOWN[name]
    assert_sequence(REAL, cadence, reference, 3)
    with pytest.raises(AssertionError):
        assert_sequence(MUTANTS[name], cadence, reference, 3)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_generated_property_catches_each_mutant(name: str) -> None:
    """The same strategies the gate uses find each bug on their own."""
    with pytest.raises((AssertionError, ExceptionGroup)):
        _property(MUTANTS[name])()


def test_count_catches_a_gap_skipping_counter() -> None:
    cadence = DailyCadence(time(2, 30), NY)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    end = datetime(2026, 3, 31, tzinfo=UTC)
    assert assert_count(REAL, cadence, start, end) == 30
    with pytest.raises(AssertionError):
        assert_count(MUTANTS["gap-skipped"], cadence, start, end)


def _counting_one_by_one(
    cadence: Cadence,
    grace: timedelta,
    now: datetime,
    *,
    next_fire_at: datetime | None = None,
    counter: OperationCounter | None = None,
) -> DueCalculation:
    """Right answers, unbounded work: walks every missed occurrence."""
    ops = ensure(counter)
    honest = calculate_due(cadence, grace, now, next_fire_at=next_fire_at)
    if honest.candidate is not None and next_fire_at is not None:
        cursor = next_fire_at - timedelta(microseconds=1)
        while (
            firing := next_firing(cadence, cursor, ops)
        ) is not None and firing.instant < honest.candidate:
            cursor = firing.instant
    return honest


def test_bounded_work_catches_a_loop_per_missed_occurrence() -> None:
    cadence = parse_cadence({"kind": "DAILY", "local_time": "02:30", "timezone": NY})
    since = datetime(2009, 6, 1, tzinfo=UTC)
    later = since + timedelta(days=3000)
    assert_bounded(cadence, since, later)
    with pytest.raises(AssertionError):
        assert_bounded(cadence, since, later, _counting_one_by_one)


# ------------------------------------------------------------ calendar mutants

# How many times a calculator fires on a local date (0, 1, or wrongly 2).
Times = Callable[[CivilCadence, date], int]


def _calendar_api(times: Times) -> Api:
    """Enumerates local dates, fires each ``times(cadence, day)`` times, resolving the
    wall time with the oracle's (correct) fold and gap rules: only the calendar differs."""

    def instants(cadence: CivilCadence, first: date, last: date) -> list[datetime]:
        found: list[datetime] = []
        day = first
        while day <= last:
            n = times(cadence, day)
            resolved = oracle_resolve(cadence.timezone, day, cadence.local_time) if n else None
            if resolved is not None:
                found += [resolved[0]] * n
            day += timedelta(days=1)
        return sorted(found)

    def next_after(cadence: Cadence, instant: datetime) -> datetime | None:
        if isinstance(cadence, OnceCadence):
            return REAL.next_after(cadence, instant)
        start = instant.date() - timedelta(days=3)
        span = instants(cadence, start, start + timedelta(days=window_days(cadence)))
        return next((n for n in span if n > instant), None)

    def latest(cadence: Cadence, instant: datetime) -> datetime | None:
        if isinstance(cadence, OnceCadence):
            return REAL.latest_at_or_before(cadence, instant)
        end = instant.date() + timedelta(days=3)
        span = instants(cadence, end - timedelta(days=window_days(cadence)), end)
        return next((n for n in reversed(span) if n <= instant), None)

    def count(cadence: Cadence, start: datetime, end: datetime) -> int:
        if isinstance(cadence, OnceCadence):
            return REAL.count_inclusive(cadence, start, end)
        span = instants(cadence, start.date() - timedelta(days=2), end.date() + timedelta(days=2))
        return sum(1 for n in span if start <= n <= end)

    return Api(next_after, latest, count)


def _last(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def _honest(cadence: CivilCadence, day: date) -> int:
    return int(selected(cadence, day))


def _clamped(cadence: CivilCadence, day: date) -> int:
    """A numbered day absent from the month fires on its last day instead."""
    if not isinstance(cadence, MonthlyCadence):
        return _honest(cadence, day)
    clamped = {min(d, _last(day)) for d in cadence.days_of_month}
    return int(day.day in clamped or (cadence.last_day and day.day == _last(day)))


def _last_day_off_by_one(cadence: CivilCadence, day: date) -> int:
    """last_day computed as the month's length minus one."""
    if not isinstance(cadence, MonthlyCadence):
        return _honest(cadence, day)
    return int(day.day in cadence.days_of_month or (cadence.last_day and day.day == _last(day) - 1))


def _leap_day_every_year(cadence: CivilCadence, day: date) -> int:
    """February 29 fires on February 28 in common years."""
    if not isinstance(cadence, YearlyCadence):
        return _honest(cadence, day)
    stand_in = MonthDay(2, 29) in cadence.dates and not calendar.isleap(day.year)
    return int(_honest(cadence, day) or (stand_in and (day.month, day.day) == (2, 28)))


def _selected_twice_fires_twice(cadence: CivilCadence, day: date) -> int:
    """A day listed and also the month's last day fires once per selector."""
    if not isinstance(cadence, MonthlyCadence):
        return _honest(cadence, day)
    return int(day.day in cadence.days_of_month) + int(cadence.last_day and day.day == _last(day))


CALENDAR_MUTANTS = {
    "absent-day-clamped": _calendar_api(_clamped),
    "last-day-off-by-one": _calendar_api(_last_day_off_by_one),
    "feb-29-every-year": _calendar_api(_leap_day_every_year),
    "selected-twice-fires-twice": _calendar_api(_selected_twice_fires_twice),
}
HONEST_CALENDAR = _calendar_api(_honest)

FEB_1 = datetime(2026, 2, 1, tzinfo=UTC)
CALENDAR_KNOWN: dict[str, tuple[CivilCadence, str]] = {
    # The real calculator fires on 2026-03-31; the mutant on 2026-02-28.
    "absent-day-clamped": (MonthlyCadence(time(9), NY, (31,)), "sequence"),
    "last-day-off-by-one": (MonthlyCadence(time(9), NY, (), True), "sequence"),
    # The real calculator fires on 2028-02-29; the mutant on 2026-02-28.
    "feb-29-every-year": (YearlyCadence(time(9), NY, (MonthDay(2, 29),)), "sequence"),
    # January 31st is both day 31 and the last day: one firing, not two.
    "selected-twice-fires-twice": (MonthlyCadence(time(9), NY, (31,), True), "count"),
}


def _calendar_check(api: Api, cadence: CivilCadence, how: str) -> None:
    if how == "sequence":
        assert_sequence(api, cadence, FEB_1, 4)
    else:
        assert_count(api, cadence, datetime(2026, 1, 1, tzinfo=UTC), FEB_1)


@pytest.mark.parametrize("name", sorted(CALENDAR_MUTANTS))
def test_known_calendar_case_catches_each_mutant(name: str) -> None:
    cadence, how = CALENDAR_KNOWN[name]
    _calendar_check(REAL, cadence, how)
    _calendar_check(HONEST_CALENDAR, cadence, how)
    with pytest.raises(AssertionError):
        _calendar_check(CALENDAR_MUTANTS[name], cadence, how)


def _calendar_property(api: Api) -> Callable[[], None]:
    """What the calendar_recurrence gate runs, on a few zones, pinned."""

    @settings(
        max_examples=100,
        derandomize=True,
        database=None,
        phases=[Phase.generate],  # no shrinking: finding the bug is the point
        suppress_health_check=[HealthCheck.too_slow],
        deadline=None,
    )
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        zones = [NY, "Europe/London", "Australia/Sydney"]
        target = data.draw(st.sampled_from(["gap", "fold", "near"]))
        aim: Aim = data.draw(aims(zones) if target == "near" else transition_aims(target, zones))
        cadence = data.draw(civil_cadences(aim, ("MONTHLY", "YEARLY")))
        assert_resolution_on(api, cadence, aim.day)
        assert_next_and_latest(api, cadence, aim.reference)
        assert_sequence(api, cadence, aim.reference, 6)
        end = aim.reference + timedelta(days=data.draw(st.integers(0, 800)))
        assert_count(api, cadence, aim.reference, end)

    return property_


def test_calendar_property_passes_an_honest_enumerating_calculator() -> None:
    """The mutants below fail for their bug, not for the way they are built."""
    _calendar_property(HONEST_CALENDAR)()


@pytest.mark.parametrize("name", sorted(CALENDAR_MUTANTS))
def test_calendar_property_catches_each_mutant(name: str) -> None:
    with pytest.raises((AssertionError, ExceptionGroup)):
        _calendar_property(CALENDAR_MUTANTS[name])()


@pytest.mark.parametrize("name", ["naive-zoneinfo-gap", "fold-later", "gap-skipped"])
def test_resolution_check_catches_fold_and_gap_mutants_on_calendar_kinds(name: str) -> None:
    """Monthly and yearly cadences obey the same fold and gap rules (known NY dates)."""
    gap_day, fold_day = date(2026, 3, 8), date(2026, 11, 1)
    cases: list[tuple[CivilCadence, date]] = [
        (MonthlyCadence(time(2, 30), NY, (8,)), gap_day),
        (YearlyCadence(time(2, 30), NY, (MonthDay(3, 8),)), gap_day),
        (MonthlyCadence(time(1, 30), NY, (1,)), fold_day),
        (YearlyCadence(time(1, 30), NY, (MonthDay(11, 1),)), fold_day),
    ]
    assert [assert_resolution_on(REAL, c, d) for c, d in cases] == ["gap", "gap", "fold", "fold"]
    caught = set()
    for index, (cadence, day) in enumerate(cases):
        try:
            assert_resolution_on(YEAR_WIDE[name], cadence, day)
        except AssertionError:
            caught.add(index)
    # The naive and gap-skipping resolvers break gaps; fold-later breaks folds.
    must_catch = {2, 3} if name == "fold-later" else {0, 1}
    assert must_catch <= caught, f"{name}: caught only cases {sorted(caught)}"
