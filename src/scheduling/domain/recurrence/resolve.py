"""Civil-time resolution: one local date + wall time in one zone -> one UTC instant (or none).

Rules (spec "Cadence and civil time", ADR-0202):

* exact: the wall time exists once -> that instant;
* fold: it exists twice (clocks fall back) -> the earlier UTC instant, once;
* gap: it does not exist (clocks spring forward) -> the first valid local instant at
  or after it, i.e. the instant the gap ends (02:30 on 2026-03-08 in America/New_York
  -> 03:00 EDT = 07:00Z, not zoneinfo's naive 07:30Z). When a gap runs past midnight
  (America/Nuuk: 23:00 -> 00:00 every March) that first valid instant shows the next
  date on the wall clock; the date still existed, so it still fires, once;
* the civil date does not exist at all in the zone (every local instant of it falls in
  a gap, e.g. Pacific/Apia skipped 2011-12-30) -> ``None``: like February 30, a date
  that never happened has no occurrence.

tzdata has no gap longer than 24 hours (a test asserts it), so two dates can never
resolve to the same instant.

zoneinfo is the only authority consulted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from scheduling.domain.recurrence.counter import OperationCounter


class Resolution(StrEnum):
    EXACT = "exact"
    FOLD_EARLIER = "fold->earlier"
    GAP_FIRST_VALID = "gap->first valid"


@dataclass(frozen=True, slots=True)
class Firing:
    """A nominal instant with the explanation of how it was resolved."""

    instant: datetime
    """Aware UTC."""
    local_date: date
    requested_time: time
    """The cadence's wall time (what was asked)."""
    local: datetime
    """The instant on the zone's wall clock (what the clock shows)."""
    utc_offset: timedelta
    resolution: Resolution
    zone: str

    @property
    def abbreviation(self) -> str:
        return self.local.tzname() or ""

    def describe(self) -> str:
        offset = _format_offset(self.utc_offset)
        text = (
            f"{self.instant.strftime('%Y-%m-%dT%H:%M:%S')}Z  "
            f"{self.local.strftime('%a %Y-%m-%d %H:%M:%S')} {offset} ({self.abbreviation}, "
            f"{self.zone})  {self.resolution.value}"
        )
        if self.resolution is not Resolution.EXACT:
            text += f" (requested {self.requested_time.strftime('%H:%M:%S')})"
        return text


def _format_offset(offset: timedelta) -> str:
    seconds = int(offset.total_seconds())
    sign = "+" if seconds >= 0 else "-"
    seconds = abs(seconds)
    text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
    if seconds % 60:
        text += f":{seconds % 60:02d}"
    return text


def _local(zone: ZoneInfo, utc_naive: datetime, counter: OperationCounter) -> datetime:
    counter.zone_lookups += 1
    return utc_naive.replace(tzinfo=UTC).astimezone(zone)


def _offset(zone: ZoneInfo, wall: datetime, counter: OperationCounter) -> timedelta:
    counter.zone_lookups += 1
    offset = zone.utcoffset(wall)
    assert offset is not None  # a ZoneInfo always knows its offset
    return offset


def resolve(zone: ZoneInfo, day: date, wall_time: time, counter: OperationCounter) -> Firing | None:
    """The nominal instant of ``wall_time`` on local ``day`` in ``zone`` (None: no such date)."""
    counter.resolutions += 1
    wall = datetime.combine(day, wall_time)
    earlier = _offset(zone, wall.replace(fold=0), counter)
    later = _offset(zone, wall.replace(fold=1), counter)
    if earlier == later:
        # The common case (ADR 1741): one candidate, so the general path below would
        # find exactly this (EXACT) or fall into its gap search with low == high.
        utc = wall - earlier
        local = _local(zone, utc, counter)
        if local.replace(tzinfo=None, fold=0) == wall:
            return _firing(utc, local, day, wall_time, Resolution.EXACT, zone)
    utc_candidates = {wall - earlier, wall - later}
    valid = sorted(
        (u, local)
        for u in utc_candidates
        if (local := _local(zone, u, counter)).replace(tzinfo=None, fold=0) == wall
    )
    if valid:
        utc, local = valid[0]
        resolution = Resolution.FOLD_EARLIER if len(valid) > 1 else Resolution.EXACT
        return _firing(utc, local, day, wall_time, resolution, zone)
    # A gap: the transition lies in (low, high]; before it the wall clock reads < wall,
    # from it on >= wall. Offsets and transitions are whole seconds, so bisect seconds.
    low, high = min(utc_candidates), max(utc_candidates)
    while high - low > timedelta(seconds=1):
        middle = low + timedelta(seconds=(high - low).total_seconds() // 2)
        if _local(zone, middle, counter).replace(tzinfo=None, fold=0) >= wall:
            high = middle
        else:
            low = middle
    local = _local(zone, high, counter)
    if local.date() != day and _local(zone, low, counter).date() != day:
        return None  # the whole date lies inside the gap
    return _firing(high, local, day, wall_time, Resolution.GAP_FIRST_VALID, zone)


def _firing(
    utc: datetime,
    local: datetime,
    day: date,
    wall_time: time,
    resolution: Resolution,
    zone: ZoneInfo,
) -> Firing:
    offset = local.utcoffset()
    assert offset is not None
    return Firing(
        instant=utc.replace(tzinfo=UTC),
        local_date=day,
        requested_time=wall_time,
        local=local,
        utc_offset=offset,
        resolution=resolution,
        zone=zone.key,
    )
