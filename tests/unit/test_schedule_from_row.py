"""``Schedule.from_row`` (the lock row, ADR 2341) builds what the validating
constructor builds from the same columns, and refuses what it refuses with the same
code: Hypothesis draws rows, valid and invalid, and both paths must agree. A trusted
path that skipped the invariants (plain ``model_construct``) fails the invalid cases;
one that kept the enums as text fails equality with the validated model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.domain.errors import ValidationError
from scheduling.domain.schedule import Schedule

BASE = datetime(2026, 1, 1, tzinfo=UTC)
instants = st.integers(0, 10**6).map(lambda s: BASE + timedelta(seconds=s))
rows = st.fixed_dictionaries(
    {
        "id": st.uuids(),
        "tenant_id": st.sampled_from(["t", " ", "tenant-1"]),
        "principal_id": st.sampled_from(["p", "", "principal"]),
        "state": st.sampled_from(["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED", "RUNNING"]),
        "pause_reason": st.sampled_from([None, "user", "failure_limit", "bored"]),
        "current_revision": st.integers(-1, 3),
        "next_fire_at": st.none() | instants,
        "consecutive_failures": st.integers(-1, 3),
        "created_at": instants,
        "updated_at": instants,
    }
)


def _outcome(build: Any, row: dict[str, Any]) -> Schedule | str:
    try:
        return build(**row)  # type: ignore[no-any-return]
    except ValidationError as exc:
        return exc.code


@given(rows)
def test_from_row_agrees_with_the_validating_constructor(row: dict[str, Any]) -> None:
    assert _outcome(Schedule.from_row, row) == _outcome(Schedule, row)


def test_from_row_refuses_a_naive_instant_and_an_unknown_state_as_domain_errors() -> None:
    row: dict[str, Any] = {
        "id": UUID(int=1),
        "tenant_id": "t",
        "principal_id": "p",
        "state": "ACTIVE",
        "pause_reason": None,
        "current_revision": 1,
        "next_fire_at": None,
        "consecutive_failures": 0,
        "created_at": BASE,
        "updated_at": BASE,
    }
    assert Schedule.from_row(**row) == Schedule(**row)
    with pytest.raises(ValidationError):
        Schedule.from_row(**{**row, "updated_at": BASE.replace(tzinfo=None)})
    with pytest.raises(ValidationError):
        Schedule.from_row(**{**row, "state": "RUNNING"})
