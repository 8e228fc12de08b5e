"""Tests of the calendar_values gate check: it must go red against lax parsers.

Each lax parser is a realistic regression of ``parse_cadence`` (duplicates tolerated,
the February 30 rule dropped, a defect reported under another code, February 29
refused). If the check stayed green against one of them, the gate would not prove
"unique valid numbered days", "unique possible month/day pairs" or stable codes.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from gates.checks.test_calendar import (
    ALL_KINDS,
    DEFECT_CODES,
    DEFECTS,
    ValuesCoverage,
    explicit_defect_cases,
    generated_defects,
    generated_valid,
    run_explicit,
    values_shortfall,
)
from scheduling import parse_cadence
from scheduling.domain import cadence as cad
from scheduling.domain.errors import ValidationError

Parser = Callable[[Any], Any]


def _accepts_duplicates(payload: Any) -> Any:
    """Silently de-duplicates selectors instead of rejecting them."""
    if isinstance(payload, dict):
        payload = dict(payload)
        for name in ("weekdays", "days_of_month", "dates"):
            items = payload.get(name)
            if isinstance(items, list):
                unique: list[Any] = []
                for item in items:
                    if item not in unique:
                        unique.append(item)
                payload[name] = unique
    return parse_cadence(payload)


def _clamps_impossible_dates(payload: Any) -> Any:
    """Drops the February 30 rule: an impossible day becomes the month's last day."""
    if isinstance(payload, dict) and isinstance(payload.get("dates"), list):
        fixed = []
        for item in payload["dates"]:
            if (
                isinstance(item, dict)
                and isinstance(item.get("month"), int)
                and 1 <= item["month"] <= 12
            ):
                longest = calendar.monthrange(2000, item["month"])[1]
                if isinstance(item.get("day"), int) and longest < item["day"] <= 31:
                    item = {**item, "day": longest}
            fixed.append(item)
        payload = {**payload, "dates": fixed}
    return parse_cadence(payload)


def _wrong_code(payload: Any) -> Any:
    """Rejects a duplicated day, but under the out-of-range code."""
    try:
        return parse_cadence(payload)
    except ValidationError as exc:
        if exc.code == cad.DAY_DUPLICATE:
            raise ValidationError(cad.DAY_OUT_OF_RANGE, exc.message) from None
        raise


def _refuses_leap_day(payload: Any) -> Any:
    """Too strict: treats February 29 as impossible."""
    if isinstance(payload, dict) and {"month": 2, "day": 29} in (payload.get("dates") or []):
        raise ValidationError(cad.YEARLY_DATE_IMPOSSIBLE, "no such date")
    return parse_cadence(payload)


LAX: dict[str, Parser] = {
    "accepts-duplicates": _accepts_duplicates,
    "clamps-impossible-dates": _clamps_impossible_dates,
    "wrong-code": _wrong_code,
    "refuses-leap-day": _refuses_leap_day,
}


def test_real_parser_passes_every_explicit_case() -> None:
    coverage = ValuesCoverage()
    run_explicit(parse_cadence, coverage)
    assert coverage.missing_codes() == []
    assert coverage.defects_without_explicit_case() == []
    assert set(coverage.explicit) == DEFECT_CODES
    assert len(DEFECT_CODES) == 20


def test_every_defect_has_explicit_cases_under_its_own_code() -> None:
    names = [d.name for d in DEFECTS]
    assert len(names) == len(set(names))
    cases = explicit_defect_cases()
    assert {d.name for d, _ in cases} == set(names)


def test_an_empty_run_is_not_covered() -> None:
    """The guard's inputs: nothing exercised means every code is reported missing."""
    coverage = ValuesCoverage()
    assert coverage.missing_codes() == sorted(DEFECT_CODES)
    assert len(coverage.defects_without_explicit_case()) == len(DEFECTS)


@pytest.mark.parametrize("name", sorted(LAX))
def test_explicit_cases_catch_each_lax_parser(name: str) -> None:
    with pytest.raises(AssertionError):
        run_explicit(LAX[name], ValuesCoverage())


@pytest.mark.parametrize("name", ["accepts-duplicates", "clamps-impossible-dates", "wrong-code"])
def test_generated_defects_alone_catch_the_lax_parser(name: str) -> None:
    """The generated half finds each bug on its own, without the explicit cases."""
    pinned = settings(
        max_examples=20,
        derandomize=True,
        phases=[Phase.generate],  # no shrinking: finding the bug is the point
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    checks = generated_defects(LAX[name], ValuesCoverage(), pinned)
    with pytest.raises((AssertionError, ExceptionGroup)):
        _run_all(checks)


def _run_all(checks: list[Callable[[], None]]) -> None:
    for check in checks:
        check()


def test_every_kind_is_accepted_by_construction() -> None:
    """One generated property per kind: every kind is accepted whatever the seed (a
    single property drawing the kind once missed DAILY, seed 559761823)."""
    coverage = ValuesCoverage()
    for valid in generated_valid(parse_cadence, coverage):
        valid()
    assert set(coverage.accepted) == set(ALL_KINDS)
    assert values_shortfall(coverage) is None


def test_a_run_narrowed_to_one_kind_is_still_not_covered() -> None:
    """The guard is as strict as before: generation narrowed to ONCE (and no explicit
    edges) genuinely misses the other kinds, and the guard names them."""
    coverage = ValuesCoverage()
    for valid in generated_valid(parse_cadence, coverage, kinds=("ONCE",)):
        valid()
    shortfall = values_shortfall(coverage)
    assert shortfall is not None
    for kind in set(ALL_KINDS) - {"ONCE"}:
        assert kind in shortfall
