"""Bounded look-ups over a cadence: next after, latest at or before, inclusive count.

For a civil cadence the nominal instants are ``r(d)`` for each selected local date ``d``
(``resolve``), and ``r`` is strictly increasing in ``d``: a resolved instant always shows
its own date on the wall clock, or the next one when a gap runs past midnight. So:

* next after ``x``: start at the selected dates two days before ``x``'s local date
  (tzdata has no fold longer than 24 hours) and resolve forward until past ``x`` -
  a few resolutions, never one per elapsed day;
* latest at or before ``x``: the mirror image;
* count in ``[a, b]``: resolve the first and last occurrences, count the selected dates
  between them by closed-form calendar arithmetic, and subtract the selected dates that
  do not exist in the zone (whole-day gaps such as Pacific/Apia 2011-12-30), located
  through the zone's transitions in the span by binary search.

Quiet references (ADR 1741): when no transition changes the zone's offset within three
days of a reference instant, every wall time within a day of its wall clock exists
exactly once at that offset. Then the first date after the reference is known from the
wall clock alone (next/latest start there instead of two days away), and a count whose
two ends are both quiet needs no resolution at all: its first and last dates follow from
comparing the cadence's wall time with each end's wall clock.

Every instant in and out is aware UTC; a naive argument raises ``ValidationError``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from datetime import UTC, date, datetime, time, timedelta
from functools import cache

from scheduling.domain.cadence import Cadence, CivilCadence, OnceCadence
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.calendar import DateSelector, count_between, selector_for
from scheduling.domain.recurrence.counter import OperationCounter, ensure
from scheduling.domain.recurrence.resolve import Firing, Resolution, resolve
from scheduling.domain.recurrence.tzif import Transition, quiet, zone_transitions
from scheduling.domain.recurrence.zones import load_zone

NAIVE_REFERENCE = reason(
    "schedule.recurrence.naive_instant",
    "A recurrence look-up was given a datetime without a UTC offset",
)

_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)
# Look-ups start this many days away from the reference's local date: enough for any
# fold (tzdata's longest is 24 hours, 1867 Alaska) to not hide an occurrence.
_SLACK = 2
# A defensive ceiling on resolutions per look-up; real look-ups need fewer than ten.
_MAX_STEPS = 64
# No offset change this close to a reference: wall times within a day of its wall clock
# resolve exactly at its offset, and none of them recurs elsewhere (a fold that far
# would need an offset change of more than two days).
_QUIET_SECONDS = 3 * 86400
# Counts this close to datetime's range take the general path (no date arithmetic
# can overflow there).
_EDGE = datetime.combine(date.min, time(0)) + timedelta(days=3)
_FAR = datetime.combine(date.max, time(0)) - timedelta(days=3)


def utc_instant(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(NAIVE_REFERENCE, f"{field} must be an aware UTC instant")
    return value.astimezone(UTC)


def _once_firing(cadence: OnceCadence) -> Firing:
    return Firing(
        instant=cadence.at,
        local_date=cadence.at.date(),
        requested_time=cadence.at.time().replace(tzinfo=None),
        local=cadence.at,
        utc_offset=timedelta(0),
        resolution=Resolution.EXACT,
        zone="UTC",
    )


def _local_date(cadence: CivilCadence, instant: datetime, counter: OperationCounter) -> date:
    counter.zone_lookups += 1
    try:
        return instant.astimezone(load_zone(cadence.timezone)).date()
    except OverflowError:  # within a day of datetime's range: the UTC date is close enough
        return instant.date()


def _quiet_wall(
    cadence: CivilCadence, instant: datetime, counter: OperationCounter
) -> datetime | None:
    """The (naive) wall clock at ``instant`` if the zone's offset is constant within
    ``_QUIET_SECONDS`` of it, else ``None``."""
    counter.zone_lookups += 1
    counter.transitions_scanned += 1
    try:
        local = instant.astimezone(load_zone(cadence.timezone))
        seconds = int(instant.timestamp())
    except OverflowError:
        return None
    if not quiet(cadence.timezone, seconds - _QUIET_SECONDS, seconds + _QUIET_SECONDS):
        return None
    return local.replace(tzinfo=None)


def _shift(day: date, days: int) -> date | None:
    try:
        return day + timedelta(days=days)
    except OverflowError:
        return date.min if days < 0 else None


def _firing(cadence: CivilCadence, day: date, counter: OperationCounter) -> Firing | None:
    try:
        return resolve(load_zone(cadence.timezone), day, cadence.local_time, counter)
    except OverflowError:  # the edges of datetime's range
        return None


def next_firing(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> Firing | None:
    """The first nominal instant strictly after ``instant``, explained."""
    instant = utc_instant(instant, "instant")
    ops = ensure(counter)
    if isinstance(cadence, OnceCadence):
        return _once_firing(cadence) if cadence.at > instant else None
    selector = selector_for(cadence)
    wall = _quiet_wall(cadence, instant, ops)
    if wall is None:
        day = _shift(_local_date(cadence, instant, ops), -_SLACK)
    else:  # every earlier date's wall time is at or before ``wall``: not after instant
        day = _shift(wall.date(), 0 if cadence.local_time > wall.time() else 1)
    candidate = None if day is None else selector.first_on_or_after(day, ops)
    for _ in range(_MAX_STEPS):
        if candidate is None:
            return None
        firing = _firing(cadence, candidate, ops)
        if firing is not None and firing.instant > instant:
            return firing
        following = _shift(candidate, 1)
        candidate = None if following is None else selector.first_on_or_after(following, ops)
    raise AssertionError("next_after exceeded its bounded number of candidate dates")


def latest_firing(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> Firing | None:
    """The last nominal instant at or before ``instant``, explained."""
    instant = utc_instant(instant, "instant")
    ops = ensure(counter)
    if isinstance(cadence, OnceCadence):
        return _once_firing(cadence) if cadence.at <= instant else None
    selector = selector_for(cadence)
    wall = _quiet_wall(cadence, instant, ops)
    if wall is None:
        day = _shift(_local_date(cadence, instant, ops), _SLACK)
    else:  # every later date's wall time is after ``wall``: after instant
        day = _shift(wall.date(), 0 if cadence.local_time <= wall.time() else -1)
    candidate = selector.last_on_or_before(day or date.max, ops)
    for _ in range(_MAX_STEPS):
        if candidate is None:
            return None
        firing = _firing(cadence, candidate, ops)
        if firing is not None and firing.instant <= instant:
            return firing
        preceding = _shift(candidate, -1)
        if preceding is None or preceding == candidate:
            return None
        candidate = selector.last_on_or_before(preceding, ops)
    raise AssertionError("latest_at_or_before exceeded its bounded number of candidate dates")


def next_after(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> datetime | None:
    """The first nominal UTC instant strictly after ``instant`` (None: there is none)."""
    firing = next_firing(cadence, instant, counter)
    return None if firing is None else firing.instant


def first_at_or_after(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> datetime | None:
    """The first nominal UTC instant at or after ``instant``."""
    instant = utc_instant(instant, "instant")
    try:
        return next_after(cadence, instant - _TICK, counter)
    except OverflowError:  # instant is datetime's minimum; nothing can precede it
        at = latest_at_or_before(cadence, instant, counter)
        return at if at == instant else next_after(cadence, instant, counter)


def latest_at_or_before(
    cadence: Cadence, instant: datetime, counter: OperationCounter | None = None
) -> datetime | None:
    """The last nominal UTC instant at or before ``instant`` (None: there is none)."""
    firing = latest_firing(cadence, instant, counter)
    return None if firing is None else firing.instant


def count_inclusive(
    cadence: Cadence, start: datetime, end: datetime, counter: OperationCounter | None = None
) -> int:
    """How many nominal instants ``n`` satisfy ``start <= n <= end``."""
    start = utc_instant(start, "start")
    end = utc_instant(end, "end")
    ops = ensure(counter)
    if isinstance(cadence, OnceCadence) or end < start:
        return span_inclusive(cadence, start, end, ops)[0]
    first_wall = _quiet_wall(cadence, start, ops)
    last_wall = None if first_wall is None else _quiet_wall(cadence, end, ops)
    if first_wall is None or last_wall is None or not _EDGE < first_wall < last_wall < _FAR:
        return span_inclusive(cadence, start, end, ops)[0]
    # Both ends quiet: the first date whose wall time is at or after start's wall
    # clock, the last one at or before end's; no resolution needed.
    first = _shift(first_wall.date(), 0 if cadence.local_time >= first_wall.time() else 1)
    last = _shift(last_wall.date(), 0 if cadence.local_time <= last_wall.time() else -1)
    if first is None or last is None or last < first:
        return 0
    selector = selector_for(cadence)
    selected = count_between(selector, first, last, ops)
    return selected - _missing_dates(cadence, selector, first, last, start, end, ops)


def span_inclusive(
    cadence: Cadence, start: datetime, end: datetime, counter: OperationCounter | None = None
) -> tuple[int, datetime | None, datetime | None]:
    """(count, first, last) of the nominal instants ``n`` with ``start <= n <= end``."""
    start = utc_instant(start, "start")
    end = utc_instant(end, "end")
    ops = ensure(counter)
    if end < start:
        return 0, None, None
    if isinstance(cadence, OnceCadence):
        inside = start <= cadence.at <= end
        return (1, cadence.at, cadence.at) if inside else (0, None, None)
    try:
        first = next_firing(cadence, start - _TICK, ops)
    except OverflowError:  # start is datetime's minimum; nothing can precede it
        at_start = latest_firing(cadence, start, ops)
        exact = at_start is not None and at_start.instant == start
        first = at_start if exact else next_firing(cadence, start, ops)
    last = latest_firing(cadence, end, ops)
    if first is None or last is None or first.instant > last.instant:
        return 0, None, None
    selector = selector_for(cadence)
    selected = count_between(selector, first.local_date, last.local_date, ops)
    count = selected - _missing_dates(
        cadence, selector, first.local_date, last.local_date, first.instant, last.instant, ops
    )
    return count, first.instant, last.instant


def _missing_dates(
    cadence: CivilCadence,
    selector: DateSelector,
    first_date: date,
    last_date: date,
    start: datetime,
    end: datetime,
    counter: OperationCounter,
) -> int:
    """Selected dates strictly between ``first_date`` and ``last_date`` that do not exist
    in the zone (located by the whole-day gaps between ``start`` and ``end``)."""
    missing = 0
    for gap in _whole_day_gaps(cadence.timezone, start, end, counter):
        day = gap.wall_before().date()
        if gap.wall_before().time() != time(0):
            day += _DAY
        while datetime.combine(day + _DAY, time(0)) <= gap.wall_after():
            counter.calendar_steps += 1
            if (
                first_date < day < last_date
                and selector.first_on_or_after(day, counter) == day
                and _firing(cadence, day, counter) is None
            ):
                missing += 1
            day += _DAY
    return missing


@cache
def _whole_day_gap_index(key: str) -> tuple[tuple[int, ...], tuple[Transition, ...], bool]:
    """The zone's explicit gaps that swallow a whole civil date, and whether its footer
    rule can produce one (never in current tzdata, handled anyway)."""
    zone = zone_transitions(key)
    gaps = tuple(t for t in zone.explicit if _swallows_a_date(t))
    footer = zone.rule is not None and zone.rule.dst - zone.rule.std >= 86400
    return tuple(t.at for t in gaps), gaps, footer


def _swallows_a_date(transition: Transition) -> bool:
    if not transition.is_gap:
        return False
    start = transition.wall_before()
    first_midnight = datetime.combine(start.date(), time(0))
    if first_midnight < start:
        first_midnight += _DAY
    return first_midnight + _DAY <= transition.wall_after()


def _whole_day_gaps(
    key: str, start: datetime, end: datetime, counter: OperationCounter
) -> list[Transition]:
    times, gaps, footer = _whole_day_gap_index(key)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    lo = int((start - epoch).total_seconds()) - 2 * 86400
    hi = int((end - epoch).total_seconds()) + 2 * 86400
    found = list(gaps[bisect_left(times, lo) : bisect_right(times, hi)])
    counter.transitions_scanned += len(found) + 1
    if footer:  # pragma: no cover - no tzdata footer has a 24-hour daylight saving
        extra = [t for t in zone_transitions(key).between(start, end) if _swallows_a_date(t)]
        counter.transitions_scanned += len(extra)
        found.extend(t for t in extra if t not in found)
    return found


def upcoming(
    cadence: Cadence, after: datetime, count: int, counter: OperationCounter | None = None
) -> list[Firing]:
    """The next ``count`` firings strictly after ``after``, explained (for previews)."""
    firings: list[Firing] = []
    cursor = utc_instant(after, "after")
    for _ in range(count):
        firing = next_firing(cadence, cursor, counter)
        if firing is None:
            break
        firings.append(firing)
        cursor = firing.instant
    return firings
