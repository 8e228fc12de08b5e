"""Shared machinery of the civil-time gate checks: an independent slow oracle, the
strategies that aim at each zone's real transitions, and the property assertions.

The oracle shares only the data (tzdata through ``load_zone``) with the calculator, not
its algorithm: it decides date membership by plain predicates, enumerates every local
day of a window, resolves each selected day by trying both offsets and, for a gap,
by scanning forward minute by minute then second by second, and answers next / latest
/ count by sorting what it found. The assertions take an ``Api`` so a test of the test
can run them against deliberately broken calculators and see them fail.
"""

from __future__ import annotations

import calendar
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from hypothesis import strategies as st

from scheduling.domain.cadence import (
    Cadence,
    CivilCadence,
    DailyCadence,
    MonthDay,
    MonthlyCadence,
    OnceCadence,
    WeeklyCadence,
    YearlyCadence,
)
from scheduling.domain.recurrence.tzif import Transition, zone_transitions
from scheduling.domain.recurrence.zones import load_zone, zone_bytes, zone_keys
from scheduling.recurrence import count_inclusive, latest_at_or_before, next_after

ONE_DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


# ---------------------------------------------------------------------------- oracle


def selected(cadence: CivilCadence, day: date) -> bool:
    """Whether ``cadence`` selects local ``day`` (plain predicates, no arithmetic)."""
    if isinstance(cadence, DailyCadence):
        return True
    if isinstance(cadence, WeeklyCadence):
        return day.isoweekday() in cadence.weekdays
    if isinstance(cadence, MonthlyCadence):
        last = calendar.monthrange(day.year, day.month)[1]
        return day.day in cadence.days_of_month or (cadence.last_day and day.day == last)
    return MonthDay(day.month, day.day) in cadence.dates


def _wall(zone_key: str, utc: datetime) -> datetime:
    return utc.replace(tzinfo=UTC).astimezone(load_zone(zone_key)).replace(tzinfo=None, fold=0)


def oracle_resolve(zone_key: str, day: date, wall_time: time) -> tuple[datetime, str] | None:
    """(UTC instant, "exact" | "fold" | "gap") of ``wall_time`` on ``day``, or None."""
    zone = load_zone(zone_key)
    wall = datetime.combine(day, wall_time)
    candidates = set()
    for fold in (0, 1):
        offset = zone.utcoffset(wall.replace(fold=fold))
        assert offset is not None
        candidates.add(wall - offset)
    valid = sorted(u for u in candidates if _wall(zone_key, u) == wall)
    if valid:
        return valid[0].replace(tzinfo=UTC), ("fold" if len(valid) > 1 else "exact")
    t = min(candidates)
    while _wall(zone_key, t) < wall:  # minute steps to just past the gap's end
        t += timedelta(minutes=1)
    while _wall(zone_key, t - SECOND) >= wall:  # second steps back to its first instant
        t -= SECOND
    if _wall(zone_key, t).date() != day and _wall(zone_key, t - SECOND).date() != day:
        return None
    return t.replace(tzinfo=UTC), "gap"


def oracle_instants(cadence: Cadence, first_day: date, last_day: date) -> list[datetime]:
    """Every nominal instant of the selected local days ``first_day .. last_day``."""
    if isinstance(cadence, OnceCadence):
        return [cadence.at]
    found = set()
    day = first_day
    while day <= last_day:
        if selected(cadence, day):
            resolved = oracle_resolve(cadence.timezone, day, cadence.local_time)
            if resolved is not None:
                found.add(resolved[0])
        day += ONE_DAY
    return sorted(found)


def window_days(cadence: Cadence) -> int:
    """Days that always contain at least two occurrences (Feb 29: 8 years apart)."""
    if isinstance(cadence, YearlyCadence):
        return 366 * 9 if MonthDay(2, 29) in cadence.dates and len(cadence.dates) == 1 else 800
    if isinstance(cadence, MonthlyCadence):
        return 130
    if isinstance(cadence, WeeklyCadence):
        return 18
    return 7


def oracle_next(cadence: Cadence, instant: datetime) -> datetime | None:
    if isinstance(cadence, OnceCadence):
        return cadence.at if cadence.at > instant else None
    start = instant.astimezone(UTC).date() - timedelta(days=3)
    for n in oracle_instants(cadence, start, start + timedelta(days=window_days(cadence))):
        if n > instant:
            return n
    raise AssertionError("oracle window too small")


def oracle_latest(cadence: Cadence, instant: datetime) -> datetime | None:
    if isinstance(cadence, OnceCadence):
        return cadence.at if cadence.at <= instant else None
    end = instant.astimezone(UTC).date() + timedelta(days=3)
    found = [
        n
        for n in oracle_instants(cadence, end - timedelta(days=window_days(cadence)), end)
        if n <= instant
    ]
    if not found:
        raise AssertionError("oracle window too small")
    return found[-1]


def oracle_count(cadence: Cadence, start: datetime, end: datetime) -> int:
    first = start.astimezone(UTC).date() - timedelta(days=2)
    last = end.astimezone(UTC).date() + timedelta(days=2)
    return sum(1 for n in oracle_instants(cadence, first, last) if start <= n <= end)


# ------------------------------------------------------------------- the api seam


@dataclass(frozen=True)
class Api:
    """The calculator under test (the real one, or a deliberately broken one)."""

    next_after: Callable[[Cadence, datetime], datetime | None] = next_after
    latest_at_or_before: Callable[[Cadence, datetime], datetime | None] = latest_at_or_before
    count_inclusive: Callable[[Cadence, datetime, datetime], int] = count_inclusive


REAL = Api()


# -------------------------------------------------------------------- strategies


def _all_transitions(key: str) -> list[Transition]:
    zt = zone_transitions(key)
    return zt.between(datetime(1850, 1, 1, tzinfo=UTC), datetime(2060, 12, 31, tzinfo=UTC))


ZONES = sorted(zone_keys())
TRANSITIONS: dict[str, list[Transition]] = {}


def transitions_of(key: str) -> list[Transition]:
    if key not in TRANSITIONS:
        TRANSITIONS[key] = _all_transitions(key)
    return TRANSITIONS[key]


@dataclass(frozen=True)
class Aim:
    """A generated case aimed at one real transition of one zone."""

    zone: str
    transition: Transition | None
    wall_time: time
    day: date
    reference: datetime
    where: str


_WALL_SPOTS = ("before", "start", "inside", "end", "after", "random")


@st.composite
def aims(draw: Any, zones: list[str] | None = None) -> Aim:
    """A zone, one of its real transitions, a wall time just before / at / inside / at
    the end of / after its gap or fold (or random), and a reference instant near it."""
    key = draw(st.sampled_from(zones or ZONES))
    transitions = transitions_of(key)
    if not transitions or draw(st.integers(0, 9)) == 9:  # 0 is what shrinking favours
        wall_time = time(draw(st.integers(0, 23)), draw(st.sampled_from([0, 15, 30, 45])))
        reference = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(
            seconds=draw(st.integers(-80 * 365 * 86400, 30 * 365 * 86400))
        )
        day = reference.date()
        return Aim(key, None, wall_time, day, reference, "random")
    t = draw(st.sampled_from(transitions))
    start, end = t.wall_before(), t.wall_after()
    low, high = min(start, end), max(start, end)
    spot = draw(st.sampled_from(_WALL_SPOTS))
    width = max(int((high - low).total_seconds()), 1)
    wall = {
        "before": low - timedelta(seconds=draw(st.sampled_from([1, 60, 1800, 3600]))),
        "start": low,
        "inside": low + timedelta(seconds=draw(st.integers(0, width - 1))),
        "end": high,
        "after": high + timedelta(seconds=draw(st.sampled_from([1, 60, 1800, 3600]))),
        "random": low + timedelta(seconds=draw(st.integers(-86400, 86400))),
    }[spot]
    reference = t.instant + timedelta(seconds=draw(st.integers(-3 * 86400, 3 * 86400)))
    return Aim(key, t, wall.time().replace(microsecond=0), wall.date(), reference, spot)


@st.composite
def civil_cadences(draw: Any, aim: Aim, kinds: tuple[str, ...]) -> CivilCadence:
    """A civil cadence of one of ``kinds`` that selects the aim's day."""
    kind = draw(st.sampled_from(kinds))
    if kind == "DAILY":
        return DailyCadence(aim.wall_time, aim.zone)
    if kind == "WEEKLY":
        extra = draw(st.sets(st.integers(1, 7), max_size=3))
        return WeeklyCadence(aim.wall_time, aim.zone, tuple(extra | {aim.day.isoweekday()}))
    if kind == "MONTHLY":
        # Month ends are where calendars go wrong: favour 28..31.
        extra = st.one_of(st.sampled_from([28, 29, 30, 31]), st.integers(1, 31))
        days = draw(st.sets(extra, max_size=3)) | {aim.day.day}
        return MonthlyCadence(aim.wall_time, aim.zone, tuple(days), draw(st.booleans()))
    extra_dates = draw(
        st.sets(st.sampled_from([(2, 29), (1, 31), (3, 31), (12, 31), (6, 15)]), max_size=2)
    )
    pairs = {MonthDay(m, d) for m, d in extra_dates} | {MonthDay(aim.day.month, aim.day.day)}
    return YearlyCadence(aim.wall_time, aim.zone, tuple(pairs))


@st.composite
def transition_aims(draw: Any, want: str, zones: list[str] | None = None) -> Aim:
    """An aim whose wall time lies inside a real gap (``want="gap"``) or fold
    (``want="fold"``) of its zone, from its first wall second to its last, so the civil
    date it selects needs that resolution. Zones without one fall back to ``aims``."""
    key = draw(st.sampled_from(zones or ZONES))
    wanted = [t for t in transitions_of(key) if (t.is_gap if want == "gap" else t.is_fold)]
    if not wanted:
        fallback: Aim = draw(aims([key]))
        return fallback
    t = draw(st.sampled_from(wanted))
    low, high = sorted([t.wall_before(), t.wall_after()])
    width = int((high - low).total_seconds())
    wall = low + timedelta(seconds=draw(st.integers(0, max(width - 1, 0))))
    reference = t.instant + timedelta(seconds=draw(st.integers(-3 * 86400, 3 * 86400)))
    return Aim(key, t, wall.time().replace(microsecond=0), wall.date(), reference, f"in-{want}")


# ------------------------------------------------------------------- evidence


@dataclass
class Tally:
    """Coverage gathered across one check's examples (becomes gate evidence)."""

    examples: int = 0
    zones: set[str] = field(default_factory=set)
    spots: dict[str, int] = field(default_factory=dict)
    resolutions: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)

    def note(self, aim: Aim, resolution: str | None = None, kind: str | None = None) -> None:
        self.examples += 1
        self.zones.add(aim.zone)
        self.spots[aim.where] = self.spots.get(aim.where, 0) + 1
        if resolution is not None:
            self.resolutions[resolution] = self.resolutions.get(resolution, 0) + 1
            if kind is not None:
                row = self.by_kind.setdefault(kind, {})
                row[resolution] = row.get(resolution, 0) + 1

    def evidence(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "zones_covered": len(self.zones),
            "zones_available": len(ZONES),
            "aim_spots": dict(sorted(self.spots.items())),
            "resolutions": dict(sorted(self.resolutions.items())),
            "resolutions_by_kind": {
                k: dict(sorted(v.items())) for k, v in sorted(self.by_kind.items())
            },
        }


def reproduction() -> dict[str, Any]:
    """The seed and the command that replays this check's examples."""
    seed = os.environ.get("SCHEDULING_GATE_SEED")
    profile = os.environ.get("SCHEDULING_GATE_PROFILE", "quick")
    return {
        "hypothesis_seed": seed,
        "profile": profile,
        "reproduce": (
            f"SCHEDULING_GATE_PROFILE={profile} .venv/bin/pytest src/gates/checks "
            + (f"--hypothesis-seed={seed}" if seed else "(seed printed by hypothesis on failure)")
        ),
    }


# ------------------------------------------------------------------ assertions


def assert_resolution_matches(aim: Aim) -> str | None:
    """The calculator's instant for the aim's (day, wall time) equals the oracle's, and
    follows the rules: a fold takes the earlier instant, a gap the first valid one."""
    cadence = DailyCadence(aim.wall_time, aim.zone)
    expected = oracle_resolve(aim.zone, aim.day, aim.wall_time)
    # The occurrence of aim.day is the first one after the previous existing date's.
    previous = None
    for back in (1, 2, 3):
        previous = oracle_resolve(aim.zone, aim.day - timedelta(days=back), aim.wall_time)
        if previous is not None:
            break
    assert previous is not None, "three consecutive missing dates"
    reference = previous[0]
    got = REAL.next_after(cadence, reference)
    if expected is None:
        assert got is None or _wall(aim.zone, got.replace(tzinfo=None)).date() != aim.day
        return "missing-date"
    instant, kind = expected
    assert got == instant, f"{aim}: expected {instant} ({kind}), got {got}"
    if kind == "fold":
        wall = datetime.combine(aim.day, aim.wall_time)
        zone = load_zone(aim.zone)
        instants = [wall - (zone.utcoffset(wall.replace(fold=f)) or timedelta()) for f in (0, 1)]
        assert got == min(instants).replace(tzinfo=UTC) < max(instants).replace(tzinfo=UTC)
    return kind


def assert_next_and_latest(api: Api, cadence: Cadence, reference: datetime) -> None:
    """next_after/latest_at_or_before equal the oracle's, strictly after / at or before."""
    expected_next = oracle_next(cadence, reference)
    got_next = api.next_after(cadence, reference)
    assert got_next == expected_next, (
        f"next_after({cadence}, {reference}) = {got_next}, oracle {expected_next}"
    )
    assert got_next is None or got_next > reference
    expected_latest = oracle_latest(cadence, reference)
    got_latest = api.latest_at_or_before(cadence, reference)
    assert got_latest == expected_latest, (
        f"latest({cadence}, {reference}) = {got_latest}, oracle {expected_latest}"
    )
    assert got_latest is None or got_latest <= reference


def assert_sequence(api: Api, cadence: Cadence, reference: datetime, steps: int) -> list[datetime]:
    """Chaining next_after from ``reference`` yields exactly the oracle's instants (none
    missed between two results, none twice), and each result is reconstructed from the
    previous one (next_fire_at = next_after(last recorded nominal instant))."""
    got: list[datetime] = []
    cursor = reference
    for _ in range(steps):
        nxt = api.next_after(cadence, cursor)
        if nxt is None:
            break
        assert nxt > cursor
        got.append(nxt)
        cursor = nxt
    if not got:
        assert oracle_next(cadence, reference) is None
        return got
    first_day = reference.astimezone(UTC).date() - timedelta(days=2)
    expected = [
        n
        for n in oracle_instants(cadence, first_day, got[-1].date() + timedelta(days=2))
        if reference < n <= got[-1]
    ]
    assert got == expected, f"{cadence} from {reference}: {got} != oracle {expected}"
    for earlier, later in itertools.pairwise(got):
        # Reconstruction: from the earlier instant or any moment before the later one.
        assert api.next_after(cadence, earlier) == later
        assert api.next_after(cadence, later - timedelta(microseconds=1)) == later
        assert api.latest_at_or_before(cadence, later - timedelta(microseconds=1)) == earlier
    return got


def assert_count(api: Api, cadence: Cadence, start: datetime, end: datetime) -> int:
    expected = oracle_count(cadence, start, end)
    got = api.count_inclusive(cadence, start, end)
    assert got == expected, f"count({cadence}, {start}, {end}) = {got}, oracle {expected}"
    return got


# Names of the resolution rules, as ``Firing.resolution`` and docs/civil-time.md spell them.
RULE_NAMES = {
    "exact": "exact",
    "fold": "fold->earlier",
    "gap": "gap->first valid",
    "missing-date": "missing date",
}


def previous_occurrence(cadence: CivilCadence, day: date) -> datetime:
    """The oracle's instant of the latest selected, existing local date before ``day``."""
    back = day - ONE_DAY
    for _ in range(366 * 9):
        if selected(cadence, back):
            resolved = oracle_resolve(cadence.timezone, back, cadence.local_time)
            if resolved is not None:
                return resolved[0]
        back -= ONE_DAY
    raise AssertionError(f"{cadence}: no occurrence in the nine years before {day}")


def assert_resolution_on(api: Api, cadence: CivilCadence, day: date) -> str:
    """The occurrence of selected local ``day`` (the first after the previous selected
    date's) is the oracle's: the one instant of an exact time, the earlier of a fold,
    the first valid instant after a gap, none for a date the zone skipped. Returns the
    rule applied (a key of ``RULE_NAMES``)."""
    assert selected(cadence, day), f"{cadence} does not select {day}"
    expected = oracle_resolve(cadence.timezone, day, cadence.local_time)
    reference = previous_occurrence(cadence, day)
    got = api.next_after(cadence, reference)
    if expected is None:
        assert got is None or _wall(cadence.timezone, got.replace(tzinfo=None)).date() != day
        return "missing-date"
    instant, kind = expected
    assert got == instant, f"{cadence} on {day}: expected {instant} ({kind}), got {got}"
    if kind == "fold":
        wall = datetime.combine(day, cadence.local_time)
        zone = load_zone(cadence.timezone)
        both = sorted(wall - (zone.utcoffset(wall.replace(fold=f)) or timedelta()) for f in (0, 1))
        assert got == both[0].replace(tzinfo=UTC) < both[1].replace(tzinfo=UTC)
    return kind


# ------------------------------------------------ transitions located by zoneinfo


@dataclass(frozen=True)
class Located:
    """An offset change found by asking zoneinfo alone (not the product's TZif reader):
    at UTC ``instant`` the offset goes from ``before`` to ``after``."""

    zone: str
    instant: datetime
    before: timedelta
    after: timedelta

    @property
    def is_gap(self) -> bool:
        return self.after > self.before

    def walls(self) -> tuple[datetime, datetime]:
        """The naive wall times the clock shows just before and at the change, ascending."""
        naive = self.instant.replace(tzinfo=None)
        first, second = naive + self.before, naive + self.after
        return min(first, second), max(first, second)


def _utc_offset(zone_key: str, instant: datetime) -> timedelta:
    offset = instant.astimezone(load_zone(zone_key)).utcoffset()
    assert offset is not None
    return offset


def zoneinfo_transitions(zone_key: str, year: int) -> list[Located]:
    """The offset changes of ``zone_key`` in UTC ``year``, by stepping a day at a time
    through zoneinfo's answers and bisecting each change to the second (two changes
    less than a day apart would be missed; no footer rule has them)."""
    found = []
    start = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    low, low_offset = start, _utc_offset(zone_key, start)
    while low < end:
        high = min(low + ONE_DAY, end)
        high_offset = _utc_offset(zone_key, high)
        if high_offset != low_offset:
            a, b = low, high  # offset(a) == low_offset != offset(b)
            while b - a > SECOND:
                middle = a + (b - a) / 2
                middle = middle.replace(microsecond=0)
                if _utc_offset(zone_key, middle) == low_offset:
                    a = middle
                else:
                    b = middle
            found.append(Located(zone_key, b, low_offset, _utc_offset(zone_key, b)))
        low, low_offset = high, high_offset
    return found


def footer_zones() -> list[str]:
    """One zone per distinct TZif footer rule that changes the offset (the POSIX TZ
    string on the file's last line has a ``,start,end`` part)."""
    chosen: dict[bytes, str] = {}
    for key in ZONES:
        footer = zone_bytes(key).rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if b"," in footer:
            chosen.setdefault(footer, key)
    return sorted(chosen.values())
