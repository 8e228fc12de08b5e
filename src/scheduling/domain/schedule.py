"""Schedule: the mutable control record (spec "Domain model" / "State transitions")."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Self
from uuid import UUID

from pydantic import Field, StrictInt, field_validator, model_validator

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.value_model import DomainModel, aware_utc, field_codes

_, _, INVALID_FIELD = field_codes("schedule")
PAUSE_REASON_REQUIRED = reason(
    "schedule.state.pause_reason_required",
    "A PAUSED schedule needs pause_reason user or failure_limit",
)
PAUSE_REASON_FORBIDDEN = reason(
    "schedule.state.pause_reason_forbidden", "pause_reason is set on a schedule that is not PAUSED"
)
NEXT_FIRE_FORBIDDEN = reason(
    "schedule.state.next_fire_forbidden", "Only an ACTIVE schedule may have a next_fire_at"
)
INVALID_COUNTER = reason(
    "schedule.state.invalid_counter", "current_revision < 1 or consecutive_failures < 0"
)
UPDATED_BEFORE_CREATED = reason(
    "schedule.state.updated_before_created", "updated_at precedes created_at"
)
EMPTY_IDENTITY = reason("schedule.state.empty_identity", "tenant_id or principal_id is empty")


class ScheduleState(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset({ScheduleState.COMPLETED, ScheduleState.CANCELLED})


class PauseReason(StrEnum):
    USER = "user"
    FAILURE_LIMIT = "failure_limit"


class Schedule(DomainModel):
    """The control record. Invariants: ``pause_reason`` exactly when PAUSED; only an
    ACTIVE schedule carries ``next_fire_at`` (paused time never backfills, terminal
    states never fire); all instants are aware UTC."""

    _area = "schedule"

    id: UUID
    tenant_id: Annotated[str, Field(strict=True)]
    principal_id: Annotated[str, Field(strict=True)]
    state: ScheduleState
    pause_reason: PauseReason | None
    current_revision: StrictInt
    next_fire_at: datetime | None
    consecutive_failures: StrictInt
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(
        cls,
        *,
        id: UUID,
        tenant_id: str,
        principal_id: str,
        state: str,
        pause_reason: str | None,
        current_revision: int,
        next_fire_at: datetime | None,
        consecutive_failures: int,
        created_at: datetime,
        updated_at: datetime,
    ) -> Schedule:
        """A schedule from a row our own SELECT read back (the materializer's lock row,
        ADR 2341): the column types already hold (uuid, text, integer, timestamptz), so
        pydantic's field validation is skipped, but the enums are parsed, the instants
        must be aware and the state invariants run, so a row broken behind our back
        still fails with the same code. Anything from outside goes through the
        validating constructor."""
        try:
            parsed = ScheduleState(state)
            reason_ = None if pause_reason is None else PauseReason(pause_reason)
        except ValueError:
            raise ValidationError(
                INVALID_FIELD, "Schedule.state: enum", {"model": "Schedule", "error_type": "enum"}
            ) from None
        built = cls.model_construct(
            id=id,
            tenant_id=tenant_id,
            principal_id=principal_id,
            state=parsed,
            pause_reason=reason_,
            current_revision=current_revision,
            next_fire_at=None
            if next_fire_at is None
            else aware_utc(next_fire_at, field="schedule instant"),
            consecutive_failures=consecutive_failures,
            created_at=aware_utc(created_at, field="schedule instant"),
            updated_at=aware_utc(updated_at, field="schedule instant"),
        )
        return cls._check(built)

    @field_validator("next_fire_at", "created_at", "updated_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else aware_utc(value, field="schedule instant")

    @model_validator(mode="after")
    def _invariants(self) -> Self:
        return self._check()

    def _check(self) -> Self:
        if not self.tenant_id.strip() or not self.principal_id.strip():
            raise ValidationError(EMPTY_IDENTITY, "tenant_id and principal_id are required")
        if self.state is ScheduleState.PAUSED and self.pause_reason is None:
            raise ValidationError(PAUSE_REASON_REQUIRED, "a PAUSED schedule needs a pause_reason")
        if self.state is not ScheduleState.PAUSED and self.pause_reason is not None:
            raise ValidationError(PAUSE_REASON_FORBIDDEN, "only a PAUSED schedule has a reason")
        if self.state is not ScheduleState.ACTIVE and self.next_fire_at is not None:
            raise ValidationError(NEXT_FIRE_FORBIDDEN, f"a {self.state} schedule never fires")
        if self.current_revision < 1 or self.consecutive_failures < 0:
            raise ValidationError(INVALID_COUNTER, "revision >= 1 and failures >= 0 required")
        if self.updated_at < self.created_at:
            raise ValidationError(UPDATED_BEFORE_CREATED, "updated_at precedes created_at")
        return self
