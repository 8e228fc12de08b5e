"""Bearer authentication and exact-scope authorization of each route.

A token names (tenant, principal) only. The scopes come from the durable principal
directory on every request (the one the scheduler reads at firing), never from the
request or the token. Each route names exactly one scope (or none); there is no
hierarchy or wildcard. Authorization runs as a route dependency, so a missing scope
is refused before the body is validated or any service is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from scheduling.domain.errors import AuthorizationError, SchedulingError
from scheduling.domain.identity import SCOPE_REQUIRED, Principal
from scheduling.http.codes import UNAUTHENTICATED
from scheduling.http.plane import Plane
from scheduling.ports.directories import AuthoritySnapshot, SchedulePrincipalDirectory
from scheduling.ports.tokens import TokenIdentity
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.service.validation import PRINCIPAL_UNAVAILABLE

SECURITY_SCHEME = "bearer"
_MAX_TOKEN = 512


class Unauthenticated(SchedulingError):
    """No valid bearer token (HTTP 401)."""


def plane_of(request: Request) -> Plane:
    plane: Plane = request.app.state.plane
    return plane


def _bearer(request: Request) -> str:
    sent = request.headers.getlist("authorization")
    # Two credentials are none: which one counts must not depend on header order.
    header = sent[0] if len(sent) == 1 else ""
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN:
        raise Unauthenticated(UNAUTHENTICATED, "a valid bearer token is required")
    return token


def _identity(request: Request, plane: Plane) -> TokenIdentity:
    """The token's (tenant, principal), or 401: no database is touched for it."""
    identity = plane.authenticator.authenticate(_bearer(request))
    if identity is None:
        raise Unauthenticated(UNAUTHENTICATED, "a valid bearer token is required")
    request.state.token_id = identity.token_id
    return identity


async def _authorized(
    request: Request,
    identity: TokenIdentity,
    principals: SchedulePrincipalDirectory,
    scope: str | None,
) -> Principal:
    """The caller with its current scopes read from ``principals``, or 403 (unknown or
    disabled, or without ``scope``). The snapshot is kept on the request
    (``authority_of``) and handed to the service, which would otherwise read the same
    row again (ADR 2240)."""
    snapshot = await principals.current(identity.tenant_id, identity.principal_id)
    if snapshot is None or not snapshot.enabled:
        raise AuthorizationError(PRINCIPAL_UNAVAILABLE, "the caller is unknown or disabled")
    request.state.authority = snapshot
    principal = Principal(identity.tenant_id, identity.principal_id, snapshot.scopes)
    if scope is not None and not principal.has(scope):
        raise AuthorizationError(SCOPE_REQUIRED, f"{scope} is required", {"scope": scope})
    return principal


async def authenticate(request: Request) -> Principal:
    """The caller with its current scopes from the durable principal directory.

    The one authentication read of the request (ADR 2240), in a transaction of its
    own. Nothing is kept across requests, so a revoked token or scope stops the next
    request (ADR 1511)."""
    plane = plane_of(request)
    identity = _identity(request, plane)
    return await _authorized(request, identity, plane.principals, None)


def authority_of(request: Request) -> AuthoritySnapshot | None:
    """The principal snapshot ``authenticate`` read for this request (or ``None``)."""
    snapshot: AuthoritySnapshot | None = getattr(request.state, "authority", None)
    return snapshot


def requires(scope: str | None) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency authenticating the caller and demanding exactly ``scope``."""

    async def dependency(request: Request) -> Principal:
        plane = plane_of(request)
        identity = _identity(request, plane)
        return await _authorized(request, identity, plane.principals, scope)

    return dependency


@dataclass(frozen=True)
class Guarded:
    """An authorized caller and the open unit of work its authority was read in; the
    read it guards runs in the same transaction (``within=``)."""

    principal: Principal
    uow: UnitOfWork


RELEASE_KEY = "release"
"""``scope["state"][RELEASE_KEY]``: the request's open units of work, which
``EdgeMiddleware`` closes before the response starts (``release``)."""


def guarded(scope: str, *, writes: bool = False) -> Callable[[Request], Awaitable[Guarded]]:
    """A dependency like ``requires`` that also opens the request's one unit of work
    (ADR 2380): the principal row and the guarded read share a connection checkout and
    a transaction. The token is checked before any connection is taken; 401 and 403
    are still raised before the route's parameters are validated. A read writes
    nothing; a create (``writes``, ADR 2395) commits its write in it, and a create
    that fails (422, 409) leaves nothing. The principal is read again by every
    request, so revocation still stops the next one (ADR 1511).

    A plain dependency, not a ``yield`` one: FastAPI wraps each ``yield`` dependency in
    a context manager, a cancel scope and a shielded exit, about 0.1 ms per request
    (ADR 2620). The unit of work is handed to ``EdgeMiddleware`` instead, which closes
    it (rolled back unless the service committed it) before the response starts, or
    when the request ends without one, exactly where the ``yield`` closed it: after the
    route function returned or raised and before the client sees a byte."""

    async def dependency(request: Request) -> Guarded:
        # The plane is looked up once (app, its State, a __getattr__: ADR 2660).
        plane = plane_of(request)
        identity = _identity(request, plane)
        tenant_id, principal_id = identity.tenant_id, identity.principal_id
        held: list[UnitOfWork] | None = request.scope.get("state", {}).get(RELEASE_KEY)
        if held is None:  # only EdgeMiddleware closes what is opened here
            raise RuntimeError("a guarded route is served without EdgeMiddleware")
        if writes:
            unit = await plane.service.writing(tenant_id, principal_id)
        else:
            unit = plane.service.reading(tenant_id, principal_id)
        uow = await unit.__aenter__()
        held.append(uow)
        principals = plane.principals.joined(uow.principals)
        principal = await _authorized(request, identity, principals, scope)
        return Guarded(principal, uow)

    return dependency


async def release(held: list[UnitOfWork]) -> None:
    """Close the request's units of work, newest first, each rolled back unless its
    service committed it (a committed one is already closed: nothing is sent)."""
    while held:
        await held.pop().__aexit__(None, None, None)


def scope_extra(scope: str | None) -> dict[str, Any]:
    """The OpenAPI facts of a route's authority: security requirement and extension."""
    scopes = [] if scope is None else [scope]
    return {"security": [{SECURITY_SCHEME: scopes}], "x-required-scopes": scopes}
