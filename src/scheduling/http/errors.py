"""The one error envelope and the one table from reason code to HTTP status.

Every error response is ``{"error": {"code", "message", "details"}}`` with a stable
``schedule.*`` code; the request id travels in the ``X-Request-Id`` header, never in
the body, so a foreign and a missing resource answer byte-identical bodies. ``STATUS``
maps every registered code to its status (a test keeps it equal to the registry);
a code missing from it falls back on its error class. Validation failures never echo
the rejected input, and the catch-all answers ``schedule.http.internal`` with no detail.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from scheduling.domain.errors import (
    AuthorizationError,
    ConflictError,
    NotFoundError,
    SchedulingError,
    UnavailableError,
    ValidationError,
)
from scheduling.http.codes import (
    BODY_TOO_LARGE,
    IDEMPOTENCY_KEY_REQUIRED,
    INTERNAL,
    INVALID_REQUEST,
    MALFORMED_BODY,
    METHOD_NOT_ALLOWED,
    ROUTE_NOT_FOUND,
    UNAUTHENTICATED,
    UNSUPPORTED_MEDIA_TYPE,
)

_log = logging.getLogger("scheduling.http")

# fmt: off
STATUS: dict[str, int] = {
    # admission
    "schedule.admission.concurrency_limit": 500,
    "schedule.admission.daily_cost_exceeded": 500,
    "schedule.admission.development_only": 500,
    "schedule.admission.monthly_cost_exceeded": 500,
    "schedule.admission.not_configured": 500,
    "schedule.admission.rate_limited": 500,
    # auth
    "schedule.auth.principal_unavailable": 403,
    "schedule.auth.scope_required": 403,
    # bootstrap
    "schedule.bootstrap.allow_all_admission": 503,
    "schedule.bootstrap.database_url_missing": 503,
    "schedule.bootstrap.development_in_production": 503,
    "schedule.bootstrap.feature_disabled": 503,
    "schedule.bootstrap.memory_repositories": 503,
    "schedule.bootstrap.principal_directory_not_durable": 503,
    "schedule.bootstrap.refused": 503,
    # the command line (no HTTP route raises them)
    "schedule.cli.invalid_argument": 400,
    "schedule.cli.invalid_json": 400,
    # reliability (operator-side; no HTTP route raises them)
    "schedule.bootstrap.retry_settings": 503,
    "schedule.config.drain_invalid": 503,
    "schedule.config.failure_backoff_invalid": 503,
    "schedule.config.retry_invalid": 503,
    "schedule.config.run_worker_login_shared": 503,
    "schedule.config.run_worker_login_missing": 503,
    "schedule.config.run_worker_privileges": 503,
    "schedule.config.run_worker_unreachable": 503,
    "schedule.config.transaction_pooling": 503,
    "schedule.logins.admin_url_missing": 500,
    "schedule.logins.exists": 500,
    "schedule.logins.invalid": 500,
    "schedule.logins.missing": 500,
    "schedule.logins.password_empty": 500,
    "schedule.retry.invalid_settings": 500,
    "schedule.runtime.drained": 500,
    "schedule.bootstrap.worker_topology": 503,
    # role metrics ports (operator-side; no HTTP route raises it)
    "schedule.metrics.port_unavailable": 503,
    # cadence
    "schedule.cadence.day_duplicate": 422,
    "schedule.cadence.day_out_of_range": 422,
    "schedule.cadence.invalid_instant": 422,
    "schedule.cadence.invalid_local_time": 422,
    "schedule.cadence.invalid_timezone": 422,
    "schedule.cadence.invalid_type": 422,
    "schedule.cadence.missing_field": 422,
    "schedule.cadence.month_out_of_range": 422,
    "schedule.cadence.monthly_selector_empty": 422,
    "schedule.cadence.naive_instant": 422,
    "schedule.cadence.not_an_object": 422,
    "schedule.cadence.unknown_field": 422,
    "schedule.cadence.unknown_kind": 422,
    "schedule.cadence.weekday_duplicate": 422,
    "schedule.cadence.weekday_out_of_range": 422,
    "schedule.cadence.weekdays_empty": 422,
    "schedule.cadence.yearly_date_duplicate": 422,
    "schedule.cadence.yearly_date_impossible": 422,
    "schedule.cadence.yearly_day_out_of_range": 422,
    "schedule.cadence.yearly_selector_empty": 422,
    # config
    "schedule.config.admission_development_only": 503,
    "schedule.config.async_reserve": 503,
    "schedule.config.async_slots": 503,
    "schedule.config.backoff_invalid": 503,
    "schedule.config.ceiling_invalid": 503,
    "schedule.config.ceiling_missing": 503,
    "schedule.config.claim_bound_invalid": 503,
    "schedule.config.database_url_missing": 503,
    "schedule.config.flag_invalid": 503,
    "schedule.config.flags_split": 503,
    "schedule.config.interactive_reserve": 503,
    "schedule.config.not_production": 503,
    "schedule.config.poll_invalid": 503,
    "schedule.config.principal_directory_not_durable": 503,
    "schedule.config.retention_invalid": 503,
    "schedule.config.scan_batch_invalid": 503,
    "schedule.config.scheduler_login_missing": 503,
    "schedule.config.scheduler_privileges": 503,
    "schedule.config.scheduler_unreachable": 503,
    "schedule.config.storage_not_postgres": 503,
    "schedule.config.topology_invalid": 503,
    "schedule.config.worker_concurrency_invalid": 503,
    "schedule.config.unparseable": 503,
    # event
    "schedule.event.forbidden_field": 500,
    "schedule.event.invalid_field": 500,
    "schedule.event.missing_field": 500,
    "schedule.event.payload_shape": 500,
    "schedule.event.unknown_field": 500,
    # http
    "schedule.http.body_too_large": 413,
    "schedule.http.idempotency_key_required": 400,
    "schedule.http.internal": 500,
    "schedule.http.invalid_request": 422,
    "schedule.http.malformed_body": 400,
    "schedule.http.method_not_allowed": 405,
    "schedule.http.not_ready": 503,
    "schedule.http.route_not_found": 404,
    "schedule.http.unauthenticated": 401,
    "schedule.http.unsupported_media_type": 415,
    "schedule.http.tokens_file_missing": 503,
    # provision
    "schedule.provision.agent_version_conflict": 409,
    "schedule.provision.duplicate_entry": 422,
    "schedule.provision.file_invalid": 422,
    "schedule.provision.input_missing": 422,
    "schedule.provision.principal_disabled": 422,
    "schedule.provision.unknown_principal": 422,
    "schedule.provision.unknown_scope": 422,
    # idempotency
    "schedule.idempotency.key_reused": 409,
    # identity
    "schedule.identity.empty_principal": 422,
    # lifecycle
    "schedule.lifecycle.illegal_transition": 409,
    "schedule.lifecycle.invalid_expected_revision": 422,
    "schedule.lifecycle.stale_revision": 409,
    # keys (the deployment key ring: a schema not migrated)
    "schedule.keys.missing": 503,
    # limits
    "schedule.limits.invalid_field": 422,
    "schedule.limits.invalid_reserve": 422,
    "schedule.limits.missing_field": 422,
    "schedule.limits.non_positive_bound": 422,
    "schedule.limits.not_finite": 422,
    "schedule.limits.unknown_field": 422,
    # materialize
    "schedule.materialize.agent_version_missing": 500,
    "schedule.materialize.authority_changed": 500,
    "schedule.materialize.ceiling_exceeded": 500,
    "schedule.materialize.grace_expired": 500,
    "schedule.materialize.overlap": 500,
    "schedule.materialize.policy_mismatch": 500,
    "schedule.materialize.principal_disabled": 500,
    "schedule.materialize.principal_missing": 500,
    "schedule.materialize.scope_revoked": 500,
    "schedule.materialize.tenant_unconfigured": 500,
    # not_found
    "schedule.not_found": 404,
    # occurrence
    "schedule.occurrence.early": 500,
    "schedule.occurrence.invalid_field": 500,
    "schedule.occurrence.invalid_revision": 500,
    "schedule.occurrence.links_forbidden": 500,
    "schedule.occurrence.links_required": 500,
    "schedule.occurrence.missing_field": 500,
    "schedule.occurrence.partial_erasure": 500,
    "schedule.occurrence.reason_forbidden": 500,
    "schedule.occurrence.reason_required": 500,
    "schedule.occurrence.unknown_field": 500,
    # database (ADR 2220)
    "schedule.database.unavailable": 503,
    # page
    "schedule.page.invalid_cursor": 422,
    "schedule.page.invalid_limit": 422,
    # patch
    "schedule.patch.at_and_cadence": 422,
    "schedule.patch.empty": 422,
    # persistence
    "schedule.persistence.constraint_violated": 409,
    "schedule.persistence.duplicate": 409,
    "schedule.persistence.forbidden": 404,
    "schedule.persistence.invalid_command": 500,
    "schedule.persistence.invalid_value": 422,
    "schedule.persistence.missing_reference": 409,
    "schedule.persistence.not_found": 404,
    "schedule.persistence.retry": 503,
    "schedule.persistence.stale": 409,
    "schedule.persistence.unavailable": 503,
    "schedule.persistence.uow_closed": 500,
    # readiness
    "schedule.readiness.database_unreachable": 503,
    "schedule.readiness.schema_not_at_head": 503,
    # recurrence
    "schedule.recurrence.naive_instant": 500,
    # retention
    "schedule.retention.invalid_settings": 500,
    # revision
    "schedule.revision.empty_text": 422,
    "schedule.revision.invalid_field": 422,
    "schedule.revision.invalid_number": 422,
    "schedule.revision.invalid_scope": 422,
    "schedule.revision.missing_field": 422,
    "schedule.revision.non_positive_failure_limit": 422,
    "schedule.revision.non_positive_grace": 422,
    "schedule.revision.non_positive_timeout": 422,
    "schedule.revision.text_too_long": 422,
    "schedule.revision.timezone_mismatch": 422,
    "schedule.revision.unknown_field": 422,
    # run
    "schedule.run.not_found": 404,
    "schedule.run.read_forbidden": 403,
    # runtime
    "schedule.runtime.agent_failed": 500,
    "schedule.runtime.cancel_forbidden": 403,
    "schedule.runtime.cancel_terminal": 409,
    "schedule.runtime.cost_limit": 500,
    "schedule.runtime.deadline_exceeded": 500,
    "schedule.runtime.invalid_capacity": 500,
    "schedule.runtime.invalid_settings": 500,
    "schedule.runtime.lease_lost": 500,
    "schedule.runtime.limits_invalid": 500,
    "schedule.runtime.model_call_limit": 500,
    "schedule.runtime.scope_not_held": 500,
    "schedule.runtime.step_limit": 500,
    "schedule.runtime.synthesis_reserve": 500,
    "schedule.runtime.tool_call_limit": 500,
    # schedule
    "schedule.schedule.invalid_field": 500,
    "schedule.schedule.missing_field": 500,
    "schedule.schedule.unknown_field": 500,
    # secret_detected
    "schedule.secret_detected": 422,
    # session
    "schedule.session.not_found": 404,
    "schedule.session.read_forbidden": 403,
    # state
    "schedule.state.empty_identity": 500,
    "schedule.state.invalid_counter": 500,
    "schedule.state.next_fire_forbidden": 500,
    "schedule.state.pause_reason_forbidden": 500,
    "schedule.state.pause_reason_required": 500,
    "schedule.state.updated_before_created": 500,
    # tenancy
    "schedule.tenancy.invalid_field": 500,
    "schedule.tenancy.missing_field": 500,
    "schedule.tenancy.non_positive_ceiling": 500,
    "schedule.tenancy.not_configured": 503,
    "schedule.tenancy.unknown_field": 500,
    # text hygiene (NUL, lone surrogates) at every edge
    "schedule.text.invalid": 422,
    "schedule.text.too_deep": 422,
    # tokens
    "schedule.tokens.file_invalid": 500,
    "schedule.tokens.identity_invalid": 500,
    "schedule.tokens.name_taken": 409,
    "schedule.tokens.unknown": 500,
    # tool (the governed pipeline's codes; no HTTP route raises them, so an
    # appearance here is a server fault, except the client-shaped ones)
    "schedule.browser_profile_required": 422,
    "schedule.calling_unavailable": 422,
    "schedule.mcp.unauthenticated": 401,
    # The MCP edge answers these itself; the table stays total over the registry.
    "schedule.mcp.agent_missing": 500,
    "schedule.mcp.body_too_large": 413,
    "schedule.mcp.elicitation_unsupported": 400,
    "schedule.mcp.internal_error": 500,
    "schedule.mcp.token_missing": 401,
    "schedule.mcp.tokens_file_missing": 500,
    "schedule.tool.approval_stale": 409,
    "schedule.tool.approval_timeout": 503,
    "schedule.tool.approval_decided": 409,
    "schedule.tool.approval_denied": 403,
    "schedule.tool.invalid_arguments": 422,
    "schedule.tool.not_governed": 500,
    "schedule.tool.output_too_large": 500,
    "schedule.tool.timeout": 503,
    "schedule.tool.invalid_spec": 500,
    "schedule.tool.scope_denied": 500,
    "schedule.tool.undeclared": 500,
    "schedule.tool.unknown": 500,
    # validation
    "schedule.validation.agent_unknown": 422,
    "schedule.validation.agent_version_unknown": 422,
    "schedule.validation.browser_profile_not_ready": 422,
    "schedule.validation.browser_profile_unavailable": 422,
    "schedule.validation.browser_scope_required": 422,
    "schedule.validation.ceiling_exceeded": 422,
    "schedule.validation.invalid_idempotency_key": 400,
    "schedule.validation.no_future_occurrence": 422,
    "schedule.validation.policy_mismatch": 422,
    "schedule.validation.scope_not_held": 422,
    "schedule.validation.unknown_scope": 422,
    # value
    "schedule.value.naive_datetime": 422,
}
# fmt: on

_BY_CLASS: tuple[tuple[type[SchedulingError], int], ...] = (
    (NotFoundError, 404),
    (ConflictError, 409),
    (AuthorizationError, 403),
    (ValidationError, 422),
    (UnavailableError, 503),
)

RETRY_AFTER_CODES = frozenset(
    {
        "schedule.database.unavailable",
        "schedule.persistence.unavailable",
        "schedule.persistence.retry",
    }
)
"""503s of a database that cannot serve now: answered with ``Retry-After``."""
RETRY_AFTER_SECONDS = "1"

TOO_LARGE_FLAG = "body_too_large"
"""Request-state key the body limiter sets once a streamed body passes the limit."""

_SAFE_DETAIL_TYPES = (str, int, float, bool, type(None))
_CLOSED_NAME = re.compile(r"[a-z][a-z0-9_.\[\]]{0,95}")
_NAME_PARTS = re.compile(r"[._\[\]]+")
_MAX_NAME_PART = 16
_LOC_ROOTS = frozenset({"Idempotency-Key", "idempotency-key", "Authorization", "authorization"})
WITHHELD = "<withheld>"
"""Stands in for a detail or location string that could be a client's secret."""


def status_of(error: SchedulingError) -> int:
    """The HTTP status of ``error``: the table, else its class, else 500."""
    if error.code in STATUS:
        return STATUS[error.code]
    for cls, status in _BY_CLASS:
        if isinstance(error, cls):
            return status
    return 500


def envelope(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": dict(details or {})}}


def error_response(
    status: int,
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(envelope(code, message, details), status_code=status, headers=headers)


def closed_name(value: str) -> bool:
    """Whether ``value`` has the shape of the product's own names (field paths, codes,
    scope names): lowercase words of at most 16 characters joined by ``.``, ``_`` or
    list indexes, 96 characters in all. A credential is one long run of mixed
    characters, so it fails; a name the client made up may pass, but then it is only
    a short lowercase word (ADR 2130)."""
    return bool(_CLOSED_NAME.fullmatch(value)) and all(
        len(part) <= _MAX_NAME_PART for part in _NAME_PARTS.split(value)
    )


def _public_value(value: Any) -> Any:
    if isinstance(value, str):
        return value if closed_name(value) else WITHHELD
    return value


def _public_details(error: SchedulingError) -> dict[str, Any]:
    # Domain details are non-secret by contract; keep JSON scalars and lists of them,
    # and of strings only those shaped like the product's own names: a detail naming
    # a client-supplied key (an unknown cadence field, a text path) withholds it.
    out: dict[str, Any] = {}
    for key, value in error.details.items():
        if isinstance(value, _SAFE_DETAIL_TYPES):
            out[key] = _public_value(value)
        elif isinstance(value, list | tuple) and all(
            isinstance(v, _SAFE_DETAIL_TYPES) for v in value
        ):
            out[key] = [_public_value(v) for v in value]
    return out


def scheduling_error_response(error: SchedulingError) -> JSONResponse:
    response = _scheduling_error_response(error)
    if response.status_code == 503 and error.code in RETRY_AFTER_CODES:
        # A database that cannot serve now says when to come back (ADR 2220).
        response.headers["Retry-After"] = RETRY_AFTER_SECONDS
    return response


def _scheduling_error_response(error: SchedulingError) -> JSONResponse:
    status = status_of(error)
    if status >= 500:
        # Internal invariant failures keep their code, not their details.
        return error_response(status, error.code, "the request could not be completed")
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return error_response(status, error.code, error.message, _public_details(error), headers)


def _loc(loc: tuple[int | str, ...]) -> list[str | int]:
    # A location part is a schema name, an index or a header, except the key of an
    # unknown field, which is the client's text: only closed names travel.
    return [
        part if isinstance(part, int) or _is_schema_name(str(part)) else WITHHELD for part in loc
    ]


def _is_schema_name(part: str) -> bool:
    return closed_name(part) or part in _LOC_ROOTS


def _json_media(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _sent_a_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return (length is not None and length.strip() not in ("", "0")) or (
        "transfer-encoding" in request.headers
    )


def route_template(scope: Mapping[str, Any]) -> str:
    """The matched route's template (``/v1/schedules/{schedule_id}``), never the raw path
    (it could carry an identifier of another tenant's probing, or a credential pasted in
    the wrong place); unmatched is ``-``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "-"


def validation_response(
    exc: RequestValidationError, request: Request | None = None
) -> JSONResponse:
    errors = list(exc.errors())
    if (
        request is not None
        and _sent_a_body(request)
        and not _json_media(request.headers.get("content-type"))
        and any(tuple(e.get("loc", ()))[:1] == ("body",) for e in errors)
    ):
        # The framework hands a non-JSON body over as bytes, which no model accepts.
        return error_response(
            415, UNSUPPORTED_MEDIA_TYPE, "a request body must be application/json"
        )
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, MALFORMED_BODY, "the request body is not valid JSON")
    for e in errors:
        loc = tuple(e.get("loc", ()))
        if e.get("type") == "missing" and loc[:1] == ("header",) and "dempotency" in str(loc):
            return error_response(
                400, IDEMPOTENCY_KEY_REQUIRED, "this request needs an Idempotency-Key header"
            )
    # Location and error type only: never the rejected input or a message quoting it.
    problems = [{"loc": _loc(tuple(e.get("loc", ()))), "type": str(e.get("type"))} for e in errors]
    return error_response(
        422, INVALID_REQUEST, "the request does not match the schema", {"errors": problems[:20]}
    )


def allowed_methods(request: Request) -> str:
    """Every method some route serves on this path. The router's own 405 names only the
    first route whose path matched, so ``/v1/schedules/{id}`` (GET, PATCH and DELETE
    are three routes) would advertise GET alone."""
    methods: set[str] = set()
    for route in _leaf_routes(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match in (Match.PARTIAL, Match.FULL):
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _leaf_routes(routes: Any) -> Any:
    # An included router (no prefix here) holds its routes on its original router.
    for route in routes:
        inner = getattr(getattr(route, "original_router", route), "routes", None)
        if inner is not None and inner is not routes:
            yield from _leaf_routes(inner)
        else:
            yield route


def install_error_handlers(app: FastAPI) -> None:
    async def on_scheduling(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SchedulingError)
        return scheduling_error_response(exc)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return validation_response(exc, request)

    def too_large(request: Request) -> JSONResponse | None:
        limit = request.scope.get("state", {}).get(TOO_LARGE_FLAG)
        if limit is None:
            return None
        return error_response(
            413, BODY_TOO_LARGE, f"the request body exceeds {limit} bytes", {"max_bytes": limit}
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if (oversized := too_large(request)) is not None:
            return oversized
        if exc.status_code == 404:
            return error_response(404, ROUTE_NOT_FOUND, "no route has this path")
        if exc.status_code == 405:
            return error_response(
                405,
                METHOD_NOT_ALLOWED,
                "the route does not accept this method",
                headers={**dict(exc.headers or {}), "Allow": allowed_methods(request)},
            )
        if exc.status_code == 401:
            return error_response(
                401,
                UNAUTHENTICATED,
                "a valid bearer token is required",
                None,
                {"WWW-Authenticate": "Bearer"},
            )
        if exc.status_code == 400:
            # The framework's "error parsing the body": bytes that are not UTF-8 JSON.
            return error_response(400, MALFORMED_BODY, "the request body is not valid JSON")
        return error_response(exc.status_code, INVALID_REQUEST, "the request was refused")

    async def on_anything(request: Request, exc: Exception) -> JSONResponse:
        if (oversized := too_large(request)) is not None:
            return oversized
        # The route's template, as the access log names it: the raw path is client text.
        _log.error(
            "unhandled %s on %s %s",
            type(exc).__name__,
            request.method,
            route_template(request.scope),
        )
        return error_response(500, INTERNAL, "the server failed; the request may be retried")

    app.add_exception_handler(SchedulingError, on_scheduling)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_anything)
