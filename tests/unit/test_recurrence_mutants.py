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

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.checks.recurrence_support import (
    REAL,
    Aim,
    Api,
    aims,
    assert_count,
    assert_next_and_latest,
    assert_sequence,
    civil_cadences,
)
from gates.checks.test_recurrence_bounded import assert_bounded
from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence, CivilCadence, DailyCadence, OnceCadence
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


def _enumerating(resolver: Resolver) -> Api:
    """A calculator that enumerates local dates and resolves each with ``resolver``."""

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
        return next((n for n in instants(cadence, instant, 20) if n > instant), None)

    def latest(cadence: Cadence, instant: datetime) -> datetime | None:
        return next((n for n in reversed(instants(cadence, instant, 20)) if n <= instant), None)

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
