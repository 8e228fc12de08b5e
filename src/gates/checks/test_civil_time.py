"""gate.schedule.civil_time: civil-time recurrence is deterministic across the IANA corpus.

Properties (checked against the independent oracle in ``recurrence_support``): an
ambiguous wall time takes the earlier UTC instant, a nonexistent one the first valid
instant, each civil occurrence fires once, and next_fire_at is reconstructible from
the last recorded nominal instant. Cases are aimed at every zone's real transitions;
deterministic aimed cases (``aimed_cases``) put every kind in a real gap and fold in
every run, so the coverage guard never depends on the seed.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.checks.aimed_cases import AimedCase, aimed_cases
from gates.checks.recurrence_support import (
    REAL,
    ZONES,
    Aim,
    Tally,
    aims,
    assert_count,
    assert_next_and_latest,
    assert_resolution_matches,
    assert_sequence,
    civil_cadences,
    footer_zones,
    reproduction,
    transitions_of,
    zoneinfo_transitions,
)
from gates.runner.pytest_plugin import GateEvidence, gate_profile
from scheduling.domain.cadence import CivilCadence, DailyCadence, WeeklyCadence
from scheduling.domain.recurrence.tzif import Transition
from scheduling.recurrence import next_after, next_firing, upcoming
from scheduling.tzdata_info import tzdata_version

GATE = "gate.schedule.civil_time"


CIVIL_KINDS = ("DAILY", "WEEKLY")


def exercise(aim: Aim, cadence: CivilCadence, tally: Tally) -> None:
    """The property's assertions for one case (aimed or generated)."""
    tally.note(aim, assert_resolution_matches(aim), str(cadence.kind.value))
    assert_next_and_latest(REAL, cadence, aim.reference)
    assert_sequence(REAL, cadence, aim.reference, 4)


def run_cases(
    aimed: list[AimedCase],
    tally: Tally,
    zones: list[str] | None = None,
    pinned: settings | None = None,
) -> None:
    """The aimed cases, then the generated ones (drawn from ``zones``, default all;
    ``pinned`` settings replace the profile's, for tests of the test)."""
    for case in aimed:
        exercise(case.aim, case.cadence, tally)

    @(pinned or settings())
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        aim = data.draw(aims(zones))
        exercise(aim, data.draw(civil_cadences(aim, CIVIL_KINDS)), tally)

    property_()


def shortfall(tally: Tally) -> str | None:
    """Why the cases did not cover the claim (None when they did)."""
    if tally.resolutions.get("fold", 0) == 0 or tally.resolutions.get("gap", 0) == 0:
        return "no aimed or generated case hit both a fold and a gap"
    return None


@pytest.mark.gate(GATE)
def test_generated_cases_aimed_at_real_transitions(gate_evidence: GateEvidence) -> None:
    """Aimed cases (every kind x {gap, fold} in zones that have them, see
    ``aimed_cases``) reach the guard's target in every run; generated ones explore."""
    aimed = aimed_cases(CIVIL_KINDS)
    tally = Tally()
    run_cases(aimed, tally)
    gate_evidence.record("tzdata", tzdata_version())
    gate_evidence.record("aimed_cases", [c.label() for c in aimed])
    # aim_spots "aimed-gap"/"aimed-fold" count the aimed cases; the rest were generated.
    gate_evidence.record("generated", tally.evidence())
    gate_evidence.record("reproduction", reproduction())
    reason = shortfall(tally)
    if reason:
        gate_evidence.not_covered(reason)


def _sweep_transitions(key: str, deep: bool) -> list[Transition]:
    found = transitions_of(key)
    if deep:
        return list(found)
    gaps = [t for t in found if t.is_gap]
    folds = [t for t in found if t.is_fold]
    picked = {id(t): t for t in (gaps[-1:] + folds[-1:])}
    return list(picked.values())


@pytest.mark.gate(GATE)
def test_every_zone_of_the_corpus(gate_evidence: GateEvidence) -> None:
    """Deterministic sweep: every zone; in quick, its latest gap and latest fold
    (all of its transitions in deep), wall times just before, at, inside, at the end of
    and just after each, with next/latest checked on either side of the transition."""
    deep = gate_profile() == "deep"
    zones_with_transitions = 0
    hits = {"gap": 0, "fold": 0, "thirty_minute": 0, "midnight": 0, "missing_date": 0}
    cases = 0
    for key in ZONES:
        chosen = _sweep_transitions(key, deep)
        zones_with_transitions += bool(chosen)
        for t in chosen:
            low, high = sorted([t.wall_before(), t.wall_after()])
            hits["gap" if t.is_gap else "fold"] += 1
            hits["thirty_minute"] += abs(t.after - t.before) == 1800
            hits["midnight"] += time(0) in (low.time(), high.time())
            middle = (low + (high - low) / 2).replace(microsecond=0)
            for wall in (
                low - timedelta(seconds=1),
                low,
                middle,
                high,
                high + timedelta(minutes=1),
            ):
                aim = Aim(key, t, wall.time(), wall.date(), t.instant, "sweep")
                kind = assert_resolution_matches(aim)
                hits["missing_date"] += kind == "missing-date"
                cadence = DailyCadence(aim.wall_time, key)
                # Both sides of the transition: alternate between the wall times.
                side = t.instant - timedelta(seconds=cases % 2)
                assert_next_and_latest(REAL, cadence, side)
                cases += 1
    gate_evidence.record("tzdata", tzdata_version())
    gate_evidence.record("zones_swept", len(ZONES))
    gate_evidence.record("zones_with_transitions", zones_with_transitions)
    gate_evidence.record("transition_kinds_hit", hits)
    gate_evidence.record("wall_time_cases", cases)
    if not all(hits[k] for k in ("gap", "fold", "thirty_minute", "midnight")):
        gate_evidence.not_covered(f"sweep missed a transition kind: {hits}")


# (zone, local date, wall time) -> (expected UTC instant, resolution); each was checked
# by hand against the zone's published rules.
KNOWN = [
    # New York spring forward: 02:30 does not exist; 03:00 EDT is 07:00Z, not 07:30Z.
    ("America/New_York", date(2026, 3, 8), time(2, 30), "2026-03-08T07:00:00", "gap->first valid"),
    # New York fall back: 01:30 happens twice; the earlier (EDT) is 05:30Z.
    ("America/New_York", date(2026, 11, 1), time(1, 30), "2026-11-01T05:30:00", "fold->earlier"),
    # Southern hemisphere, both folds of the year: Sydney.
    ("Australia/Sydney", date(2026, 4, 5), time(2, 30), "2026-04-04T15:30:00", "fold->earlier"),
    ("Australia/Sydney", date(2026, 10, 4), time(2, 30), "2026-10-03T16:00:00", "gap->first valid"),
    # Lord Howe: 30-minute daylight saving.
    (
        "Australia/Lord_Howe",
        date(2026, 10, 4),
        time(2, 15),
        "2026-10-03T15:30:00",
        "gap->first valid",
    ),
    ("Australia/Lord_Howe", date(2026, 4, 5), time(1, 45), "2026-04-04T14:45:00", "fold->earlier"),
    # Nuuk: 23:00 -> 00:00 on the last Saturday night of March; 23:30 fires at 00:00.
    ("America/Nuuk", date(2026, 3, 28), time(23, 30), "2026-03-29T01:00:00", "gap->first valid"),
    # Sao Paulo 2018: midnight gap 00:00 -> 01:00.
    ("America/Sao_Paulo", date(2018, 11, 4), time(0, 0), "2018-11-04T03:00:00", "gap->first valid"),
    # Europe/London: both ends of summer time.
    ("Europe/London", date(2026, 3, 29), time(1, 0), "2026-03-29T01:00:00", "gap->first valid"),
    ("Europe/London", date(2026, 10, 25), time(1, 0), "2026-10-25T00:00:00", "fold->earlier"),
]


@pytest.mark.gate(GATE)
@pytest.mark.parametrize(("zone", "day", "wall", "expected", "resolution"), KNOWN)
def test_known_transitions(
    gate_evidence: GateEvidence, zone: str, day: date, wall: time, expected: str, resolution: str
) -> None:
    cadence = DailyCadence(wall, zone)
    start = datetime.combine(day, time(0), tzinfo=UTC) - timedelta(days=3)
    firings = [f for f in upcoming(cadence, start, 6) if f.local_date == day]
    assert len(firings) == 1, "the civil date fires exactly once"
    firing = firings[0]
    assert firing.instant == datetime.fromisoformat(expected).replace(tzinfo=UTC)
    assert firing.resolution.value == resolution
    # Fires once: the next firing is the following day's, not a second one in the fold.
    following = next_after(cadence, firing.instant)
    assert following is not None
    assert following - firing.instant > timedelta(hours=20)
    gate_evidence.record("case", firing.describe())


@pytest.mark.gate(GATE)
def test_a_civil_date_missing_from_the_zone_has_no_occurrence(gate_evidence: GateEvidence) -> None:
    """Pacific/Apia skipped 2011-12-30: daily 09:00 goes from the 29th to the 31st,
    and a weekly Friday (2011-12-30 was a Friday) skips that week."""
    daily = DailyCadence(time(9), "Pacific/Apia")
    firing = next_firing(daily, datetime(2011, 12, 29, 19, 0, tzinfo=UTC))
    assert firing is not None
    assert firing.local_date == date(2011, 12, 31)
    assert firing.instant == datetime(2011, 12, 30, 19, 0, tzinfo=UTC)
    friday = WeeklyCadence(time(9), "Pacific/Apia", (5,))
    after = next_firing(friday, datetime(2011, 12, 24, tzinfo=UTC))
    assert after is not None
    assert after.local_date == date(2012, 1, 6)
    gate_evidence.record("apia_daily_after_29th", firing.describe())
    gate_evidence.record("apia_friday_after_24th", after.describe())


# UTC years whose footer-rule transitions are located by zoneinfo alone: months with four
# and with five of the rule's weekday, before and after 2038, past Gaza's explicit list.
FOOTER_YEARS = (2027, 2029, 2031, 2038, 2060, 2090)


@pytest.mark.gate(GATE)
def test_footer_rule_transitions_located_by_zoneinfo(gate_evidence: GateEvidence) -> None:
    """The other checks aim at transitions listed by the product's own TZif reader, so a
    footer rule read wrong ("last Sunday" as the fourth, a week or a weekday off) moves
    the aims with it while the calculator's quiet-span shortcut trusts the wall clock
    across the real change. Here each distinct footer rule's changes are found by
    stepping through zoneinfo: a reference in a fold's second pass must still see the
    first pass's occurrence as latest, and a count starting where a gap ends must
    include the occurrence the gap moved there."""
    hits = {"gap": 0, "fold": 0}
    for key in footer_zones():
        for year in FOOTER_YEARS:
            for t in zoneinfo_transitions(key, year):
                low, high = t.walls()
                width = high - low
                if t.is_gap:
                    wall = (low + width / 2).replace(microsecond=0)
                    cadence = DailyCadence(wall.time(), key)
                    assert_next_and_latest(REAL, cadence, t.instant)
                    assert_count(REAL, cadence, t.instant, t.instant + timedelta(days=2))
                else:
                    # Wall time seven eighths into the fold; the reference three quarters
                    # through its second pass: the clock has not yet shown that time a
                    # second time, but the first pass did, so it is the latest occurrence.
                    cadence = DailyCadence((low + width * 7 / 8).replace(microsecond=0).time(), key)
                    reference = t.instant + width * 3 / 4
                    assert_next_and_latest(REAL, cadence, reference)
                    assert_count(REAL, cadence, reference, reference + timedelta(days=2))
                hits["gap" if t.is_gap else "fold"] += 1
    gate_evidence.record("footer_zones", footer_zones())
    gate_evidence.record("footer_years", list(FOOTER_YEARS))
    gate_evidence.record("zoneinfo_transitions_checked", hits)
    if not all(hits.values()):
        gate_evidence.not_covered(f"zoneinfo located no footer gap or fold: {hits}")


def _folds_across_midnight() -> list[tuple[str, Transition]]:
    """Every fold (all zones, all years) whose repeated wall times run past midnight:
    Goose Bay's 00:01 -> 23:01, Alaska's 24-hour fold of 1867."""
    found = []
    for key in ZONES:
        for t in transitions_of(key):
            low, high = sorted([t.wall_before(), t.wall_after()])
            if t.is_fold and low.date() != (high - timedelta(seconds=1)).date():
                found.append((key, t))
    return found


@pytest.mark.gate(GATE)
def test_folds_that_cross_midnight(gate_evidence: GateEvidence) -> None:
    """When the clock falls back across midnight, the second pass shows the earlier date
    again while the later date's occurrence already happened in the first pass: the
    latest occurrence at such a reference lies on a local date after the reference's
    own, so a look-up must start past the reference's local date, not at it."""
    folds = _folds_across_midnight()
    for key, t in folds:
        low, high = sorted([t.wall_before(), t.wall_after()])
        midnight = datetime.combine(high.date(), time(0))
        # A wall time after midnight inside the fold: it first happens on the later date.
        wall = midnight + timedelta(seconds=(high - midnight).total_seconds() // 2)
        cadence = DailyCadence(wall.time(), key)
        # Halfway through the second pass's part before midnight.
        reference = t.instant + timedelta(seconds=(midnight - low).total_seconds() // 2)
        assert_next_and_latest(REAL, cadence, reference)
        assert_count(REAL, cadence, reference - timedelta(days=2), reference)
    gate_evidence.record("folds_across_midnight", len(folds))
    gate_evidence.record("zones", sorted({key for key, _ in folds}))
    if not folds:
        gate_evidence.not_covered("tzdata has no fold that crosses midnight")
