"""Bearer authentication and exact-scope authorization of each route.

A token names (tenant, principal) only. The scopes come from the durable principal
directory on every request (the one the scheduler reads at firing), never from the
request or the token. Each route names exactly one scope (or none); there is no
hierarchy or wildcard. Authorization runs as a route dependency, so a missing scope
is refused before the body is validated or any service is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request

from scheduling.domain.errors import AuthorizationError, SchedulingError
from scheduling.domain.identity import SCOPE_REQUIRED, Principal
from scheduling.http.codes import UNAUTHENTICATED
from scheduling.http.plane import Plane
from scheduling.ports.directories import AuthoritySnapshot
from scheduling.service.validation import PRINCIPAL_UNAVAILABLE

SECURITY_SCHEME = "bearer"
_MAX_TOKEN = 512


class Unauthenticated(SchedulingError):
    """No valid bearer token (HTTP 401)."""


def plane_of(request: Request) -> Plane:
    plane: Plane = request.app.state.plane
    return plane


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN:
        raise Unauthenticated(UNAUTHENTICATED, "a valid bearer token is required")
    return token


async def authenticate(request: Request) -> Principal:
    """The caller with its current scopes from the durable principal directory.

    The one authentication read of the request (ADR 2240): the snapshot is kept on the
    request (``authority_of``) and handed to the service, which would otherwise read
    the same row again. Nothing is kept across requests, so a revoked token or scope
    stops the next request (ADR 1511)."""
    plane = plane_of(request)
    identity = plane.authenticator.authenticate(_bearer(request))
    if identity is None:
        raise Unauthenticated(UNAUTHENTICATED, "a valid bearer token is required")
    request.state.token_id = identity.token_id
    snapshot = await plane.principals.current(identity.tenant_id, identity.principal_id)
    if snapshot is None or not snapshot.enabled:
        raise AuthorizationError(PRINCIPAL_UNAVAILABLE, "the caller is unknown or disabled")
    request.state.authority = snapshot
    return Principal(identity.tenant_id, identity.principal_id, snapshot.scopes)


def authority_of(request: Request) -> AuthoritySnapshot | None:
    """The principal snapshot ``authenticate`` read for this request (or ``None``)."""
    snapshot: AuthoritySnapshot | None = getattr(request.state, "authority", None)
    return snapshot


def requires(scope: str | None) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency authenticating the caller and demanding exactly ``scope``."""

    async def dependency(request: Request) -> Principal:
        principal = await authenticate(request)
        if scope is not None and not principal.has(scope):
            raise AuthorizationError(SCOPE_REQUIRED, f"{scope} is required", {"scope": scope})
        return principal

    return dependency


def scope_extra(scope: str | None) -> dict[str, Any]:
    """The OpenAPI facts of a route's authority: security requirement and extension."""
    scopes = [] if scope is None else [scope]
    return {"security": [{SECURITY_SCHEME: scopes}], "x-required-scopes": scopes}
