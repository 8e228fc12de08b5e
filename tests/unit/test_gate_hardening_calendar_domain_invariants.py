"""Tests of the domain_invariants gate check: it must go red against broken models.

Each broken model is a realistic regression: one validation skipped (an illegal value
is admitted), the right rejection under the wrong code, or a value built that silently
changes a field. The deterministic half of the check must catch each one, and so must
the generated half on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from gates.checks.test_domain_invariants import (
    MODELS,
    ModelCase,
    Tally,
    generated,
    run_explicit,
    uncovered,
)
from scheduling.domain import occurrence as occ
from scheduling.domain import schedule as sch
from scheduling.domain.errors import ValidationError
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.schedule import Schedule

CASES = {case.name: case for case in MODELS}


def _skipping(model: Any, code: str) -> Callable[..., Any]:
    """The model without the one rule that raises ``code``."""

    def build(**data: Any) -> Any:
        try:
            return model(**data)
        except ValidationError as exc:
            if exc.code == code:
                return model.model_construct(**data)
            raise

    return build


def _renaming(model: Any, code: str, wrong: str) -> Callable[..., Any]:
    """The model, but one rejection carries another (registered) code."""

    def build(**data: Any) -> Any:
        try:
            return model(**data)
        except ValidationError as exc:
            if exc.code == code:
                raise ValidationError(wrong, exc.message) from None
            raise

    return build


def _drops_next_fire(**data: Any) -> Schedule:
    """Constructs, then loses next_fire_at: a legal-looking but partial value."""
    value = Schedule(**data)
    return Schedule.model_construct(**{**value.model_dump(), "next_fire_at": None})


BROKEN: dict[str, tuple[str, Callable[..., Any]]] = {
    "schedule-skips-updated-before-created": (
        "schedule",
        _skipping(Schedule, sch.UPDATED_BEFORE_CREATED),
    ),
    "schedule-skips-pause-reason-required": (
        "schedule",
        _skipping(Schedule, sch.PAUSE_REASON_REQUIRED),
    ),
    "schedule-drops-next-fire-at": ("schedule", _drops_next_fire),
    "occurrence-admits-partial-erasure": (
        "occurrence",
        _skipping(ScheduleOccurrence, occ.PARTIAL_ERASURE),
    ),
    "occurrence-partial-erasure-as-links-required": (
        "occurrence",
        _renaming(ScheduleOccurrence, occ.PARTIAL_ERASURE, occ.LINKS_REQUIRED),
    ),
    "schedule-identity-as-invalid-counter": (
        "schedule",
        _renaming(Schedule, sch.EMPTY_IDENTITY, sch.INVALID_COUNTER),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_models_pass_and_cover_every_defect(name: str) -> None:
    tally = Tally()
    run_explicit(CASES[name], tally)
    assert [g for g in uncovered(CASES[name], tally) if "explicit" in g] == []


def test_an_empty_run_is_not_covered() -> None:
    case: ModelCase = CASES["occurrence"]
    gaps = uncovered(case, Tally())
    assert any("legal values" in g for g in gaps)
    assert any("erased" in g for g in gaps)
    assert len([g for g in gaps if "no explicit case" in g]) == len(case.defects)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_explicit_cases_catch_each_broken_model(name: str) -> None:
    model_name, broken = BROKEN[name]
    with pytest.raises(AssertionError):
        run_explicit(CASES[model_name], Tally(), broken)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_generated_inputs_alone_catch_each_broken_model(name: str) -> None:
    model_name, broken = BROKEN[name]
    pinned = settings(
        max_examples=20,
        derandomize=True,
        phases=[Phase.generate],  # no shrinking: finding the bug is the point
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    checks = generated(CASES[model_name], Tally(), broken, pinned)
    with pytest.raises((AssertionError, ExceptionGroup)):
        _run_all(checks)


def _run_all(checks: list[Callable[[], None]]) -> None:
    for check in checks:
        check()
