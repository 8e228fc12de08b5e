"""Bearer authentication shared by the edges that take a token per request (ADR 1511).

The token names (tenant, principal) only, through the ``TokenDirectory`` (the digest-only
token file, ADR 1501). The scopes are read from the durable principal directory on every
call, the one the scheduler reads at firing, so revoking a token in the file or a scope
in the directory takes effect on the next request. An unknown, disabled or deleted
principal authenticates as nobody.
"""

from __future__ import annotations

from scheduling.domain.identity import Principal
from scheduling.ports.directories import SchedulePrincipalDirectory
from scheduling.ports.tokens import TokenDirectory

MAX_TOKEN_LENGTH = 512


class BearerAuthenticator:
    def __init__(self, tokens: TokenDirectory, principals: SchedulePrincipalDirectory) -> None:
        self._tokens = tokens
        self._principals = principals

    async def principal(self, header: str | None) -> Principal | None:
        """The caller of an ``Authorization: Bearer <token>`` header, with its current
        scopes; ``None`` for a missing, malformed or unknown token or principal."""
        scheme, _, token = (header or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        identity = self._tokens.authenticate(token)
        if identity is None:
            return None
        snapshot = await self._principals.current(identity.tenant_id, identity.principal_id)
        if snapshot is None or not snapshot.enabled:
            return None
        return Principal(identity.tenant_id, identity.principal_id, snapshot.scopes)
