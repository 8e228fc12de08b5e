"""Durable directories over the unit of work's principal and agent tables.

With the PostgreSQL unit-of-work factory these read the ``principals``,
``agent_versions`` and ``agent_active_versions`` tables (the same durable identity
store requests use), each in a short read-only transaction of its own, so no external
identity provider is ever called while a schedule transaction is open. The principal
is read in its own principal scope, so row-level security applies to the read too.
``joined`` reads the same tables inside a unit of work already open instead (a
create's own write, ADR 2310; a read request's authentication, ADR 2380).
"""

from __future__ import annotations

from uuid import UUID

from scheduling.adapters.postgres.memo import authority_version_of
from scheduling.domain.identity import Principal
from scheduling.domain.revision import RunLimits
from scheduling.ports.directories import AgentSpec, AuthoritySnapshot
from scheduling.ports.records import AgentVersionRecord, PrincipalRecord
from scheduling.ports.repositories import AgentRepository, PrincipalRepository
from scheduling.ports.unit_of_work import UnitOfWorkFactory


def snapshot_of(record: PrincipalRecord) -> AuthoritySnapshot:
    """The current authority of a principal row, with its content-derived version
    (memoized: every request authenticates through here; ADR 2620)."""
    scopes = frozenset(record.scopes)
    return AuthoritySnapshot(
        tenant_id=record.tenant_id,
        principal_id=record.principal_id,
        enabled=record.enabled,
        scopes=scopes,
        authority_version=authority_version_of(
            record.tenant_id, record.principal_id, record.enabled, scopes, record.authority_inputs
        ),
    )


def spec_of(record: AgentVersionRecord) -> AgentSpec:
    """The AgentSpec of one immutable agent-version row."""
    return AgentSpec(
        agent_id=record.agent_id,
        version=record.version,
        policy_profile=record.policy_profile,
        limits=RunLimits.model_validate(record.limits),
        content_hash=record.content_hash,
    )


class DurablePrincipalDirectory:
    """``SchedulePrincipalDirectory`` over the durable ``principals`` table."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def current(self, tenant_id: str, principal_id: str) -> AuthoritySnapshot | None:
        async with self._uow.begin(Principal(tenant_id, principal_id)) as uow:
            return await JoinedPrincipalDirectory(uow.principals).current(tenant_id, principal_id)

    def joined(self, principals: PrincipalRepository) -> JoinedPrincipalDirectory:
        return JoinedPrincipalDirectory(principals)


class JoinedPrincipalDirectory:
    """The same table read through an open unit of work's principal repository: no
    transaction of its own (a request's authentication inside the read it guards,
    ADR 2380). The unit of work's scope bounds the read, as in ``current`` above."""

    def __init__(self, principals: PrincipalRepository) -> None:
        self._principals = principals

    async def current(self, tenant_id: str, principal_id: str) -> AuthoritySnapshot | None:
        record = await self._principals.get(tenant_id, principal_id)
        return None if record is None else snapshot_of(record)

    def joined(self, principals: PrincipalRepository) -> JoinedPrincipalDirectory:
        return JoinedPrincipalDirectory(principals)


class DurableAgentRegistry:
    """``AgentRegistry`` over ``agent_versions`` and the floating active pointer."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def get(self, agent_id: UUID, version: str) -> AgentSpec | None:
        async with self._uow.begin() as uow:
            return await JoinedAgentRegistry(uow.agents).get(agent_id, version)

    async def active(self, agent_id: UUID) -> AgentSpec | None:
        async with self._uow.begin() as uow:
            return await JoinedAgentRegistry(uow.agents).active(agent_id)

    def joined(self, agents: AgentRepository) -> JoinedAgentRegistry:
        return JoinedAgentRegistry(agents)


class JoinedAgentRegistry:
    """The same tables read through an open unit of work's agent repository: no
    transaction of its own (a create's pin inside its write, ADR 2310)."""

    def __init__(self, agents: AgentRepository) -> None:
        self._agents = agents

    async def get(self, agent_id: UUID, version: str) -> AgentSpec | None:
        record = await self._agents.get_version(agent_id, version)
        return None if record is None else spec_of(record)

    async def active(self, agent_id: UUID) -> AgentSpec | None:
        record = await self._agents.active(agent_id)
        return None if record is None else spec_of(record)

    def joined(self, agents: AgentRepository) -> JoinedAgentRegistry:
        return JoinedAgentRegistry(agents)
