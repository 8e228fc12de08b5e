"""Request and response bodies of the HTTP edge, separate from the domain models.

Every request model is closed (``extra="forbid"``). The cadence is a JSON object the
domain parses itself, so each calendar-value defect keeps its own ``schedule.cadence.*``
code; everything else is typed here and re-validated by the service. Responses never
carry a credential; only ``ScheduleDetailOut`` carries the complete instruction.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.domain.text import check_depth
from scheduling.http import schemas
from scheduling.ports.records import SessionEvent
from scheduling.service.values import (
    OccurrenceView,
    RunView,
    ScheduleDefinition,
    ScheduleSummary,
)


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def integral(value: Any) -> Any:
    """``1.0`` is the integer 1 (JSON Schema's ``integer`` includes it); any other float,
    a string or a boolean stays as it is for the strict check to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [integral(item) for item in value]
    if isinstance(value, dict):
        return {key: integral(item) for key, item in value.items()}
    return value


def _int32(value: int) -> int:
    if value > schemas.INT32_MAX:
        raise ValueError("above the largest stored integer")
    return value


def _at_least_one(value: int) -> int:
    if value < 1:
        raise ValueError("must be at least 1")
    return value


Integer = Annotated[
    int,
    BeforeValidator(integral),
    Field(strict=True, json_schema_extra={"maximum": schemas.INT32_MAX}),
    AfterValidator(_int32),
]
"""A strict integer (no string, no bool, no 2.5; ``1.0`` is 1) up to PostgreSQL's
``integer`` maximum, which the edge enforces and the document declares."""
Revision = Annotated[
    Integer, Field(json_schema_extra={"minimum": 1}), AfterValidator(_at_least_one)
]


def _positive(minimum: int = 1) -> Any:
    # The minimum is the domain's own rule (its code, e.g. schedule.limits.non_positive_bound);
    # the document states it, the edge does not pre-empt it.
    return Field(json_schema_extra={"minimum": minimum})


def _decimal_text(value: Any, pattern: str) -> Any:
    if isinstance(value, str) and not re.fullmatch(pattern, value):
        raise ValueError("not a decimal amount")
    return value


class StateParam(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


class LimitsBody(Closed):
    max_steps: Annotated[Integer, _positive()]
    max_model_calls: Annotated[Integer, _positive()]
    max_tool_calls: Annotated[Integer, _positive()]
    max_cost: Decimal | str = Field(json_schema_extra=schemas.money(positive=True))
    reserve_steps: Annotated[Integer, _positive(0)] = 0
    reserve_model_calls: Annotated[Integer, _positive(0)] = 0
    reserve_cost: Decimal | str = Field(
        default="0", json_schema_extra=schemas.money(positive=False)
    )

    @field_validator("max_cost", mode="before")
    @classmethod
    def _max_cost(cls, value: Any) -> Any:
        return _decimal_text(value, schemas.POSITIVE_DECIMAL)

    @field_validator("reserve_cost", mode="before")
    @classmethod
    def _reserve_cost(cls, value: Any) -> Any:
        return _decimal_text(value, schemas.DECIMAL)


class DefinitionBody(Closed):
    """A complete definition (create, and the full-definition PATCH)."""

    title: str = Field(json_schema_extra=schemas.TITLE)
    instruction: str = Field(json_schema_extra=schemas.INSTRUCTION)
    cadence: Any = Field(json_schema_extra=schemas.CADENCE)
    agent_id: UUID
    agent_version: str | None = Field(
        default=None, json_schema_extra={"anyOf": [schemas.NAME, {"type": "null"}]}
    )
    policy_profile: str | None = Field(
        default=None, json_schema_extra={"anyOf": [schemas.NAME, {"type": "null"}]}
    )
    requested_scopes: list[str] = Field(
        default_factory=list, max_length=32, json_schema_extra={"items": schemas.SCOPE_ITEM}
    )
    browser_profile_id: UUID | None = None
    limits: LimitsBody
    run_timeout_seconds: Annotated[Integer, _positive()]
    misfire_grace_seconds: Annotated[Integer, _positive()]
    max_consecutive_failures: Annotated[Integer, _positive()]

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        # The body's nesting is bounded before ``integral`` (or anything after it)
        # recurses into the free-form cadence, as a tool call's arguments are; the
        # domain's error passes through pydantic unchanged.
        return check_depth("body", data)

    @field_validator("cadence", mode="before")
    @classmethod
    def _cadence(cls, value: Any) -> Any:
        return integral(value)

    def to_definition(self) -> ScheduleDefinition:
        limits = self.limits.model_dump()
        limits["max_cost"] = str(limits["max_cost"])
        limits["reserve_cost"] = str(limits["reserve_cost"])
        return ScheduleDefinition(
            title=self.title,
            instruction=self.instruction,
            cadence=self.cadence,
            agent_id=self.agent_id,
            agent_version=self.agent_version,
            policy_profile=self.policy_profile,
            requested_scopes=frozenset(self.requested_scopes),
            browser_profile_id=self.browser_profile_id,
            limits=limits,
            run_timeout_seconds=self.run_timeout_seconds,
            misfire_grace_seconds=self.misfire_grace_seconds,
            max_consecutive_failures=self.max_consecutive_failures,
        )


class CreateScheduleBody(DefinitionBody):
    pass


class UpdateScheduleBody(DefinitionBody):
    """The full-definition update: the complete next definition plus the revision read."""

    expected_revision: Revision


class RevisionGuard(Closed):
    expected_revision: Revision


# ------------------------------------------------------------------ responses


class Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class LimitsOut(Out):
    max_steps: int
    max_model_calls: int
    max_tool_calls: int
    max_cost: str
    reserve_steps: int
    reserve_model_calls: int
    reserve_cost: str


class ScheduleOut(Out):
    """A schedule's control record with its current title and canonical cadence."""

    id: UUID
    state: str
    pause_reason: str | None
    current_revision: int
    next_fire_at: datetime | None
    consecutive_failures: int
    title: str
    cadence: dict[str, Any]
    timezone: str | None
    created_at: datetime
    updated_at: datetime
    replayed: bool = False

    @classmethod
    def of(
        cls, schedule: Schedule, revision: ScheduleRevision, *, replayed: bool = False
    ) -> ScheduleOut:
        return cls(**_schedule_fields(schedule, revision), replayed=replayed)


def _schedule_fields(schedule: Schedule, revision: ScheduleRevision) -> dict[str, Any]:
    """The schedule body's fields, shared by the mutation answer and the point read."""
    return dict(
        id=schedule.id,
        state=schedule.state.value,
        pause_reason=None if schedule.pause_reason is None else schedule.pause_reason.value,
        current_revision=schedule.current_revision,
        next_fire_at=schedule.next_fire_at,
        consecutive_failures=schedule.consecutive_failures,
        title=revision.title,
        cadence=dict(revision.cadence),
        timezone=revision.timezone,
        created_at=schedule.created_at,
        updated_at=schedule.updated_at,
    )


class RevisionOut(Out):
    """The complete current revision (point read only: it holds the instruction)."""

    schedule_id: UUID
    revision: int
    title: str
    instruction: str
    agent_id: UUID
    agent_version: str
    policy_profile: str
    requested_scopes: list[str]
    browser_profile_id: UUID | None
    limits: LimitsOut
    run_timeout_seconds: int
    cadence: dict[str, Any]
    timezone: str | None
    misfire_grace_seconds: int
    max_consecutive_failures: int
    created_by_principal_id: str
    created_at: datetime

    @classmethod
    def of(cls, revision: ScheduleRevision) -> RevisionOut:
        return cls(
            schedule_id=revision.schedule_id,
            revision=revision.revision,
            title=revision.title,
            instruction=revision.instruction,
            agent_id=revision.agent_id,
            agent_version=revision.agent_version,
            policy_profile=revision.policy_profile,
            requested_scopes=sorted(revision.requested_scopes),
            browser_profile_id=revision.browser_profile_id,
            limits=LimitsOut(**revision.limits.to_json()),
            run_timeout_seconds=revision.run_timeout_seconds,
            cadence=dict(revision.cadence),
            timezone=revision.timezone,
            misfire_grace_seconds=revision.misfire_grace_seconds,
            max_consecutive_failures=revision.max_consecutive_failures,
            created_by_principal_id=revision.created_by_principal_id,
            created_at=revision.created_at,
        )


class ScheduleDetailOut(ScheduleOut):
    revision: RevisionOut

    @classmethod
    def of_read(cls, schedule: Schedule, revision: ScheduleRevision) -> ScheduleDetailOut:
        """The point read's body, built once (not a ``ScheduleOut`` dumped and re-read)."""
        return cls(**_schedule_fields(schedule, revision), revision=RevisionOut.of(revision))


class ScheduleSummaryOut(Out):
    """One list row: metadata and a bounded preview, never the full instruction."""

    id: UUID
    title: str
    state: str
    pause_reason: str | None
    current_revision: int
    next_fire_at: datetime | None
    cadence: dict[str, Any]
    instruction_preview: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, summary: ScheduleSummary) -> ScheduleSummaryOut:
        return cls(
            id=summary.schedule_id,
            title=summary.title,
            state=summary.state,
            pause_reason=summary.pause_reason,
            current_revision=summary.current_revision,
            next_fire_at=summary.next_fire_at,
            cadence=summary.cadence,
            instruction_preview=summary.instruction_preview,
            created_at=summary.created_at,
            updated_at=summary.updated_at,
        )


class SchedulePage(Out):
    items: list[ScheduleSummaryOut]
    next_cursor: str | None


class RunOut(Out):
    id: UUID
    session_id: UUID
    status: str
    scheduled_for: datetime
    deadline_at: datetime | None
    finished_at: datetime | None
    failure: dict[str, Any] | None

    @classmethod
    def of(cls, run: RunView) -> RunOut:
        return cls(
            id=run.run_id,
            session_id=run.session_id,
            status=run.status,
            scheduled_for=run.scheduled_for,
            deadline_at=run.deadline_at,
            finished_at=run.finished_at,
            failure=run.failure,
        )


class OccurrenceOut(Out):
    id: UUID
    schedule_id: UUID
    schedule_revision: int
    nominal_fire_at: datetime
    disposition: str
    session_id: UUID | None
    run_id: UUID | None
    reason_code: str | None
    materialized_at: datetime | None
    links_erased_at: datetime | None
    created_at: datetime
    run: RunOut | None

    @classmethod
    def of(cls, view: OccurrenceView) -> OccurrenceOut:
        o = view.occurrence
        return cls(
            id=o.id,
            schedule_id=o.schedule_id,
            schedule_revision=o.schedule_revision,
            nominal_fire_at=o.nominal_fire_at,
            disposition=o.disposition.value,
            session_id=o.session_id,
            run_id=o.run_id,
            reason_code=o.reason_code,
            materialized_at=o.materialized_at,
            links_erased_at=o.links_erased_at,
            created_at=o.created_at,
            run=None if view.run is None else RunOut.of(view.run),
        )


class OccurrencePage(Out):
    items: list[OccurrenceOut]
    next_cursor: str | None


class TranscriptEventOut(Out):
    seq: int
    event_type: str
    actor: str
    payload: dict[str, Any]
    occurred_at: datetime
    run_id: UUID | None

    @classmethod
    def of(cls, event: SessionEvent) -> TranscriptEventOut:
        return cls(
            seq=event.seq,
            event_type=event.event_type,
            actor=event.actor,
            payload=dict(event.payload),
            occurred_at=event.occurred_at,
            run_id=event.run_id,
        )


class TranscriptOut(Out):
    session_id: UUID
    events: list[TranscriptEventOut]


class ErasureOut(Out):
    session_id: UUID
    occurrences_marked: int
    runs_deleted: int
    events_deleted: int


class ErrorBody(Out):
    code: str = Field(pattern=r"^schedule(\.[a-z0-9_]+)+$")
    message: str
    details: dict[str, Any]


class ErrorEnvelope(Out):
    error: ErrorBody


class Health(Out):
    status: str


class Readiness(Out):
    status: str
