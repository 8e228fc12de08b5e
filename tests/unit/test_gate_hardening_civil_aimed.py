"""Tests of the tests for seed-stable coverage (issue 10) in civil_time and
calendar_recurrence.

* The aimed cases alone reach every guard's target: with generation narrowed to zones
  that never had a transition, the guards are met (by construction, not by the seed).
* The guards are as strict as before: the same narrowed generation without the aimed
  cases genuinely misses every gap and fold, and each guard reports not covered.
* Every aimed case lands where it claims (its kind, its rule, its zone).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

import gates.checks.test_calendar as calendar_check
import gates.checks.test_civil_time as civil_check
from gates.checks.aimed_cases import AIM_ZONES, RULES, aimed_cases, cadence_selecting
from gates.checks.recurrence_support import (
    REAL,
    RULE_NAMES,
    ZONES,
    Tally,
    assert_resolution_on,
    transitions_of,
)

# Zones with no transition at all (Etc/GMT+5, UTC, ...): generation there never meets
# a gap or a fold, whatever the seed.
FLAT = [z for z in ZONES if not transitions_of(z)]
FEW = settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_flat_zones_exist_and_have_no_transition() -> None:
    assert "UTC" in FLAT
    assert not set(FLAT) & set(AIM_ZONES)


@pytest.mark.parametrize("kinds", [civil_check.CIVIL_KINDS, calendar_check.CALENDAR_KINDS])
def test_every_aimed_case_resolves_by_its_rule(kinds: tuple[str, ...]) -> None:
    cases = aimed_cases(kinds)
    assert {(c.kind, c.rule, c.aim.zone) for c in cases} == {
        (k, r, z) for k in kinds for r in RULES for z in AIM_ZONES
    }
    for case in cases:
        assert str(case.cadence.kind.value) == case.kind
        assert assert_resolution_on(REAL, case.cadence, case.aim.day) == case.rule


def test_once_has_no_aimed_case() -> None:
    with pytest.raises(ValueError, match="ONCE"):
        cadence_selecting("ONCE", aimed_cases(("DAILY",))[0].aim)


def test_civil_time_guard_is_met_by_the_aimed_cases_alone() -> None:
    tally = Tally()
    civil_check.run_cases(aimed_cases(civil_check.CIVIL_KINDS), tally, zones=FLAT, pinned=FEW)
    assert civil_check.shortfall(tally) is None
    assert tally.spots["aimed-gap"] == tally.spots["aimed-fold"] == 2 * len(AIM_ZONES)
    for kind in civil_check.CIVIL_KINDS:
        assert tally.by_kind[kind]["fold"] >= len(AIM_ZONES)
        assert tally.by_kind[kind]["gap"] >= len(AIM_ZONES)


def test_civil_time_guard_still_fails_when_generation_misses() -> None:
    tally = Tally()
    civil_check.run_cases([], tally, zones=FLAT, pinned=FEW)
    assert tally.examples > 0
    assert set(tally.resolutions) == {"exact"}
    assert civil_check.shortfall(tally) == "no aimed or generated case hit both a fold and a gap"


def test_civil_time_guard_fails_when_only_one_rule_is_aimed() -> None:
    """Folds alone do not satisfy the guard: it needs a gap too."""
    folds = [c for c in aimed_cases(civil_check.CIVIL_KINDS) if c.rule == "fold"]
    tally = Tally()
    civil_check.run_cases(folds, tally, zones=FLAT, pinned=FEW)
    assert civil_check.shortfall(tally) is not None


def test_calendar_recurrence_guard_is_met_by_the_aimed_cases_alone() -> None:
    tally = Tally()
    calendar_check.run_recurrence_cases(
        aimed_cases(calendar_check.CALENDAR_KINDS), tally, zones=FLAT, pinned=FEW
    )
    assert calendar_check.rules_never_hit(tally) == []


def test_calendar_recurrence_guard_still_fails_when_generation_misses() -> None:
    tally = Tally()
    calendar_check.run_recurrence_cases([], tally, zones=FLAT, pinned=FEW)
    assert tally.examples > 0
    assert calendar_check.rules_never_hit(tally) == [
        f"{kind} never hit {RULE_NAMES[rule]}"
        for kind in calendar_check.CALENDAR_KINDS
        for rule in ("fold", "gap")
    ]


def test_calendar_recurrence_guard_names_the_one_kind_not_aimed() -> None:
    """Aimed cases for MONTHLY only: YEARLY's fold and gap are still demanded."""
    tally = Tally()
    calendar_check.run_recurrence_cases(aimed_cases(("MONTHLY",)), tally, zones=FLAT, pinned=FEW)
    assert calendar_check.rules_never_hit(tally) == [
        "YEARLY never hit fold->earlier",
        "YEARLY never hit gap->first valid",
    ]
