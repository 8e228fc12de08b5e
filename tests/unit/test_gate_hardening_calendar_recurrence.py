"""Tests of the calendar_recurrence gate check's coverage machinery: the guard names
every kind/rule pair never hit, and the aimed strategies really land inside gaps and
folds for monthly and yearly cadences (so the guard is met by aiming, not by luck)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.checks.recurrence_support import (
    REAL,
    RULE_NAMES,
    Aim,
    Tally,
    assert_resolution_on,
    civil_cadences,
    transition_aims,
)
from gates.checks.test_calendar import CALENDAR_KINDS, rules_never_hit

ZONES = ["America/New_York", "Europe/London", "Australia/Sydney", "America/Nuuk"]


def test_guard_names_each_missing_pair() -> None:
    tally = Tally()
    assert len(rules_never_hit(tally)) == 4
    aim = Aim("UTC", None, time(0), date(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC), "random")
    tally.note(aim, RULE_NAMES["fold"], "MONTHLY")
    tally.note(aim, RULE_NAMES["gap"], "MONTHLY")
    tally.note(aim, RULE_NAMES["exact"], "YEARLY")
    assert rules_never_hit(tally) == [
        "YEARLY never hit fold->earlier",
        "YEARLY never hit gap->first valid",
    ]
    tally.note(aim, RULE_NAMES["fold"], "YEARLY")
    tally.note(aim, RULE_NAMES["gap"], "YEARLY")
    assert rules_never_hit(tally) == []
    assert tally.evidence()["resolutions_by_kind"]["YEARLY"] == {
        "exact": 1,
        "fold->earlier": 1,
        "gap->first valid": 1,
    }


def test_aimed_cases_resolve_as_aimed() -> None:
    """Most cases aimed inside a gap (fold) resolve by the gap (fold) rule."""
    hits: dict[tuple[str, str], int] = {}
    draws: dict[str, int] = {}

    @settings(
        max_examples=60,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        want = data.draw(st.sampled_from(["gap", "fold"]))
        aim = data.draw(transition_aims(want, ZONES))
        cadence = data.draw(civil_cadences(aim, CALENDAR_KINDS))
        rule = assert_resolution_on(REAL, cadence, aim.day)
        draws[want] = draws.get(want, 0) + 1
        hits[(want, rule)] = hits.get((want, rule), 0) + 1

    property_()
    for want in ("gap", "fold"):
        assert hits.get((want, want), 0) >= draws[want] * 0.8, (want, hits, draws)
