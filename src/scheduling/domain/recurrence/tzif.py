"""A reader of a zone's UTC-offset transitions from its TZif bytes (RFC 8536).

zoneinfo answers "what is the offset at this instant" but does not list transitions.
The calculator needs the list only as a *locator* (which gaps can swallow a civil date in
a span) and the property tests need it to aim at real transitions; every offset the
calculator acts on still comes from zoneinfo itself, and a unit test checks that this
reader agrees with zoneinfo at every transition of every zone.

Transitions after the last explicit one come from the POSIX TZ footer rule, generated
for the requested years only, so a long span costs its transitions, not its days.
"""

from __future__ import annotations

import re
import struct
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache, lru_cache

from scheduling.domain.recurrence.zones import zone_bytes

# Naive on purpose: TZif seconds and wall clocks are both plain offsets from this epoch.
_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001


@dataclass(frozen=True, slots=True)
class Transition:
    """At UTC second ``at`` the UTC offset changes from ``before`` to ``after`` (seconds)."""

    at: int
    before: int
    after: int

    @property
    def instant(self) -> datetime:
        return (_EPOCH + timedelta(seconds=self.at)).replace(tzinfo=UTC)

    @property
    def is_gap(self) -> bool:
        return self.after > self.before

    @property
    def is_fold(self) -> bool:
        return self.after < self.before

    def wall_before(self) -> datetime:
        """Naive local wall time at which the old offset stops (start of a gap or fold)."""
        return _EPOCH + timedelta(seconds=self.at + self.before)

    def wall_after(self) -> datetime:
        """Naive local wall time the clock shows at the transition under the new offset."""
        return _EPOCH + timedelta(seconds=self.at + self.after)


@dataclass(frozen=True, slots=True)
class _Rule:
    std: int
    dst: int
    start: tuple[str, int, int, int, int]  # (form, a, b, c, seconds after local midnight)
    end: tuple[str, int, int, int, int]


@dataclass(frozen=True, slots=True)
class ZoneTransitions:
    """The explicit transitions of a zone plus its recurring footer rule (if any)."""

    key: str
    explicit: tuple[Transition, ...]
    rule: _Rule | None

    def between(self, start: datetime, end: datetime) -> list[Transition]:
        """Offset-changing transitions with ``start <= instant <= end`` (aware datetimes)."""
        lo = _seconds(start)
        hi = _seconds(end)
        times = [t.at for t in self.explicit]
        found = list(self.explicit[bisect_left(times, lo) : bisect_right(times, hi)])
        last = self.explicit[-1].at if self.explicit else None
        if self.rule is not None:
            first_year = max(start.year - 1, 1)
            if last is not None:
                first_year = max(first_year, (_EPOCH + timedelta(seconds=last)).year - 1)
            for year in range(first_year, min(end.year + 1, 9998) + 1):
                for t in _rule_transitions(self.rule, year):
                    if (last is None or t.at > last) and lo <= t.at <= hi:
                        found.append(t)
        found.sort(key=lambda t: t.at)
        return [t for t in found if t.before != t.after]


def _seconds(value: datetime) -> int:
    return int((value.astimezone(UTC).replace(tzinfo=None) - _EPOCH).total_seconds() // 1)


@cache
def zone_transitions(key: str) -> ZoneTransitions:
    """Parse the tzdata TZif file of ``key``."""
    return parse_tzif(key, zone_bytes(key))


def parse_tzif(key: str, data: bytes) -> ZoneTransitions:
    if data[:4] != b"TZif":
        raise ValueError(f"{key}: not a TZif file")
    version = data[4:5]
    counts = struct.unpack(">6l", data[20:44])
    isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt = counts
    if version == b"\x00":
        body, size = 44, 4
    else:
        v1_len = timecnt * 5 + typecnt * 6 + charcnt + leapcnt * 8 + isstdcnt + isutcnt
        header = 44 + v1_len
        isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt = struct.unpack(
            ">6l", data[header + 20 : header + 44]
        )
        body, size = header + 44, 8
    fmt = f">{timecnt}q" if size == 8 else f">{timecnt}l"
    times = struct.unpack(fmt, data[body : body + timecnt * size])
    pos = body + timecnt * size
    indexes = data[pos : pos + timecnt]
    pos += timecnt
    offsets = [
        struct.unpack(">lBB", data[pos + 6 * i : pos + 6 * i + 6])[0] for i in range(typecnt)
    ]
    pos += typecnt * 6 + charcnt + leapcnt * (size + 4) + isstdcnt + isutcnt
    transitions: list[Transition] = []
    previous = offsets[0]
    for at, index in zip(times, indexes, strict=True):
        after = offsets[index]
        transitions.append(Transition(at, previous, after))
        previous = after
    rule = None
    if version != b"\x00":
        footer = data[pos:].strip(b"\n").decode("ascii")
        rule = _parse_posix(footer) if footer else None
    return ZoneTransitions(key, tuple(transitions), rule)


_NAME = r"(?:<[^>]+>|[A-Za-z]{3,})"
_OFFSET = r"[+-]?\d{1,3}(?::\d{2}){0,2}"
_DATE = r"(?:J\d{1,3}|\d{1,3}|M\d{1,2}\.\d\.\d)"
_POSIX = re.compile(
    rf"^{_NAME}(?P<std>{_OFFSET})(?:{_NAME}(?P<dst>{_OFFSET})?"
    rf",(?P<start>{_DATE})(?:/(?P<st>{_OFFSET}))?,(?P<end>{_DATE})(?:/(?P<et>{_OFFSET}))?)?$"
)


def _hms(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    parts = [int(p) for p in text.lstrip("+-").split(":")]
    parts += [0] * (3 - len(parts))
    return sign * (parts[0] * 3600 + parts[1] * 60 + parts[2])


def _date_form(text: str, time_text: str | None) -> tuple[str, int, int, int, int]:
    seconds = _hms(time_text) if time_text else 7200
    if text.startswith("J"):
        return ("J", int(text[1:]), 0, 0, seconds)
    if text.startswith("M"):
        m, w, d = (int(p) for p in text[1:].split("."))
        return ("M", m, w, d, seconds)
    return ("N", int(text), 0, 0, seconds)


def _parse_posix(text: str) -> _Rule | None:
    match = _POSIX.match(text)
    if match is None:
        raise ValueError(f"unsupported POSIX TZ string {text!r}")
    if match["start"] is None:
        return None  # a fixed offset: no future transitions
    std = -_hms(match["std"])
    dst = -_hms(match["dst"]) if match["dst"] else std + 3600
    return _Rule(
        std, dst, _date_form(match["start"], match["st"]), _date_form(match["end"], match["et"])
    )


def _rule_day(form: tuple[str, int, int, int, int], year: int) -> date:
    kind, a, b, c, _ = form
    if kind == "J":  # 1..365, February 29 never counted
        day = date(year, 1, 1) + timedelta(days=a - 1)
        if a >= 60 and _leap(year):
            day += timedelta(days=1)
        return day
    if kind == "N":  # 0..365 zero-based, February 29 counted
        return date(year, 1, 1) + timedelta(days=a)
    month, week, weekday = a, b, c  # weekday: 0 = Sunday
    first = date(year, month, 1)
    delta = (weekday - (first.isoweekday() % 7)) % 7
    day = first + timedelta(days=delta + 7 * (week - 1))
    while day.month != month:  # week 5 means "last"
        day -= timedelta(days=7)
    return day


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _rule_transitions(rule: _Rule, year: int) -> list[Transition]:
    start_local = _rule_day(rule.start, year)
    end_local = _rule_day(rule.end, year)
    # The start time is given in standard wall time, the end time in daylight wall time.
    start = _days(start_local) + rule.start[4] - rule.std
    end = _days(end_local) + rule.end[4] - rule.dst
    return sorted(
        (Transition(start, rule.std, rule.dst), Transition(end, rule.dst, rule.std)),
        key=lambda t: t.at,
    )


def _days(day: date) -> int:
    return (day.toordinal() - date(1970, 1, 1).toordinal()) * 86400


# The footer rule's years around a span: a year is at most 31,622,400 s long; one year
# of margin either side covers a local-date rule shifted by any UTC offset.
_MEAN_YEAR = 31_556_952


@cache
def _offset_changes(key: str) -> tuple[tuple[int, ...], int | None, _Rule | None]:
    zone = zone_transitions(key)
    changes = tuple(t.at for t in zone.explicit if t.before != t.after)
    last = zone.explicit[-1].at if zone.explicit else None
    return changes, last, zone.rule


@lru_cache(maxsize=4096)
def _rule_changes(rule: _Rule, year: int) -> tuple[int, ...]:
    return tuple(t.at for t in _rule_transitions(rule, year) if t.before != t.after)


def quiet(key: str, lo: int, hi: int) -> bool:
    """Whether no transition of ``key`` changes the UTC offset at a UTC second in
    ``lo .. hi`` (seconds since 1970): two binary searches, plus the footer rule's
    transitions of at most a few years when the span passes the explicit ones."""
    changes, last, rule = _offset_changes(key)
    if bisect_left(changes, lo) != bisect_right(changes, hi):
        return False
    if rule is None or (last is not None and hi <= last):
        return True
    first_year = max(lo // _MEAN_YEAR + 1970 - 1, 1)
    for year in range(first_year, min(hi // _MEAN_YEAR + 1970 + 1, 9998) + 1):
        for at in _rule_changes(rule, year):
            if (last is None or at > last) and lo <= at <= hi:
                return False
    return True
