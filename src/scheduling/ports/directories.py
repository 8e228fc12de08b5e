"""Directory ports the schedule service and the materializer consult (spec "Identity,
authorization, and policy", "Explicit website binding", "Configuration and deployment").

Every directory answers from authoritative local state (the durable identity and agent
tables, or deployment configuration); none may call an external identity provider
while a schedule transaction is open. None of them ever returns a credential.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID

from scheduling.domain.canonical import content_hash
from scheduling.domain.revision import RunLimits
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.repositories import AgentRepository, PrincipalRepository


@dataclass(frozen=True)
class AuthoritySnapshot:
    """The current authority of one principal.

    ``authority_version`` is content-derived: equal inputs give an equal version and
    any change of enabled flag, scopes or non-secret authority inputs gives a new one.
    """

    tenant_id: str
    principal_id: str
    enabled: bool
    scopes: frozenset[str]
    authority_version: str

    def has(self, scope: str) -> bool:
        """Exact scope membership (no hierarchy, no wildcard)."""
        return self.enabled and scope in self.scopes


def authority_version(
    tenant_id: str,
    principal_id: str,
    enabled: bool,
    scopes: frozenset[str],
    authority_inputs: dict[str, Any],
) -> str:
    """The content-derived version of a principal's authority (a ``sha256:`` hash)."""
    return content_hash(
        {
            "tenant_id": tenant_id,
            "principal_id": principal_id,
            "enabled": enabled,
            "scopes": sorted(scopes),
            "authority_inputs": authority_inputs,
        }
    )


class SchedulePrincipalDirectory(Protocol):
    """Resolves the current authority of a principal.

    Contract: ``current`` returns the snapshot of an existing principal (enabled or
    not) and ``None`` for an unknown one; it never trusts a stored snapshot and never
    returns a credential.
    """

    async def current(self, tenant_id: str, principal_id: str) -> AuthoritySnapshot | None: ...

    def joined(self, principals: PrincipalRepository) -> SchedulePrincipalDirectory:
        """This directory reading through ``principals``, an open unit of work's principal
        repository, so a request's authentication and the read it guards share one
        transaction (ADR 2380); a directory whose principals live in no database
        returns itself. Still read on every call: nothing is kept across requests."""
        ...


@dataclass(frozen=True)
class AgentSpec:
    """One immutable agent version: its policy profile and its default finite limits."""

    agent_id: UUID
    version: str
    policy_profile: str
    limits: RunLimits
    content_hash: str


class AgentRegistry(Protocol):
    """Versioned AgentSpecs with a floating active version per agent.

    Contract: ``get`` returns the exact pinned version or ``None``; ``active`` returns
    the version the floating pointer names now (or ``None``). A pinned version never
    changes when the pointer moves.
    """

    async def get(self, agent_id: UUID, version: str) -> AgentSpec | None: ...

    async def active(self, agent_id: UUID) -> AgentSpec | None: ...

    def joined(self, agents: AgentRepository) -> AgentRegistry:
        """This registry reading through ``agents``, an open unit of work's agent
        repository, so a create pins its agent inside its own write (ADR 2310); a
        registry whose versions live in no database returns itself."""
        ...


class BrowserProfileState(StrEnum):
    READY = "READY"
    PENDING = "PENDING"
    EXPIRED = "EXPIRED"
    DISABLED = "DISABLED"


@dataclass(frozen=True)
class BrowserProfile:
    """A signed-in browser profile's non-secret identity (no cookie or profile material)."""

    id: UUID
    tenant_id: str
    principal_id: str
    state: BrowserProfileState
    origins: tuple[str, ...] = ()


class BrowserProfileDirectory(Protocol):
    """Tenant/principal-scoped read of browser profiles.

    Contract: ``get`` returns the profile only when it belongs to exactly this tenant
    and principal; a missing or foreign profile is ``None`` (indistinguishable).
    """

    async def get(
        self, tenant_id: str, principal_id: str, profile_id: UUID
    ) -> BrowserProfile | None: ...


class TenantConfiguration(Protocol):
    """Per-tenant scheduling ceilings.

    Contract: ``ceilings`` returns finite positive ceilings, or ``None`` when the
    tenant is not configured for scheduling (which then refuses every definition).
    """

    async def ceilings(self, tenant_id: str) -> TenantCeilings | None: ...
