"""Wiring of the schedule service for gate checks and tests (not a test module).

``build_world`` wires ``ScheduleService`` and ``MaintenanceService`` to a unit-of-work
factory (in-memory or PostgreSQL) with seeded principals and an agent. With
``durable=True`` principals and agents are written to the database through the unit of
work and read back by the durable directories, as production does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from scheduling.adapters.memory.directories import (
    ConfiguredBrowserProfiles,
    ConfiguredTenantConfiguration,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)
from scheduling.adapters.postgres.directories import (
    DurableAgentRegistry,
    DurablePrincipalDirectory,
)
from scheduling.domain.canonical import content_hash
from scheduling.domain.identity import Principal
from scheduling.domain.revision import RunLimits
from scheduling.domain.secrets import SecretScanner
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.directories import (
    AgentRegistry,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.records import AgentVersionRecord, PrincipalRecord
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service import (
    DefinitionValidator,
    MaintenanceService,
    ScheduleDefinition,
    ScheduleService,
)
from scheduling.service.validation import Scanner
from simulation.clock import VirtualClock
from simulation.ids import SeededIds

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
AGENT_ID = UUID("5b0f3a52-8c7e-4d3f-9a51-0c6f7e2d1a10")
AGENT_VERSION = "v1"
POLICY = "default"
TENANT = "tenant-a"
SCHEDULE_SCOPES = frozenset({"schedule.read", "schedule.write", "schedule.cancel"})
EXTRA_SCOPES = frozenset({"memory.read", "web.search", "browser.profile.read"})
ALL_SCOPES = SCHEDULE_SCOPES | EXTRA_SCOPES
LIMITS = RunLimits(max_steps=20, max_model_calls=20, max_tool_calls=20, max_cost=Decimal("2"))
CEILINGS = TenantCeilings(
    max_run_timeout_seconds=3600,
    max_misfire_grace_seconds=7200,
    max_steps=100,
    max_model_calls=100,
    max_tool_calls=100,
    max_cost_per_run=Decimal("10"),
    max_active_runs=5,
    max_materializations_per_minute=60,
    max_daily_cost=Decimal("100"),
    max_monthly_cost=Decimal("1000"),
)


def principal(
    principal_id: str, tenant_id: str = TENANT, scopes: Iterable[str] = ALL_SCOPES
) -> Principal:
    return Principal(tenant_id, principal_id, frozenset(scopes))


def definition(**overrides: Any) -> ScheduleDefinition:
    """A valid daily definition; keyword arguments replace fields."""
    values: dict[str, Any] = {
        "title": "Morning briefing",
        "instruction": "Summarize the overnight news about the projects I follow.",
        "cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
        "agent_id": AGENT_ID,
        "agent_version": AGENT_VERSION,
        "policy_profile": POLICY,
        "requested_scopes": frozenset({"memory.read"}),
        "limits": LIMITS,
        "run_timeout_seconds": 600,
        "misfire_grace_seconds": 900,
        "max_consecutive_failures": 2,
    }
    values.update(overrides)
    return ScheduleDefinition(**values)


@dataclass
class World:
    service: ScheduleService
    maintenance: MaintenanceService
    clock: VirtualClock
    ids: SeededIds
    uow: UnitOfWorkFactory
    principals: SchedulePrincipalDirectory
    agents: AgentRegistry
    profiles: ConfiguredBrowserProfiles
    static_principals: StaticPrincipalDirectory | None = None
    static_agents: StaticAgentRegistry | None = None
    notified: list[UUID] = field(default_factory=list)


class RecordingNotifier:
    def __init__(self, sink: list[UUID]) -> None:
        self._sink = sink

    async def schedule_changed(self, schedule_id: UUID) -> None:
        self._sink.append(schedule_id)


async def seed_durable(
    admin: UnitOfWorkFactory, principals: Iterable[Principal], at: datetime = START
) -> None:
    """Write principal rows and the agent version through a trusted unit of work."""
    async with admin.begin() as uow:
        for who in principals:
            await uow.principals.put(
                PrincipalRecord(
                    tenant_id=who.tenant_id,
                    principal_id=who.principal_id,
                    enabled=True,
                    scopes=who.scopes,
                    authority_inputs={"roles": ["member"]},
                    created_at=at,
                    updated_at=at,
                )
            )
        if await uow.agents.get_version(AGENT_ID, AGENT_VERSION) is None:
            spec = {"model": "scripted", "tools": []}
            await uow.agents.put_version(
                AgentVersionRecord(
                    agent_id=AGENT_ID,
                    version=AGENT_VERSION,
                    policy_profile=POLICY,
                    spec=spec,
                    limits=LIMITS.to_json(),
                    content_hash=content_hash(spec),
                    created_at=at,
                )
            )
            await uow.agents.set_active(AGENT_ID, AGENT_VERSION, at)
        await uow.commit()


def build_world(
    uow: UnitOfWorkFactory,
    *,
    seed: int = 0,
    start: datetime = START,
    scanner: Scanner | None = None,
    durable_directory: UnitOfWorkFactory | None = None,
    principals: Iterable[Principal] = (),
    tenants: TenantConfiguration | None = None,
) -> World:
    """The service over ``uow``; ``durable_directory`` (a unit-of-work factory with read
    access to the principal and agent tables) selects the durable directories."""
    clock = VirtualClock(start)
    ids = SeededIds(seed)
    static_principals = static_agents = None
    directory: SchedulePrincipalDirectory
    agents: AgentRegistry
    if durable_directory is not None:
        directory = DurablePrincipalDirectory(durable_directory)
        agents = DurableAgentRegistry(durable_directory)
    else:
        static_principals = StaticPrincipalDirectory()
        for who in principals:
            static_principals.set(who.tenant_id, who.principal_id, who.scopes)
        static_agents = StaticAgentRegistry()
        static_agents.add(AGENT_ID, AGENT_VERSION, POLICY, LIMITS)
        static_agents.activate(AGENT_ID, AGENT_VERSION)
        directory, agents = static_principals, static_agents
    profiles = ConfiguredBrowserProfiles()
    validator = DefinitionValidator(
        principals=directory,
        agents=agents,
        browser_profiles=profiles,
        tenants=tenants or ConfiguredTenantConfiguration(default=CEILINGS),
        scanner=scanner or SecretScanner(),
    )
    notified: list[UUID] = []
    service = ScheduleService(
        uow=uow, clock=clock, ids=ids, validator=validator, notifier=RecordingNotifier(notified)
    )
    maintenance = MaintenanceService(uow=uow, clock=clock, ids=ids.fork("maintenance"))
    return World(
        service=service,
        maintenance=maintenance,
        clock=clock,
        ids=ids,
        uow=uow,
        principals=directory,
        agents=agents,
        profiles=profiles,
        static_principals=static_principals,
        static_agents=static_agents,
        notified=notified,
    )
