"""Date selectors: which local dates a civil cadence selects, by calendar arithmetic.

Each selector answers in bounded work, independent of how many dates a span holds:

* ``first_on_or_after`` / ``last_on_or_before`` scan at most a handful of weeks, 13
  months or 9 years (February 29 may be 8 years away across a non-leap century);
* ``count(a, b)`` is a prefix difference ``F(b) - F(a - 1)`` where ``F`` counts selected
  dates since 0001-01-01 in closed form (Gregorian leap-year formula) plus a table of
  the selected dates before each month of a common or leap year (ADR 1741: built once
  per selector, so a count never walks the months of its final year).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from typing import Protocol

from scheduling.domain.cadence import (
    CivilCadence,
    DailyCadence,
    MonthDay,
    MonthlyCadence,
    WeeklyCadence,
    YearlyCadence,
)
from scheduling.domain.recurrence.counter import OperationCounter

_ONE_DAY = timedelta(days=1)


_MONTH_LENGTHS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def leaps_through(year: int) -> int:
    """Leap years in 1..year."""
    return year // 4 - year // 100 + year // 400


def month_length(year: int, month: int) -> int:
    if month == 2 and is_leap(year):
        return 29
    return _MONTH_LENGTHS[month - 1]


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + n
    return index // 12, index % 12 + 1


class DateSelector(Protocol):
    """The set of local dates a civil cadence selects."""

    def first_on_or_after(self, day: date, counter: OperationCounter) -> date | None: ...

    def last_on_or_before(self, day: date, counter: OperationCounter) -> date | None: ...

    def count_through(self, day: date, counter: OperationCounter) -> int:
        """Selected dates in 0001-01-01 .. ``day``."""
        ...


def count_between(
    selector: DateSelector, first: date, last: date, counter: OperationCounter
) -> int:
    """Selected dates in ``first`` .. ``last`` inclusive."""
    if last < first:
        return 0
    before = 0 if first == date.min else selector.count_through(first - _ONE_DAY, counter)
    return selector.count_through(last, counter) - before


@dataclass(frozen=True)
class Daily:
    def first_on_or_after(self, day: date, counter: OperationCounter) -> date | None:
        counter.calendar_steps += 1
        return day

    def last_on_or_before(self, day: date, counter: OperationCounter) -> date | None:
        counter.calendar_steps += 1
        return day

    def count_through(self, day: date, counter: OperationCounter) -> int:
        counter.calendar_steps += 1
        return day.toordinal()


@dataclass(frozen=True)
class Weekly:
    weekdays: tuple[int, ...]

    def first_on_or_after(self, day: date, counter: OperationCounter) -> date | None:
        counter.calendar_steps += 1
        ahead = min((w - day.isoweekday()) % 7 for w in self.weekdays)
        try:
            return day + timedelta(days=ahead)
        except OverflowError:
            return None

    def last_on_or_before(self, day: date, counter: OperationCounter) -> date | None:
        counter.calendar_steps += 1
        back = min((day.isoweekday() - w) % 7 for w in self.weekdays)
        try:
            return day - timedelta(days=back)
        except OverflowError:
            return None

    def count_through(self, day: date, counter: OperationCounter) -> int:
        counter.calendar_steps += 1
        # Ordinal 1 (0001-01-01) is a Monday: ordinal n has ISO weekday (n - 1) % 7 + 1.
        n = day.toordinal()
        return sum((n - w) // 7 + 1 for w in self.weekdays)


@dataclass(frozen=True)
class _MonthTable:
    """A monthly selection precomputed for every month length (28..31)."""

    by_length: dict[int, tuple[int, ...]]
    """The selected days of a month of that length, ascending, each once."""
    before: tuple[tuple[int, ...], tuple[int, ...]]
    """Selected dates before month ``m`` (index ``m - 1``) of a common, a leap year."""
    per_year: tuple[int, int]
    """Selected dates in a whole common, leap year."""


@cache
def _month_table(days: tuple[int, ...], last_day: bool) -> _MonthTable:
    by_length = {
        n: tuple(sorted({d for d in days if d <= n} | ({n} if last_day else set())))
        for n in (28, 29, 30, 31)
    }
    before: list[tuple[int, ...]] = []
    for leap in (False, True):
        running, cumulative = 0, []
        for month in range(1, 13):
            cumulative.append(running)
            length = 29 if leap and month == 2 else _MONTH_LENGTHS[month - 1]
            running += len(by_length[length])
        before.append(tuple(cumulative))
    common = before[0][11] + len(by_length[31])
    leap_year = before[1][11] + len(by_length[31])
    return _MonthTable(by_length, (before[0], before[1]), (common, leap_year))


@dataclass(frozen=True)
class Monthly:
    days: tuple[int, ...]
    last_day: bool

    def selected_in(self, year: int, month: int) -> tuple[int, ...]:
        """Selected days of one month, ascending, each once."""
        return _month_table(self.days, self.last_day).by_length[month_length(year, month)]

    def first_on_or_after(self, day: date, counter: OperationCounter) -> date | None:
        year, month = day.year, day.month
        for i in range(13):  # some selected day exists within any 13 consecutive months
            counter.calendar_steps += 1
            if year > 9999:
                return None
            floor = day.day if i == 0 else 1
            for d in self.selected_in(year, month):
                if d >= floor:
                    return date(year, month, d)
            year, month = _add_months(year, month, 1)
        return None  # pragma: no cover - unreachable for a valid selector

    def last_on_or_before(self, day: date, counter: OperationCounter) -> date | None:
        year, month = day.year, day.month
        for i in range(13):
            counter.calendar_steps += 1
            if year < 1:
                return None
            ceiling = day.day if i == 0 else 31
            for d in reversed(self.selected_in(year, month)):
                if d <= ceiling:
                    return date(year, month, d)
            year, month = _add_months(year, month, -1)
        return None  # pragma: no cover

    def count_through(self, day: date, counter: OperationCounter) -> int:
        counter.calendar_steps += 1
        table = _month_table(self.days, self.last_day)
        full_years = day.year - 1
        leaps = leaps_through(full_years)
        common, leap_year = table.per_year
        total = (full_years - leaps) * common + leaps * leap_year
        leap = is_leap(day.year)
        total += table.before[leap][day.month - 1]
        this_month = table.by_length[
            29 if leap and day.month == 2 else _MONTH_LENGTHS[day.month - 1]
        ]
        return total + bisect_right(this_month, day.day)


@dataclass(frozen=True)
class Yearly:
    dates: tuple[MonthDay, ...]

    def _in_year(self, year: int) -> list[date]:
        return [
            date(year, md.month, md.day)
            for md in self.dates
            if md.day <= month_length(year, md.month)
        ]

    def first_on_or_after(self, day: date, counter: OperationCounter) -> date | None:
        for year in range(day.year, min(day.year + 9, 9999) + 1):  # Feb 29: <= 8 years away
            counter.calendar_steps += 1
            for candidate in self._in_year(year):
                if candidate >= day:
                    return candidate
        return None

    def last_on_or_before(self, day: date, counter: OperationCounter) -> date | None:
        for year in range(day.year, max(day.year - 9, 1) - 1, -1):
            counter.calendar_steps += 1
            for candidate in reversed(self._in_year(year)):
                if candidate <= day:
                    return candidate
        return None

    def count_through(self, day: date, counter: OperationCounter) -> int:
        counter.calendar_steps += 1
        full_years = day.year - 1
        total = 0
        for md in self.dates:
            in_final_year = (md.month, md.day) <= (day.month, day.day)
            if (md.month, md.day) == (2, 29):
                total += leaps_through(full_years) + int(in_final_year and is_leap(day.year))
            else:
                total += full_years + int(in_final_year)
        return total


def selector_for(cadence: CivilCadence) -> DateSelector:
    """The date selector of a civil cadence."""
    if isinstance(cadence, DailyCadence):
        return Daily()
    if isinstance(cadence, WeeklyCadence):
        return Weekly(cadence.weekdays)
    if isinstance(cadence, MonthlyCadence):
        return Monthly(cadence.days_of_month, cadence.last_day)
    assert isinstance(cadence, YearlyCadence)
    return Yearly(cadence.dates)
