"""The bearer-token port of the HTTP edge: a presented token names (tenant, principal).

A token grants identity only. Scopes are never stored with a token: the edge reads them
from the durable principal directory the scheduler also uses at firing, so revoking a
scope there takes effect for requests and firings alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class TokenIdentity:
    """Who a valid token authenticates (``token_id`` is a non-secret label for logs)."""

    token_id: str
    tenant_id: str
    principal_id: str


class TokenDirectory(Protocol):
    """Contract: ``authenticate`` returns the identity of a valid presented token and
    ``None`` otherwise; it compares digests in constant time and never stores, logs or
    returns the presented value."""

    def authenticate(self, presented: str) -> TokenIdentity | None: ...
