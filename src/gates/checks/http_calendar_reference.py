"""An independent reference for calendar cadences (not the product's calculator).

Canonical form and next firing from first principles: a brute-force walk over local
calendar dates with ``zoneinfo``; a fold picks the earlier instant (``fold=0``); a gap
is located by bisecting the UTC offset change, and the firing is the transition itself
(the first valid local instant). Used by the HTTP round-trip gate to check every
response beside the product calculator.
"""

from __future__ import annotations

import calendar
import functools
from datetime import UTC, date, datetime, time, timedelta
from importlib import resources
from typing import Any
from zoneinfo import ZoneInfo

MAX_YEARS = 9  # February 29 recurs at least once in any 8 consecutive years (+1 slack)


@functools.cache
def zone(key: str) -> ZoneInfo:
    """The zone from the tzdata package the product reads (the same database version;
    the system zone files may be another release), through the standard library's
    TZif reader rather than the product's."""
    path = resources.files("tzdata.zoneinfo").joinpath(*key.split("/"))
    with path.open("rb") as handle:
        return ZoneInfo.from_file(handle, key=key)


def canonical(payload: dict[str, Any]) -> dict[str, Any]:
    """The canonical payload: HH:MM:SS wall time, sorted selectors, explicit last_day."""
    kind = payload["kind"]
    out: dict[str, Any] = {"kind": kind}
    hh, mm, *rest = str(payload["local_time"]).split(":")
    out["local_time"] = f"{int(hh):02d}:{int(mm):02d}:{int(rest[0]) if rest else 0:02d}"
    out["timezone"] = payload["timezone"]
    if kind == "WEEKLY":
        out["weekdays"] = sorted(payload["weekdays"])
    elif kind == "MONTHLY":
        out["days_of_month"] = sorted(payload.get("days_of_month", []))
        out["last_day"] = bool(payload.get("last_day", False))
    elif kind == "YEARLY":
        out["dates"] = [
            {"month": m, "day": d}
            for m, d in sorted((x["month"], x["day"]) for x in payload["dates"])
        ]
    return out


def _selected(payload: dict[str, Any], day: date) -> bool:
    kind = payload["kind"]
    if kind == "DAILY":
        return True
    if kind == "WEEKLY":
        return day.isoweekday() in payload["weekdays"]
    if kind == "MONTHLY":
        last = calendar.monthrange(day.year, day.month)[1]
        return day.day in payload.get("days_of_month", []) or (
            bool(payload.get("last_day")) and day.day == last
        )
    if kind == "YEARLY":
        return any(d["month"] == day.month and d["day"] == day.day for d in payload["dates"])
    raise ValueError(kind)


def _wall(payload: dict[str, Any]) -> time:
    hh, mm, *rest = str(payload["local_time"]).split(":")
    return time(int(hh), int(mm), int(rest[0]) if rest else 0)


def resolve(day: date, wall: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of ``wall`` on ``day`` in ``tz``: earlier of a fold, gap end."""
    naive = datetime.combine(day, wall)
    first = naive.replace(tzinfo=tz, fold=0)
    u0 = first.astimezone(UTC)
    if u0.astimezone(tz).replace(tzinfo=None) == naive:
        return u0  # exists (for a fold, fold=0 is the earlier instant)
    u1 = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = min(u0, u1), max(u0, u1)
    before = lo.astimezone(tz).utcoffset()
    # Bisect to the second at which the offset changes: the transition instant.
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


def next_after(payload: dict[str, Any], instant: datetime) -> datetime | None:
    """The first firing strictly after ``instant``, by walking local dates."""
    tz = zone(payload["timezone"])
    wall = _wall(payload)
    day = instant.astimezone(tz).date() - timedelta(days=1)
    end = day + timedelta(days=366 * MAX_YEARS)
    while day <= end:
        if _selected(payload, day):
            fire = resolve(day, wall, tz)
            if fire > instant:
                return fire
        day += timedelta(days=1)
    return None
