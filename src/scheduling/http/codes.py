"""Reason codes the HTTP edge itself raises (documented in docs/reason-codes.md)."""

from __future__ import annotations

from scheduling.domain.reasons import reason

UNAUTHENTICATED = reason(
    "schedule.http.unauthenticated", "No bearer token, or the token is not a valid one"
)
INVALID_REQUEST = reason(
    "schedule.http.invalid_request",
    "A request field, parameter or header is missing, unknown or of the wrong type",
)
MALFORMED_BODY = reason("schedule.http.malformed_body", "The request body is not valid JSON")
IDEMPOTENCY_KEY_REQUIRED = reason(
    "schedule.http.idempotency_key_required", "POST /v1/schedules needs an Idempotency-Key header"
)
BODY_TOO_LARGE = reason(
    "schedule.http.body_too_large", "The request body exceeds the server's byte limit"
)
ROUTE_NOT_FOUND = reason("schedule.http.route_not_found", "No route has this path")
METHOD_NOT_ALLOWED = reason(
    "schedule.http.method_not_allowed", "The route exists but not for this HTTP method"
)
UNSUPPORTED_MEDIA_TYPE = reason(
    "schedule.http.unsupported_media_type", "A request body must be application/json"
)
INTERNAL = reason(
    "schedule.http.internal", "The server failed unexpectedly; nothing about the cause is returned"
)
NOT_READY = reason(
    "schedule.http.not_ready", "The API cannot serve yet (database unreachable or schema behind)"
)
