"""Who is asking: the authenticated principal of a request (identity, never credentials)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason

SCOPE_REQUIRED = reason(
    "schedule.auth.scope_required", "The caller lacks the exact scope this operation requires"
)
EMPTY_PRINCIPAL = reason(
    "schedule.identity.empty_principal", "A principal needs a non-empty tenant_id and principal_id"
)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: tenant, principal and the exact scopes it holds now.

    Scopes have no hierarchy or wildcard: ``has`` is set membership.
    """

    tenant_id: str
    principal_id: str
    scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.tenant_id.strip() or not self.principal_id.strip():
            raise ValidationError(EMPTY_PRINCIPAL, "tenant_id and principal_id are required")

    def has(self, scope: str) -> bool:
        """True when the principal holds exactly ``scope``."""
        return scope in self.scopes
