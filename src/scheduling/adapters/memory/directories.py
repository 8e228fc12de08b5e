"""Configuration-backed directories (tests, development, and deployment configuration).

``ConfiguredTenantConfiguration`` and ``ConfiguredBrowserProfiles`` hold authoritative
local configuration; ``StaticPrincipalDirectory`` and ``StaticAgentRegistry`` are for
application and property tests only (production uses the durable directories in
``scheduling.adapters.postgres.directories``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from scheduling.domain.canonical import content_hash
from scheduling.domain.revision import RunLimits
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.directories import (
    AgentSpec,
    AuthoritySnapshot,
    BrowserProfile,
    authority_version,
)
from scheduling.ports.repositories import AgentRepository, PrincipalRepository


class StaticPrincipalDirectory:
    """Principals held in memory; ``set`` replaces one (a new authority version)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], AuthoritySnapshot] = {}

    def set(
        self,
        tenant_id: str,
        principal_id: str,
        scopes: Iterable[str],
        *,
        enabled: bool = True,
        authority_inputs: Mapping[str, Any] | None = None,
    ) -> AuthoritySnapshot:
        held = frozenset(scopes)
        version = authority_version(
            tenant_id, principal_id, enabled, held, dict(authority_inputs or {})
        )
        snapshot = AuthoritySnapshot(tenant_id, principal_id, enabled, held, version)
        self._rows[(tenant_id, principal_id)] = snapshot
        return snapshot

    async def current(self, tenant_id: str, principal_id: str) -> AuthoritySnapshot | None:
        return self._rows.get((tenant_id, principal_id))

    def joined(self, principals: PrincipalRepository) -> StaticPrincipalDirectory:
        return self  # its rows live in no database


class StaticAgentRegistry:
    """Versioned AgentSpecs in memory with a floating active pointer per agent."""

    def __init__(self) -> None:
        self._versions: dict[tuple[UUID, str], AgentSpec] = {}
        self._active: dict[UUID, str] = {}

    def add(
        self, agent_id: UUID, version: str, policy_profile: str, limits: RunLimits
    ) -> AgentSpec:
        digest = content_hash(
            {"agent_id": str(agent_id), "version": version, "policy_profile": policy_profile}
        )
        spec = AgentSpec(agent_id, version, policy_profile, limits, digest)
        self._versions[(agent_id, version)] = spec
        return spec

    def activate(self, agent_id: UUID, version: str) -> None:
        if (agent_id, version) not in self._versions:
            raise KeyError("unknown agent version")
        self._active[agent_id] = version

    async def get(self, agent_id: UUID, version: str) -> AgentSpec | None:
        return self._versions.get((agent_id, version))

    async def active(self, agent_id: UUID) -> AgentSpec | None:
        version = self._active.get(agent_id)
        return None if version is None else self._versions.get((agent_id, version))

    def joined(self, agents: AgentRepository) -> StaticAgentRegistry:
        return self  # held in memory, in no unit of work


class ConfiguredBrowserProfiles:
    """Browser profiles from configuration, read tenant- and principal-scoped."""

    def __init__(self, profiles: Iterable[BrowserProfile] = ()) -> None:
        self._rows = {profile.id: profile for profile in profiles}

    def put(self, profile: BrowserProfile) -> None:
        self._rows[profile.id] = profile

    async def get(
        self, tenant_id: str, principal_id: str, profile_id: UUID
    ) -> BrowserProfile | None:
        profile = self._rows.get(profile_id)
        if profile is None or (profile.tenant_id, profile.principal_id) != (
            tenant_id,
            principal_id,
        ):
            return None
        return profile


class ConfiguredTenantConfiguration:
    """Per-tenant ceilings from deployment configuration, with an optional default."""

    def __init__(
        self,
        ceilings: Mapping[str, TenantCeilings] | None = None,
        default: TenantCeilings | None = None,
    ) -> None:
        self._rows = dict(ceilings or {})
        self._default = default

    async def ceilings(self, tenant_id: str) -> TenantCeilings | None:
        return self._rows.get(tenant_id, self._default)
