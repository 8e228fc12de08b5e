"""Schedule, ScheduleRevision, RunLimits and ScheduleOccurrence: examples of each rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.canonical import canonical_json
from scheduling.domain.errors import ValidationError
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import RunLimits, ScheduleRevision

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def revision(**changes: Any) -> ScheduleRevision:
    data: dict[str, Any] = {
        "schedule_id": UUID(int=1),
        "revision": 1,
        "title": "Digest",
        "instruction": "Summarize.",
        "agent_id": UUID(int=2),
        "agent_version": "v1",
        "policy_profile": "default",
        "requested_scopes": frozenset({"browser.profile.read"}),
        "limits": {"max_steps": 10, "max_model_calls": 5, "max_tool_calls": 5, "max_cost": "1.50"},
        "run_timeout_seconds": 300,
        "cadence": {
            "kind": "WEEKLY",
            "local_time": "09:00",
            "timezone": "Europe/Paris",
            "weekdays": [5, 1],
        },
        "misfire_grace_seconds": 3600,
        "max_consecutive_failures": 2,
        "created_by_principal_id": "user-1",
        "created_at": T0,
    }
    data.update(changes)
    return ScheduleRevision(**data)


def test_definition_round_trips_through_canonical_json() -> None:
    value = revision()
    stored = json.loads(canonical_json(value.to_definition()))
    again = ScheduleRevision.from_definition(value.schedule_id, 1, "user-1", T0, stored)
    assert again == value
    assert again.cadence == {
        "kind": "WEEKLY",
        "local_time": "09:00:00",
        "timezone": "Europe/Paris",
        "weekdays": [1, 5],
    }
    assert again.timezone == "Europe/Paris"
    assert stored["limits"]["max_cost"] == "1.5"
    assert again.limits.max_cost == Decimal("1.5")


def test_definition_without_a_browser_binding_decodes() -> None:
    definition = revision().to_definition()
    del definition["browser_profile_id"]
    assert (
        ScheduleRevision.from_definition(UUID(int=1), 1, "u", T0, definition).browser_profile_id
        is None
    )


@pytest.mark.parametrize(
    ("limits", "code"),
    [
        (
            {"max_steps": 0, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "1"},
            "schedule.limits.non_positive_bound",
        ),
        (
            {"max_steps": 1, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "Infinity"},
            "schedule.limits.not_finite",
        ),
        (
            {
                "max_steps": 3,
                "max_model_calls": 1,
                "max_tool_calls": 1,
                "max_cost": "1",
                "reserve_steps": 3,
            },
            "schedule.limits.invalid_reserve",
        ),
        (
            {
                "max_steps": 3,
                "max_model_calls": 1,
                "max_tool_calls": 1,
                "max_cost": "1",
                "reserve_cost": "1",
            },
            "schedule.limits.invalid_reserve",
        ),
        (
            {"max_steps": 3, "max_model_calls": 1, "max_tool_calls": 1},
            "schedule.limits.missing_field",
        ),
    ],
)
def test_run_limits_are_finite_and_positive(limits: dict[str, Any], code: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RunLimits(**limits)
    assert caught.value.code == code


def test_revision_timezone_follows_its_cadence() -> None:
    assert revision(cadence={"kind": "ONCE", "at": "2026-01-02T00:00:00Z"}).timezone is None
    with pytest.raises(ValidationError) as caught:
        revision(timezone="UTC")
    assert caught.value.code == "schedule.revision.timezone_mismatch"


def test_erased_materialized_occurrence_keeps_its_audit_facts() -> None:
    occurrence = ScheduleOccurrence(
        id=UUID(int=5),
        schedule_id=UUID(int=1),
        schedule_revision=1,
        nominal_fire_at=T0,
        disposition="MATERIALIZED",
        session_id=None,
        run_id=None,
        reason_code=None,
        authority_version="v3",
        materialized_at=T0 + timedelta(seconds=2),
        links_erased_at=T0 + timedelta(days=30),
        created_at=T0,
    )
    assert occurrence.links_erased
    with pytest.raises(ValidationError) as caught:
        occurrence.model_copy(update={"run_id": UUID(int=6)})
    assert caught.value.code == "schedule.occurrence.partial_erasure"
