"""The 14 schedule.* process events: closed payloads, no forbidden field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from scheduling.domain.errors import ValidationError
from scheduling.domain.events import (
    FORBIDDEN_FIELD,
    PAYLOAD_FIELDS,
    PAYLOAD_SHAPE,
    ScheduleEvent,
    ScheduleEventType,
    misfires_coalesced,
    next_fire_repaired,
    occurrence_event,
    state_event,
)
from scheduling.domain.schedule import PauseReason, Schedule, ScheduleState

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ACTIVE = Schedule(
    id=UUID(int=1),
    tenant_id="t",
    principal_id="p",
    state=ScheduleState.ACTIVE,
    pause_reason=None,
    current_revision=2,
    next_fire_at=T0 + timedelta(hours=3),
    consecutive_failures=0,
    created_at=T0,
    updated_at=T0,
)
PAUSED = ACTIVE.model_copy(
    update={"state": ScheduleState.PAUSED, "pause_reason": PauseReason.USER, "next_fire_at": None}
)


def test_there_are_exactly_the_fourteen_spec_types() -> None:
    assert len(ScheduleEventType) == 14
    assert set(PAYLOAD_FIELDS) == set(ScheduleEventType)


def test_pause_event_keeps_previous_and_new_next_fire() -> None:
    event = state_event(
        UUID(int=9),
        ScheduleEventType.PAUSED,
        before=ACTIVE,
        after=PAUSED,
        actor="principal:p",
        at=T0,
    )
    assert event.payload["previous_state"] == "ACTIVE"
    assert event.payload["next_state"] == "PAUSED"
    assert event.payload["previous_next_fire_at"] == "2026-03-01T15:00:00Z"
    assert event.payload["next_fire_at"] is None
    assert set(event.payload) == PAYLOAD_FIELDS[ScheduleEventType.PAUSED]


def test_every_builder_produces_its_closed_set() -> None:
    built = [
        state_event(
            UUID(int=2), ScheduleEventType.CREATED, before=None, after=ACTIVE, actor="a", at=T0
        ),
        next_fire_repaired(UUID(int=3), ACTIVE, previous=None, repaired=T0, actor="m", at=T0),
        occurrence_event(
            UUID(int=4),
            ACTIVE,
            occurrence_id=UUID(int=5),
            revision=2,
            disposition="MATERIALIZED",
            nominal_fire_at=T0,
            actor="scheduler",
            at=T0,
            session_id=UUID(int=6),
            run_id=UUID(int=7),
        ),
        occurrence_event(
            UUID(int=8),
            ACTIVE,
            occurrence_id=UUID(int=5),
            revision=2,
            disposition="MISSED",
            nominal_fire_at=T0,
            actor="scheduler",
            at=T0,
            reason_code="schedule.misfire.outside_grace",
        ),
        misfires_coalesced(
            UUID(int=10),
            ACTIVE,
            revision=2,
            first_nominal_at=T0,
            last_nominal_at=T0,
            count=3,
            actor="scheduler",
            at=T0,
        ),
    ]
    for event in built:
        assert set(event.payload) == PAYLOAD_FIELDS[event.event_type]


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({"instruction": "x"}, FORBIDDEN_FIELD),
        ({"api_token": "x"}, FORBIDDEN_FIELD),
        ({"note": 1}, PAYLOAD_SHAPE),
    ],
)
def test_extra_or_forbidden_fields_are_refused(extra: dict[str, object], code: str) -> None:
    event = state_event(
        UUID(int=2), ScheduleEventType.CANCELLED, before=ACTIVE, after=ACTIVE, actor="a", at=T0
    )
    with pytest.raises(ValidationError) as info:
        ScheduleEvent(**{**event.model_dump(), "payload": {**event.payload, **extra}})
    assert info.value.code == code


def test_a_missing_field_is_refused() -> None:
    event = state_event(
        UUID(int=2), ScheduleEventType.UPDATED, before=ACTIVE, after=ACTIVE, actor="a", at=T0
    )
    payload = dict(event.payload)
    del payload["revision"]
    with pytest.raises(ValidationError) as info:
        ScheduleEvent(**{**event.model_dump(), "payload": payload})
    assert info.value.code == PAYLOAD_SHAPE
