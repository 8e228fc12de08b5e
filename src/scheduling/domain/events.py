"""The 14 ``schedule.*`` process events and their payload builders (spec "Events and audit").

A schedule exists outside any session, so its lifecycle is recorded as process events.
Every payload carries exactly the fields the spec lists for its type:

* all: schedule_id, revision, tenant_id, principal_id, actor, occurred_at;
* state changes: previous_state and next_state (previous_state is null on create);
* pause and resume also keep previous_next_fire_at and next_fire_at, and so does the
  cache repair (schedule.next_fire_repaired) whose whole content is that change;
* occurrence events: occurrence_id and nominal_fire_at; a materialized one adds
  session_id and run_id, every other one its stable reason_code;
* schedule.misfires_coalesced: only first_nominal_at, last_nominal_at and count.

``ScheduleEvent`` refuses a payload whose keys differ from its type's set, and any key
the spec forbids (instruction, credentials, raw policy, validation matches), so no
builder or caller can leak one into the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Self
from uuid import UUID

from pydantic import field_validator, model_validator

from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.domain.value_model import DomainModel, aware_utc, field_codes

field_codes("event")
PAYLOAD_SHAPE = reason(
    "schedule.event.payload_shape", "An event payload's fields differ from its type's closed set"
)
FORBIDDEN_FIELD = reason(
    "schedule.event.forbidden_field",
    "An event payload names a field the spec forbids (instruction, credential, policy, match)",
)


RUN_ACCOUNTED = "schedule.run_accounted"
"""The post-run accounting event (spec "State transitions"); not a lifecycle event type."""


class ScheduleEventType(StrEnum):
    CREATED = "schedule.created"
    UPDATED = "schedule.updated"
    PAUSED = "schedule.paused"
    RESUMED = "schedule.resumed"
    CANCELLED = "schedule.cancelled"
    COMPLETED = "schedule.completed"
    AUTO_PAUSED = "schedule.auto_paused"
    OCCURRENCE_MATERIALIZED = "schedule.occurrence.materialized"
    OCCURRENCE_MISSED = "schedule.occurrence.missed"
    OCCURRENCE_SKIPPED_OVERLAP = "schedule.occurrence.skipped_overlap"
    OCCURRENCE_AUTHORIZATION_FAILED = "schedule.occurrence.authorization_failed"
    OCCURRENCE_CONFIGURATION_FAILED = "schedule.occurrence.configuration_failed"
    MISFIRES_COALESCED = "schedule.misfires_coalesced"
    NEXT_FIRE_REPAIRED = "schedule.next_fire_repaired"


_E = ScheduleEventType
COMMON = frozenset({"schedule_id", "revision", "tenant_id", "principal_id", "actor", "occurred_at"})
_STATES = frozenset({"previous_state", "next_state"})
_FIRE = frozenset({"previous_next_fire_at", "next_fire_at"})
_OCCURRENCE = frozenset({"occurrence_id", "nominal_fire_at"})

PAYLOAD_FIELDS: dict[ScheduleEventType, frozenset[str]] = {
    _E.CREATED: COMMON | _STATES,
    _E.UPDATED: COMMON | _STATES,
    _E.PAUSED: COMMON | _STATES | _FIRE,
    _E.RESUMED: COMMON | _STATES | _FIRE,
    _E.CANCELLED: COMMON | _STATES,
    _E.COMPLETED: COMMON | _STATES,
    _E.AUTO_PAUSED: COMMON | _STATES,
    _E.OCCURRENCE_MATERIALIZED: COMMON | _OCCURRENCE | {"session_id", "run_id"},
    _E.OCCURRENCE_MISSED: COMMON | _OCCURRENCE | {"reason_code"},
    _E.OCCURRENCE_SKIPPED_OVERLAP: COMMON | _OCCURRENCE | {"reason_code"},
    _E.OCCURRENCE_AUTHORIZATION_FAILED: COMMON | _OCCURRENCE | {"reason_code"},
    _E.OCCURRENCE_CONFIGURATION_FAILED: COMMON | _OCCURRENCE | {"reason_code"},
    _E.MISFIRES_COALESCED: COMMON | {"first_nominal_at", "last_nominal_at", "count"},
    _E.NEXT_FIRE_REPAIRED: COMMON | _FIRE,
}

# Substrings no payload key may contain (spec: no instruction, credential, raw policy
# content or secret-like validation match).
FORBIDDEN_KEY_PARTS = (
    "instruction",
    "token",
    "secret",
    "cookie",
    "credential",
    "password",
    "api_key",
    "policy",
    "match",
    "scopes",
    "title",
)
if any(p in k for keys in PAYLOAD_FIELDS.values() for k in keys for p in FORBIDDEN_KEY_PARTS):
    raise RuntimeError("a closed payload set names a forbidden key part")

# The lifecycle state events, by the transition that emits them.
STATE_EVENTS = frozenset({_E.CREATED, _E.UPDATED, _E.PAUSED, _E.RESUMED, _E.CANCELLED})
STATE_EVENTS |= {_E.COMPLETED, _E.AUTO_PAUSED}


class ScheduleEvent(DomainModel):
    """One append-only process event about one schedule."""

    _area = "event"

    id: UUID
    event_type: ScheduleEventType
    tenant_id: str
    principal_id: str
    actor: str
    schedule_id: UUID
    occurred_at: datetime
    payload: dict[str, Any]

    @field_validator("occurred_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return aware_utc(value, field="occurred_at")

    @model_validator(mode="after")
    def _closed_payload(self) -> Self:
        expected = PAYLOAD_FIELDS[self.event_type]
        # The closed sets hold no forbidden part (checked at import), so only a payload
        # that is not exactly its set is scanned (about 12 us per event, ADR 2460).
        if self.payload.keys() != expected:
            keys = set(self.payload)
            forbidden = sorted(k for k in keys if any(p in k for p in FORBIDDEN_KEY_PARTS))
            if forbidden:
                raise ValidationError(
                    FORBIDDEN_FIELD, "forbidden event field", {"fields": forbidden}
                )
            raise ValidationError(
                PAYLOAD_SHAPE,
                f"{self.event_type.value} payload fields differ from the closed set",
                {"missing": sorted(expected - keys), "unexpected": sorted(keys - expected)},
            )
        if self.payload["schedule_id"] != str(self.schedule_id):
            raise ValidationError(PAYLOAD_SHAPE, "payload schedule_id differs from the event's")
        return self


def _instant(value: datetime | None) -> str | None:
    return None if value is None else format_instant(value)


def _state(value: ScheduleState | None) -> str | None:
    return None if value is None else value.value


def _event(
    event_id: UUID,
    event_type: ScheduleEventType,
    schedule: Schedule,
    actor: str,
    at: datetime,
    extra: Mapping[str, Any],
    *,
    revision: int | None = None,
) -> ScheduleEvent:
    payload: dict[str, Any] = {
        "schedule_id": str(schedule.id),
        "revision": schedule.current_revision if revision is None else revision,
        "tenant_id": schedule.tenant_id,
        "principal_id": schedule.principal_id,
        "actor": actor,
        "occurred_at": format_instant(at),
        **extra,
    }
    return ScheduleEvent(
        id=event_id,
        event_type=event_type,
        tenant_id=schedule.tenant_id,
        principal_id=schedule.principal_id,
        actor=actor,
        schedule_id=schedule.id,
        occurred_at=at,
        payload=payload,
    )


def state_event(
    event_id: UUID,
    event_type: ScheduleEventType,
    *,
    before: Schedule | None,
    after: Schedule,
    actor: str,
    at: datetime,
) -> ScheduleEvent:
    """A lifecycle event for the change ``before`` -> ``after`` (``before`` None: create)."""
    if event_type not in STATE_EVENTS:
        raise ValueError(f"{event_type} is not a lifecycle state event")
    extra: dict[str, Any] = {
        "previous_state": _state(None if before is None else before.state),
        "next_state": after.state.value,
    }
    if event_type in (_E.PAUSED, _E.RESUMED):
        extra["previous_next_fire_at"] = _instant(None if before is None else before.next_fire_at)
        extra["next_fire_at"] = _instant(after.next_fire_at)
    return _event(event_id, event_type, after, actor, at, extra)


def next_fire_repaired(
    event_id: UUID,
    schedule: Schedule,
    *,
    previous: datetime | None,
    repaired: datetime | None,
    actor: str,
    at: datetime,
) -> ScheduleEvent:
    """The audit record a cache repair emits before it replaces ``next_fire_at``."""
    extra = {"previous_next_fire_at": _instant(previous), "next_fire_at": _instant(repaired)}
    return _event(event_id, _E.NEXT_FIRE_REPAIRED, schedule, actor, at, extra)


_OCCURRENCE_TYPES = {
    "MATERIALIZED": _E.OCCURRENCE_MATERIALIZED,
    "MISSED": _E.OCCURRENCE_MISSED,
    "SKIPPED_OVERLAP": _E.OCCURRENCE_SKIPPED_OVERLAP,
    "AUTHORIZATION_FAILED": _E.OCCURRENCE_AUTHORIZATION_FAILED,
    "CONFIGURATION_FAILED": _E.OCCURRENCE_CONFIGURATION_FAILED,
}


def occurrence_event(
    event_id: UUID,
    schedule: Schedule,
    *,
    occurrence_id: UUID,
    revision: int,
    disposition: str,
    nominal_fire_at: datetime,
    actor: str,
    at: datetime,
    session_id: UUID | None = None,
    run_id: UUID | None = None,
    reason_code: str | None = None,
) -> ScheduleEvent:
    """The event of one decided occurrence (``disposition`` is an OccurrenceDisposition)."""
    event_type = _OCCURRENCE_TYPES[str(disposition)]
    extra: dict[str, Any] = {
        "occurrence_id": str(occurrence_id),
        "nominal_fire_at": format_instant(nominal_fire_at),
    }
    if event_type is _E.OCCURRENCE_MATERIALIZED:
        extra["session_id"] = None if session_id is None else str(session_id)
        extra["run_id"] = None if run_id is None else str(run_id)
    else:
        extra["reason_code"] = reason_code
    return _event(event_id, event_type, schedule, actor, at, extra, revision=revision)


def misfires_coalesced(
    event_id: UUID,
    schedule: Schedule,
    *,
    revision: int,
    first_nominal_at: datetime,
    last_nominal_at: datetime,
    count: int,
    actor: str,
    at: datetime,
) -> ScheduleEvent:
    """The one bounded record of older due instants folded into a scan's decision."""
    extra = {
        "first_nominal_at": format_instant(first_nominal_at),
        "last_nominal_at": format_instant(last_nominal_at),
        "count": count,
    }
    return _event(event_id, _E.MISFIRES_COALESCED, schedule, actor, at, extra, revision=revision)
