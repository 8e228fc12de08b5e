"""The schedule service's world for gate checks, scenarios, the soak and tests.

``build_world`` builds ``ScheduleService`` and ``MaintenanceService`` through the
composition root (``bootstrap.build_api`` / ``build_maintenance``) over an injected
unit-of-work factory (in-memory or PostgreSQL) with seeded principals and an agent.
With ``durable_directory`` principals and agents are written to the database through
the unit of work and read back by the durable directories, as production does.
``world_settings`` is the development configuration every world builds from (the
gate ceilings, PostgreSQL storage, durable directories, PostgreSQL admission).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from scheduling.bootstrap import SchedulerSettings, build_api, build_maintenance
from scheduling.config import Settings
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
from scheduling.service import MaintenanceService, ScheduleDefinition, ScheduleService
from scheduling.service.validation import Scanner
from scheduling.storage import Storage
from scheduling.testing import (
    ConfiguredBrowserProfiles,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
AGENT_ID = UUID("5b0f3a52-8c7e-4d3f-9a51-0c6f7e2d1a10")
AGENT_VERSION = "v1"
POLICY = "default"
# A second version of the same agent with its own policy profile (inactive unless a
# world activates it), so "pins the active version" and "keeps the pinned version"
# are distinct outcomes once a world rotates the active one.
AGENT_VERSION_2 = "v2"
POLICY_2 = "cautious"
TENANT = "tenant-a"
TENANT_B = "tenant-b"
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


def ceiling_env(ceilings: TenantCeilings) -> dict[str, str]:
    """``ceilings`` as the ``AGENT_SCHEDULE_TENANT_*`` settings that configure them."""
    names = {
        "MAX_RUN_TIMEOUT_SECONDS": ceilings.max_run_timeout_seconds,
        "MAX_MISFIRE_GRACE_SECONDS": ceilings.max_misfire_grace_seconds,
        "MAX_STEPS": ceilings.max_steps,
        "MAX_MODEL_CALLS": ceilings.max_model_calls,
        "MAX_TOOL_CALLS": ceilings.max_tool_calls,
        "MAX_COST_PER_RUN": ceilings.max_cost_per_run,
        "MAX_ACTIVE_RUNS": ceilings.max_active_runs,
        "MAX_MATERIALIZATIONS_PER_MINUTE": ceilings.max_materializations_per_minute,
        "MAX_DAILY_COST": ceilings.max_daily_cost,
        "MAX_MONTHLY_COST": ceilings.max_monthly_cost,
    }
    return {f"AGENT_SCHEDULE_TENANT_{name}": str(value) for name, value in names.items()}


# The development configuration of every world: PostgreSQL storage with the durable
# directories and the PostgreSQL admission controller, the gate ceilings above. Logins
# are not configured: worlds inject the unit-of-work factory of the role they act as.
WORLD_ENV: dict[str, str] = {
    "AGENT_SCHEDULE_ENVIRONMENT": "development",
    "AGENT_SCHEDULE_API_ENABLED": "1",
    "AGENT_SCHEDULE_WORKER_ENABLED": "1",
    "AGENT_SCHEDULE_STORAGE": "postgres",
    "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "durable",
    "AGENT_SCHEDULE_ADMISSION": "postgres",
    **ceiling_env(CEILINGS),
}


def world_settings(**env: str) -> Settings:
    """``WORLD_ENV`` with ``env`` (``AGENT_SCHEDULE_*`` names) on top."""
    return Settings.from_env({**WORLD_ENV, **env})


def scheduler_settings(**env: str) -> SchedulerSettings:
    """What a world's schedule worker is told (no login: the world injects its factory)."""
    return SchedulerSettings.of(world_settings(**env))


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
class ServiceWorld:
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


async def seed_agent_version(
    admin: UnitOfWorkFactory,
    version: str,
    policy_profile: str,
    *,
    at: datetime = START,
    limits: RunLimits = LIMITS,
    spec: dict[str, Any] | None = None,
) -> None:
    """Write one more version of the default agent (not activated; idempotent); its
    ``spec`` is a scripted model without tools unless given."""
    async with admin.begin() as uow:
        if await uow.agents.get_version(AGENT_ID, version) is None:
            spec = spec or {"model": "scripted", "tools": [], "version": version}
            await uow.agents.put_version(
                AgentVersionRecord(
                    agent_id=AGENT_ID,
                    version=version,
                    policy_profile=policy_profile,
                    spec=spec,
                    limits=limits.to_json(),
                    content_hash=content_hash(spec),
                    created_at=at,
                )
            )
        await uow.commit()


async def activate_agent_version(admin: UnitOfWorkFactory, version: str, at: datetime) -> None:
    """Make ``version`` the default agent's active version (the rotation a deploy does)."""
    async with admin.begin() as uow:
        await uow.agents.set_active(AGENT_ID, version, at)
        await uow.commit()


def build_world(
    storage: Storage,
    *,
    seed: int = 0,
    start: datetime = START,
    scanner: Scanner | None = None,
    principals: Iterable[Principal] = (),
    tenants: TenantConfiguration | None = None,
) -> ServiceWorld:
    """The service over ``storage``'s API role, built by ``bootstrap.build_api``. A
    durable (PostgreSQL) storage gives the durable directories, which read the principal
    and agent tables through that role; memory gives the static ones, seeded with
    ``principals`` and the agent."""
    clock = VirtualClock(start)
    ids = SeededIds(seed)
    settings = world_settings(AGENT_SCHEDULE_STORAGE="postgres" if storage.durable else "memory")
    notified: list[UUID] = []
    api = build_api(
        settings,
        clock=clock,
        ids=ids,
        storage=storage,
        notifier=RecordingNotifier(notified),
        scanner=scanner or SecretScanner(),
        tenants=tenants,
    )
    static_principals = static_agents = None
    if isinstance(api.principals, StaticPrincipalDirectory):
        static_principals = api.principals
        for who in principals:
            static_principals.set(who.tenant_id, who.principal_id, who.scopes)
    if isinstance(api.agents, StaticAgentRegistry):
        static_agents = api.agents
        static_agents.add(AGENT_ID, AGENT_VERSION, POLICY, LIMITS)
        static_agents.activate(AGENT_ID, AGENT_VERSION)
    maintenance = build_maintenance(
        settings, clock=clock, ids=ids.fork("maintenance"), storage=storage
    )
    return ServiceWorld(
        service=api.service,
        maintenance=maintenance.purge,
        clock=clock,
        ids=ids,
        uow=api.uow,
        principals=api.principals,
        agents=api.agents,
        profiles=api.profiles,
        static_principals=static_principals,
        static_agents=static_agents,
        notified=notified,
    )
