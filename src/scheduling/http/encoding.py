"""Response bodies encoded straight to JSON bytes for the hot routes (ADR 2400).

A route returning a model under ``response_model=`` pays three passes: the model's
validation where the handler builds it (every field of every row), FastAPI's
validation of the returned value against the response field, then the dump. These
encoders take one: plain dicts in the exact field order of the response models in
``models.py``, dumped by a ``TypeAdapter`` over a ``TypedDict`` of the same fields, so
UUIDs, datetimes (``...Z``) and nested objects come out byte-identical to what FastAPI
rendered from the model (tests/http/test_response_encoding.py compares the bytes, and the
key order, with the models'). The decorators keep ``response_model=``, so the OpenAPI
document is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter
from starlette.responses import Response
from typing_extensions import TypedDict

from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.service.values import OccurrenceView, RunView, ScheduleSummary


class SummaryRow(TypedDict):
    """``models.ScheduleSummaryOut``'s fields, in its order. ``id`` as its text: a list
    row's id is asyncpg's ``UUID`` subclass, which pydantic-core serializes through a
    slow path (about 1 us a row, against 0.1 for the text asyncpg's ``str`` gives;
    ADR 2650); the text is the same canonical form."""

    id: str
    title: str
    state: str
    pause_reason: str | None
    current_revision: int
    next_fire_at: datetime | None
    cadence: dict[str, Any]
    instruction_preview: str
    created_at: datetime
    updated_at: datetime


class SchedulePageBody(TypedDict):
    items: list[SummaryRow]
    next_cursor: str | None


class LimitsBody(TypedDict):
    max_steps: int
    max_model_calls: int
    max_tool_calls: int
    max_cost: str
    reserve_steps: int
    reserve_model_calls: int
    reserve_cost: str


class ScheduleBody(TypedDict):
    """``models.ScheduleOut``'s fields, in its order."""

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
    replayed: bool


class RevisionBody(TypedDict):
    """``models.RevisionOut``'s fields, in its order."""

    schedule_id: UUID
    revision: int
    title: str
    instruction: str
    agent_id: UUID
    agent_version: str
    policy_profile: str
    requested_scopes: list[str]
    browser_profile_id: UUID | None
    limits: LimitsBody
    run_timeout_seconds: int
    cadence: dict[str, Any]
    timezone: str | None
    misfire_grace_seconds: int
    max_consecutive_failures: int
    created_by_principal_id: str
    created_at: datetime


class ScheduleDetailBody(ScheduleBody):
    """``models.ScheduleDetailOut``: the schedule's fields, then ``revision``."""

    revision: RevisionBody


class RunBody(TypedDict):
    id: UUID
    session_id: UUID
    status: str
    scheduled_for: datetime
    deadline_at: datetime | None
    finished_at: datetime | None
    failure: dict[str, Any] | None


class OccurrenceRow(TypedDict):
    """``models.OccurrenceOut``'s fields, in its order."""

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
    run: RunBody | None


class OccurrencePageBody(TypedDict):
    items: list[OccurrenceRow]
    next_cursor: str | None


SCHEDULE_PAGE = TypeAdapter(SchedulePageBody)
SCHEDULE = TypeAdapter(ScheduleBody)
SCHEDULE_DETAIL = TypeAdapter(ScheduleDetailBody)
OCCURRENCE_PAGE = TypeAdapter(OccurrencePageBody)


def json_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """The bytes as ``application/json``: the headers FastAPI's ``JSONResponse`` sends."""
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def summary_row(s: ScheduleSummary) -> SummaryRow:
    return {
        "id": str(s.schedule_id),
        "title": s.title,
        "state": s.state,
        "pause_reason": s.pause_reason,
        "current_revision": s.current_revision,
        "next_fire_at": s.next_fire_at,
        "cadence": s.cadence,
        "instruction_preview": s.instruction_preview,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


def schedule_page(items: Iterable[ScheduleSummary], next_cursor: str | None) -> bytes:
    return SCHEDULE_PAGE.dump_json(
        {"items": [summary_row(s) for s in items], "next_cursor": next_cursor}
    )


def _schedule_fields(
    schedule: Schedule, revision: ScheduleRevision, replayed: bool
) -> ScheduleBody:
    pause = schedule.pause_reason
    return {
        "id": schedule.id,
        "state": schedule.state.value,
        "pause_reason": None if pause is None else pause.value,
        "current_revision": schedule.current_revision,
        "next_fire_at": schedule.next_fire_at,
        "consecutive_failures": schedule.consecutive_failures,
        "title": revision.title,
        "cadence": dict(revision.cadence),
        "timezone": revision.timezone,
        "created_at": schedule.created_at,
        "updated_at": schedule.updated_at,
        "replayed": replayed,
    }


def schedule_body(
    schedule: Schedule, revision: ScheduleRevision, *, replayed: bool = False
) -> bytes:
    return SCHEDULE.dump_json(_schedule_fields(schedule, revision, replayed))


def _limits(limits: dict[str, Any]) -> LimitsBody:
    # The order of LimitsOut, whatever order to_json() keeps.
    return {
        "max_steps": limits["max_steps"],
        "max_model_calls": limits["max_model_calls"],
        "max_tool_calls": limits["max_tool_calls"],
        "max_cost": limits["max_cost"],
        "reserve_steps": limits["reserve_steps"],
        "reserve_model_calls": limits["reserve_model_calls"],
        "reserve_cost": limits["reserve_cost"],
    }


def schedule_detail(schedule: Schedule, revision: ScheduleRevision) -> bytes:
    revision_body: RevisionBody = {
        "schedule_id": revision.schedule_id,
        "revision": revision.revision,
        "title": revision.title,
        "instruction": revision.instruction,
        "agent_id": revision.agent_id,
        "agent_version": revision.agent_version,
        "policy_profile": revision.policy_profile,
        "requested_scopes": sorted(revision.requested_scopes),
        "browser_profile_id": revision.browser_profile_id,
        "limits": _limits(revision.limits.to_json()),
        "run_timeout_seconds": revision.run_timeout_seconds,
        "cadence": dict(revision.cadence),
        "timezone": revision.timezone,
        "misfire_grace_seconds": revision.misfire_grace_seconds,
        "max_consecutive_failures": revision.max_consecutive_failures,
        "created_by_principal_id": revision.created_by_principal_id,
        "created_at": revision.created_at,
    }
    body = ScheduleDetailBody(**_schedule_fields(schedule, revision, False), revision=revision_body)
    return SCHEDULE_DETAIL.dump_json(body)


def _run(run: RunView) -> RunBody:
    return {
        "id": run.run_id,
        "session_id": run.session_id,
        "status": run.status,
        "scheduled_for": run.scheduled_for,
        "deadline_at": run.deadline_at,
        "finished_at": run.finished_at,
        "failure": run.failure,
    }


def occurrence_row(view: OccurrenceView) -> OccurrenceRow:
    o = view.occurrence
    return {
        "id": o.id,
        "schedule_id": o.schedule_id,
        "schedule_revision": o.schedule_revision,
        "nominal_fire_at": o.nominal_fire_at,
        "disposition": o.disposition.value,
        "session_id": o.session_id,
        "run_id": o.run_id,
        "reason_code": o.reason_code,
        "materialized_at": o.materialized_at,
        "links_erased_at": o.links_erased_at,
        "created_at": o.created_at,
        "run": None if view.run is None else _run(view.run),
    }


def occurrence_page(items: Iterable[OccurrenceView], next_cursor: str | None) -> bytes:
    return OCCURRENCE_PAGE.dump_json(
        {"items": [occurrence_row(v) for v in items], "next_cursor": next_cursor}
    )
