"""The routes: the spec's eight ``/v1/schedules`` operations and the ones they link to.

Every handler authenticates and checks its one exact scope first (the ``requires``
dependency, or ``guarded``, which also holds the unit of work the read or the create
runs in: ADR 2380, 2395), then calls the application service; the service re-checks
authority and validates everything. Handlers translate nothing but shapes.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Query, Request, Response

from scheduling.domain.errors import ValidationError
from scheduling.domain.idempotency import INVALID_IDEMPOTENCY_KEY
from scheduling.domain.identity import Principal
from scheduling.domain.schedule import ScheduleState
from scheduling.http import encoding, schemas
from scheduling.http.auth import Guarded, authority_of, guarded, plane_of, requires, scope_extra
from scheduling.http.models import (
    CreateScheduleBody,
    ErasureOut,
    ErrorEnvelope,
    OccurrencePage,
    RevisionGuard,
    RunOut,
    ScheduleDetailOut,
    ScheduleOut,
    SchedulePage,
    StateParam,
    TranscriptEventOut,
    TranscriptOut,
    UpdateScheduleBody,
)
from scheduling.service.cancellation import RUN_CANCEL_SCOPE
from scheduling.service.runs import RUN_READ_SCOPE
from scheduling.service.schedules import CANCEL, READ, WRITE
from scheduling.service.transcripts import SESSION_READ_SCOPE
from scheduling.service.values import ScheduleResult

PAGE_LIMIT_MAX = 100
PAGE_LIMIT_DEFAULT = 50
CURSOR_MAX = 512

_ERRORS = {"model": ErrorEnvelope}
_COMMON: dict[int | str, dict[str, Any]] = {
    401: {**_ERRORS, "description": "no valid bearer token"},
    403: {**_ERRORS, "description": "the caller lacks the route's exact scope, or is disabled"},
    413: {**_ERRORS, "description": "the body exceeds the byte limit"},
    415: {**_ERRORS, "description": "a request body that is not application/json"},
    422: {**_ERRORS, "description": "a field, parameter or value is invalid"},
    400: {**_ERRORS, "description": "malformed JSON, or a missing or invalid header"},
    500: {**_ERRORS, "description": "unexpected failure (no details)"},
    503: {**_ERRORS, "description": "the database or configuration cannot serve now"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {**_ERRORS, "description": "absent or not the caller's (identical bodies)"}
}
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        **_ERRORS,
        "description": "stale expected_revision (details.current_revision), illegal"
        " transition or reused idempotency key",
    }
}

router = APIRouter()

Limit = Annotated[int, Query(ge=1, le=PAGE_LIMIT_MAX, description="page size")]
ExpectedRevision = Annotated[
    int, Query(ge=1, le=schemas.INT32_MAX, description="the revision the caller read")
]
IDEMPOTENCY_KEY = {"pattern": schemas.IDEMPOTENCY_KEY_PATTERN}
Cursor = Annotated[str | None, Query(max_length=CURSOR_MAX, description="opaque cursor")]
# A schedule read: authorized and served in one unit of work, closed before the
# response starts (ADR 2380, 2620).
Reading = Annotated[Guarded, Depends(guarded(READ))]
# A create: authorized and written in one unit of work, which the write commits
# (ADR 2395).
Writing = Annotated[Guarded, Depends(guarded(WRITE, writes=True))]


def _route(scope: str | None, *extra: dict[int | str, dict[str, Any]]) -> dict[str, Any]:
    responses: dict[int | str, dict[str, Any]] = dict(_COMMON)
    for more in extra:
        responses.update(more)
    return {"responses": responses, "openapi_extra": scope_extra(scope)}


def header_text(value: str) -> str:
    """A header as the client's UTF-8 text: ASGI hands header bytes over as latin-1, so
    re-read them as UTF-8, any byte that is not (an encoded lone surrogate, a stray
    0xFF) becoming a lone surrogate that the service's text check refuses with
    ``schedule.text.invalid``, like the same character in a body."""
    if value.isascii():
        return value
    return value.encode("latin-1").decode("utf-8", "surrogateescape")


def idempotency_key_of(request: Request, value: str) -> str:
    """The request's one Idempotency-Key as text. Sent twice it is refused, whether the
    copies agree or not: which one a proxy or the framework would pick is not the
    client's decision to leave open, and a key the server chose is no key at all."""
    if len(request.headers.getlist("idempotency-key")) > 1:
        raise ValidationError(INVALID_IDEMPOTENCY_KEY, "send one Idempotency-Key header")
    return header_text(value)


async def _written(request: Request, principal: Principal, result: ScheduleResult) -> ScheduleOut:
    if result.revision is not None:  # the command holds it (a create): no read
        return ScheduleOut.of(result.schedule, result.revision, replayed=result.replayed)
    written = await plane_of(request).views.after_write(
        principal, result.schedule, replayed=result.replayed
    )
    return ScheduleOut.of(written.schedule, written.revision, replayed=written.replayed)


# ------------------------------------------------------------------ schedules


@router.post(
    "/v1/schedules",
    status_code=201,
    response_model=ScheduleOut,
    summary="Create a schedule (Idempotency-Key required)",
    **_route(WRITE, _CONFLICT, {200: {"model": ScheduleOut, "description": "replayed"}}),
)
async def create_schedule(
    request: Request,
    response: Response,
    body: CreateScheduleBody,
    writing: Writing,
    idempotency_key: Annotated[
        str, Header(alias="Idempotency-Key", max_length=200, json_schema_extra=IDEMPOTENCY_KEY)
    ],
) -> ScheduleOut | Response:
    key = idempotency_key_of(request, idempotency_key)
    result = await plane_of(request).service.create(
        writing.principal,
        key,
        body.to_definition(),
        authority=authority_of(request),
        within=writing.uow,
    )
    if result.revision is None:  # not held by the command: read it back
        written = await _written(request, writing.principal, result)
        if result.replayed:
            response.status_code = 200
            response.headers["Idempotent-Replayed"] = "true"
        return written
    # The body as bytes straight from the command's schedule and revision (ADR 2400).
    content = encoding.schedule_body(result.schedule, result.revision, replayed=result.replayed)
    if result.replayed:
        return encoding.json_response(content, 200, {"Idempotent-Replayed": "true"})
    return encoding.json_response(content, 201)


@router.get(
    "/v1/schedules",
    response_model=SchedulePage,
    summary="List the caller's schedules (bounded, opaque cursor, repeated state filter)",
    **_route(READ),
)
async def list_schedules(
    request: Request,
    reading: Reading,
    limit: Limit = PAGE_LIMIT_DEFAULT,
    cursor: Cursor = None,
    state: Annotated[list[StateParam] | None, Query(max_length=4)] = None,
) -> Response:
    states = frozenset(ScheduleState(s.value) for s in state) if state else None
    page = await plane_of(request).service.list(
        reading.principal, limit=limit, cursor=cursor, states=states, within=reading.uow
    )
    return encoding.json_response(encoding.schedule_page(page.items, page.next_cursor))


@router.get(
    "/v1/schedules/{schedule_id}",
    response_model=ScheduleDetailOut,
    summary="Point read: the only response with the complete instruction",
    **_route(READ, _NOT_FOUND),
)
async def get_schedule(
    request: Request,
    schedule_id: UUID,
    reading: Reading,
) -> Response:
    detail = await plane_of(request).service.get(reading.principal, schedule_id, within=reading.uow)
    return encoding.json_response(encoding.schedule_detail(detail.schedule, detail.revision))


@router.patch(
    "/v1/schedules/{schedule_id}",
    response_model=ScheduleOut,
    summary="Full-definition update: revision N+1 (ACTIVE or PAUSED)",
    **_route(WRITE, _NOT_FOUND, _CONFLICT),
)
async def update_schedule(
    request: Request,
    schedule_id: UUID,
    body: UpdateScheduleBody,
    principal: Annotated[Principal, Depends(requires(WRITE))],
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", max_length=200, json_schema_extra=IDEMPOTENCY_KEY),
    ] = None,
) -> ScheduleOut:
    result = await plane_of(request).service.update(
        principal,
        schedule_id,
        body.expected_revision,
        body.to_definition(),
        None if idempotency_key is None else idempotency_key_of(request, idempotency_key),
        authority=authority_of(request),
    )
    return await _written(request, principal, result)


@router.post(
    "/v1/schedules/{schedule_id}/pause",
    response_model=ScheduleOut,
    summary="Pause (idempotent when already paused)",
    **_route(WRITE, _NOT_FOUND, _CONFLICT),
)
async def pause_schedule(
    request: Request,
    schedule_id: UUID,
    body: RevisionGuard,
    principal: Annotated[Principal, Depends(requires(WRITE))],
) -> ScheduleOut:
    result = await plane_of(request).service.pause(principal, schedule_id, body.expected_revision)
    return await _written(request, principal, result)


@router.post(
    "/v1/schedules/{schedule_id}/resume",
    response_model=ScheduleOut,
    summary="Resume at the first instant strictly after now (no backfill)",
    **_route(WRITE, _NOT_FOUND, _CONFLICT),
)
async def resume_schedule(
    request: Request,
    schedule_id: UUID,
    body: RevisionGuard,
    principal: Annotated[Principal, Depends(requires(WRITE))],
) -> ScheduleOut:
    result = await plane_of(request).service.resume(principal, schedule_id, body.expected_revision)
    return await _written(request, principal, result)


@router.delete(
    "/v1/schedules/{schedule_id}",
    response_model=ScheduleOut,
    summary="Cancel (terminal; never cancels a materialized run)",
    **_route(CANCEL, _NOT_FOUND, _CONFLICT),
)
async def cancel_schedule(
    request: Request,
    schedule_id: UUID,
    principal: Annotated[Principal, Depends(requires(CANCEL))],
    expected_revision: ExpectedRevision,
) -> ScheduleOut:
    result = await plane_of(request).service.cancel(principal, schedule_id, expected_revision)
    return await _written(request, principal, result)


@router.get(
    "/v1/schedules/{schedule_id}/occurrences",
    response_model=OccurrencePage,
    summary="The offline inbox: occurrences newest first, each with its linked run",
    **_route(READ, _NOT_FOUND),
)
async def list_occurrences(
    request: Request,
    schedule_id: UUID,
    reading: Reading,
    limit: Limit = PAGE_LIMIT_DEFAULT,
    cursor: Cursor = None,
) -> Response:
    page = await plane_of(request).service.occurrences(
        reading.principal, schedule_id, limit=limit, cursor=cursor, within=reading.uow
    )
    return encoding.json_response(encoding.occurrence_page(page.items, page.next_cursor))


# ------------------------------------------------------------------ runs, sessions


@router.get(
    "/v1/runs/{run_id}",
    response_model=RunOut,
    summary="Read a run",
    **_route(RUN_READ_SCOPE, _NOT_FOUND),
)
async def get_run(
    request: Request,
    run_id: UUID,
    principal: Annotated[Principal, Depends(requires(RUN_READ_SCOPE))],
) -> RunOut:
    return RunOut.of(await plane_of(request).runs.get(principal, run_id))


@router.post(
    "/v1/runs/{run_id}/cancel",
    response_model=RunOut,
    summary="Cancel a run (run.cancel; schedule.cancel grants nothing here)",
    **_route(RUN_CANCEL_SCOPE, _NOT_FOUND, _CONFLICT),
)
async def cancel_run(
    request: Request,
    run_id: UUID,
    principal: Annotated[Principal, Depends(requires(RUN_CANCEL_SCOPE))],
) -> RunOut:
    return RunOut.of(await plane_of(request).runs.cancel(principal, run_id))


@router.get(
    "/v1/sessions/{session_id}/transcript",
    response_model=TranscriptOut,
    summary="A session's public transcript (the scheduler's seed event is omitted)",
    **_route(SESSION_READ_SCOPE, _NOT_FOUND),
)
async def read_transcript(
    request: Request,
    session_id: UUID,
    principal: Annotated[Principal, Depends(requires(SESSION_READ_SCOPE))],
) -> TranscriptOut:
    transcript = await plane_of(request).sessions.transcript(principal, session_id)
    return TranscriptOut(
        session_id=transcript.session_id,
        events=[TranscriptEventOut.of(e) for e in transcript.events],
    )


@router.delete(
    "/v1/sessions/{session_id}",
    response_model=ErasureOut,
    summary="Erase one of the caller's sessions (audited; the owner's right, no scope)",
    **_route(None, _NOT_FOUND),
)
async def erase_session(
    request: Request,
    session_id: UUID,
    principal: Annotated[Principal, Depends(requires(None))],
) -> ErasureOut:
    result = await plane_of(request).sessions.erase(principal, session_id)
    return ErasureOut(
        session_id=result.session_id,
        occurrences_marked=result.occurrences_marked,
        runs_deleted=result.runs_deleted,
        events_deleted=result.events_deleted,
    )
