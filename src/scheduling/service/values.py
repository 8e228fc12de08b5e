"""Inputs and results of the schedule service.

Inputs are plain values; everything untrusted in them (cadence payload, limits,
scopes, text) is validated by ``scheduling.service.validation`` before any write.
Results carry domain values; only ``ScheduleDetail`` carries the full instruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from scheduling.domain.errors import ValidationError
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.repositories import ScheduleListing

PATCH_EMPTY = reason(
    "schedule.patch.empty", "A patch supplies none of title, instruction, at or cadence"
)
PATCH_AT_AND_CADENCE = reason(
    "schedule.patch.at_and_cadence", "A patch supplies both at and cadence (mutually exclusive)"
)

PREVIEW_CHARS = 120
"""``instruction_preview`` is at most this many characters (plus an ellipsis)."""


@dataclass(frozen=True)
class ScheduleDefinition:
    """A complete schedule definition as a caller supplies it (create and full update).

    ``agent_version=None`` pins the agent's active version at validation time and
    ``policy_profile=None`` takes that version's profile; when given, both must match
    an existing AgentSpec exactly. ``limits`` may be a ``RunLimits`` or its JSON form.
    """

    title: str
    instruction: str
    cadence: Mapping[str, Any]
    agent_id: UUID
    requested_scopes: frozenset[str]
    limits: RunLimits | Mapping[str, Any]
    run_timeout_seconds: int
    misfire_grace_seconds: int
    max_consecutive_failures: int
    agent_version: str | None = None
    policy_profile: str | None = None
    browser_profile_id: UUID | None = None


@dataclass(frozen=True)
class SchedulePatch:
    """The closed conversational patch: title, instruction, and at most one of
    ``at`` (a one-time instant, RFC 3339 text or aware datetime) or ``cadence``."""

    title: str | None = None
    instruction: str | None = None
    at: str | datetime | None = None
    cadence: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.at is not None and self.cadence is not None:
            raise ValidationError(PATCH_AT_AND_CADENCE, "supply at or cadence, not both")
        fields = (self.title, self.instruction, self.at, self.cadence)
        if all(value is None for value in fields):
            raise ValidationError(PATCH_EMPTY, "a patch needs at least one field")

    def as_json(self) -> dict[str, Any]:
        """The explicit fields only (omitted fields stay unchanged), for hashing."""
        out: dict[str, Any] = {}
        if self.title is not None:
            out["title"] = self.title
        if self.instruction is not None:
            out["instruction"] = self.instruction
        if self.at is not None:
            out["at"] = self.at if isinstance(self.at, str) else self.at.isoformat()
        if self.cadence is not None:
            out["cadence"] = dict(self.cadence)
        return out


@dataclass(frozen=True)
class ScheduleResult:
    """The outcome of a lifecycle command.

    ``replayed``: an idempotency key matched an earlier identical request.
    ``changed``: this call wrote a transition or revision (False for idempotent
    repeats and unchanged patches).
    """

    schedule: Schedule
    replayed: bool = False
    changed: bool = True
    # The current revision when the command already holds it (a create's own), so the
    # response needs no read of it; ``None``: read it (``ScheduleViews.after_write``).
    revision: ScheduleRevision | None = None


@dataclass(frozen=True)
class ScheduleDetail:
    """The authorized point read: the control record and its complete current revision."""

    schedule: Schedule
    revision: ScheduleRevision


class ScheduleSummary(NamedTuple):
    """One list row: metadata and a bounded preview, never the full instruction.

    A tuple, not a frozen dataclass: a page builds fifty, and a frozen dataclass's
    ``__init__`` sets each of its ten fields through ``object.__setattr__`` (2.5 us a
    row with the preview, against about 1 as a tuple; ADR 2650). Immutable either way.
    The field order is the response's (``encoding.SummaryRow``)."""

    schedule_id: UUID
    title: str
    state: str
    pause_reason: str | None
    current_revision: int
    next_fire_at: datetime | None
    cadence: dict[str, object]
    instruction_preview: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, schedule: Schedule, revision: ScheduleRevision) -> ScheduleSummary:
        return cls(
            schedule_id=schedule.id,
            title=revision.title,
            state=schedule.state.value,
            pause_reason=None if schedule.pause_reason is None else schedule.pause_reason.value,
            current_revision=schedule.current_revision,
            next_fire_at=schedule.next_fire_at,
            cadence=dict(revision.cadence),
            instruction_preview=preview(revision.instruction),
            created_at=schedule.created_at,
            updated_at=schedule.updated_at,
        )

    @classmethod
    def listed(cls, row: ScheduleListing) -> ScheduleSummary:
        """The summary of a list row read from its stored fields (no schedule or
        revision built; ADR 2420). Built as the tuple it is (``tuple.__new__``, what
        ``_make`` does without its length check: a page builds fifty), in the field
        order above."""
        return tuple.__new__(
            cls,
            (
                row.id,
                row.title,
                row.state,
                row.pause_reason,
                row.current_revision,
                row.next_fire_at,
                row.cadence,
                preview(row.instruction),
                row.created_at,
                row.updated_at,
            ),
        )


PREVIEW_HEAD = 4
"""``preview`` flattens the first ``PREVIEW_HEAD * limit`` characters, not the whole
instruction (up to 20,000 characters, fifty to a page), unless they flatten too short."""


def preview(instruction: str, limit: int = PREVIEW_CHARS) -> str:
    """A bounded single-line preview of ``instruction``: its whitespace runs made single
    spaces, cut to ``limit`` characters with an ellipsis when longer."""
    head = PREVIEW_HEAD * limit
    if len(instruction) > head:
        # Flattening a prefix gives a prefix of the flattened whole (a cut inside a word
        # or a whitespace run shortens only the last piece), so once the prefix flattens
        # longer than ``limit`` the whole would too, with the same first characters.
        flat = " ".join(instruction[:head].split())
        if len(flat) > limit:
            return flat[: limit - 1].rstrip() + "\u2026"
    flat = " ".join(instruction.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


@dataclass(frozen=True)
class RunView:
    """The linked run's public facts (progress and outcome are read, never copied)."""

    run_id: UUID
    session_id: UUID
    status: str
    scheduled_for: datetime
    deadline_at: datetime | None
    finished_at: datetime | None
    failure: dict[str, Any] | None


@dataclass(frozen=True)
class OccurrenceView:
    """One occurrence row with its run's view where linked and visible."""

    occurrence: ScheduleOccurrence
    run: RunView | None
