"""The occurrence ledger row: what the scheduler decided for one nominal instant.

Nullable-field rules per disposition (spec "Occurrence"):

* MATERIALIZED, linked: session_id, run_id, materialized_at, authority_version set;
  links_erased_at null; reason_code null.
* MATERIALIZED, erased (after governed session erasure): session_id and run_id null,
  links_erased_at set; materialized_at and authority_version remain. Any mix of the two
  forms (one link erased, the other not) is a partial erasure and is rejected.
* every other disposition: session_id, run_id, links_erased_at and materialized_at null
  (nothing was materialized) and a stable ``schedule.*`` reason_code required;
  authority_version optional (the version resolved when the decision was made).

An occurrence is never early: materialized_at is never before nominal_fire_at.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Self
from uuid import UUID

from pydantic import Field, field_validator, model_validator

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.value_model import DomainModel, aware_utc, field_codes

field_codes("occurrence")
LINKS_REQUIRED = reason(
    "schedule.occurrence.links_required",
    "A MATERIALIZED occurrence lacks its session, run, materialized_at or authority version",
)
PARTIAL_ERASURE = reason(
    "schedule.occurrence.partial_erasure",
    "A MATERIALIZED occurrence's links are neither all present nor all erased",
)
LINKS_FORBIDDEN = reason(
    "schedule.occurrence.links_forbidden",
    "A non-MATERIALIZED occurrence carries a session, run, erasure or materialization",
)
REASON_REQUIRED = reason(
    "schedule.occurrence.reason_required",
    "A non-MATERIALIZED occurrence lacks a stable schedule.* reason code",
)
REASON_FORBIDDEN = reason(
    "schedule.occurrence.reason_forbidden", "A MATERIALIZED occurrence carries a reason code"
)
EARLY = reason(
    "schedule.occurrence.early", "materialized_at precedes the occurrence's nominal instant"
)
INVALID_REVISION = reason("schedule.occurrence.invalid_revision", "schedule_revision is below 1")

_REASON_CODE = re.compile(r"^schedule(\.[a-z0-9_]+)+$")


class OccurrenceDisposition(StrEnum):
    MATERIALIZED = "MATERIALIZED"
    MISSED = "MISSED"
    SKIPPED_OVERLAP = "SKIPPED_OVERLAP"
    AUTHORIZATION_FAILED = "AUTHORIZATION_FAILED"
    CONFIGURATION_FAILED = "CONFIGURATION_FAILED"


class ScheduleOccurrence(DomainModel):
    """One decided nominal instant of a schedule; unique per (schedule_id, nominal_fire_at)."""

    _area = "occurrence"

    id: UUID
    schedule_id: UUID
    schedule_revision: Annotated[int, Field(strict=True)]
    nominal_fire_at: datetime
    disposition: OccurrenceDisposition
    session_id: UUID | None
    run_id: UUID | None
    reason_code: str | None
    authority_version: str | None
    materialized_at: datetime | None
    links_erased_at: datetime | None
    created_at: datetime

    @field_validator("nominal_fire_at", "materialized_at", "links_erased_at", "created_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else aware_utc(value, field="occurrence instant")

    @model_validator(mode="after")
    def _disposition_rules(self) -> Self:
        if self.schedule_revision < 1:
            raise ValidationError(INVALID_REVISION, "schedule_revision must be >= 1")
        if self.disposition is OccurrenceDisposition.MATERIALIZED:
            self._check_materialized()
        else:
            self._check_decided_without_run()
        return self

    def _check_materialized(self) -> None:
        if self.reason_code is not None:
            raise ValidationError(REASON_FORBIDDEN, "a materialized occurrence has no reason")
        if self.materialized_at is None or not self.authority_version:
            raise ValidationError(LINKS_REQUIRED, "materialized_at and authority_version required")
        if self.materialized_at < self.nominal_fire_at:
            raise ValidationError(EARLY, "an occurrence never materializes before its instant")
        linked = self.session_id is not None and self.run_id is not None
        erased = self.session_id is None and self.run_id is None
        if linked and self.links_erased_at is None:
            return
        if erased and self.links_erased_at is not None:
            return
        if erased and self.links_erased_at is None:
            raise ValidationError(LINKS_REQUIRED, "a materialized occurrence needs its links")
        raise ValidationError(PARTIAL_ERASURE, "links must be all present or all erased")

    def _check_decided_without_run(self) -> None:
        if (
            self.session_id is not None
            or self.run_id is not None
            or self.links_erased_at is not None
            or self.materialized_at is not None
        ):
            raise ValidationError(
                LINKS_FORBIDDEN,
                f"a {self.disposition} occurrence has no session, run or materialization",
            )
        if self.reason_code is None or not _REASON_CODE.match(self.reason_code):
            raise ValidationError(REASON_REQUIRED, "a stable schedule.* reason code is required")

    @property
    def links_erased(self) -> bool:
        return self.links_erased_at is not None
