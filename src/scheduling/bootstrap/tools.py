"""The governed tool pipeline with the six schedule tools (ADR 1600)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from scheduling.adapters.memory.tool_ledger import ConfiguredWebsiteBindings
from scheduling.bootstrap.api import ApiRole, build_api
from scheduling.bootstrap.choices import tenant_ceilings
from scheduling.config import Settings
from scheduling.domain.secrets import SecretScanner
from scheduling.ports.clock import Clock
from scheduling.ports.directories import TenantConfiguration
from scheduling.ports.ids import IdGenerator
from scheduling.ports.notifier import ScheduleNotifier
from scheduling.ports.tool_ledger import ToolLedger, WebsiteBindings
from scheduling.runtime.tool_pipeline import (
    DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    ApprovalPort,
    Governance,
    ToolRegistry,
)
from scheduling.runtime.tools import ToolPipeline
from scheduling.service.schedules import ScheduleService
from scheduling.storage import Storage
from scheduling.tools import ScheduleToolDeps, default_agent_roster, register_schedule_tools
from scheduling.tools.catalog import schedule_flags_on

# ----------------------------------------------------------------- model tools
# The governed tool pipeline with the six schedule tools (ADR 1600). The service is
# wired as build_api wires it (API role, same directories and validator); the
# website-binding and browser-profile directories may be injected (the chat surface
# owns them). With either schedule flag off no schedule tool is registered and the
# default agent's roster lacks them.


@dataclass
class ToolsRole:
    pipeline: ToolPipeline
    registry: ToolRegistry
    roster: frozenset[str]
    api: ApiRole | None
    ledger: ToolLedger | None

    @property
    def service(self) -> ScheduleService | None:
        return None if self.api is None else self.api.service

    async def close(self) -> None:
        if self.api is not None:
            await self.api.close()


def build_tools(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    approvals: ApprovalPort,
    default_agent_id: UUID,
    website_bindings: WebsiteBindings | None = None,
    base_roster: frozenset[str] = frozenset(),
    storage: Storage | None = None,
    notifier: ScheduleNotifier | None = None,
    tenants: TenantConfiguration | None = None,
    approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
) -> ToolsRole:
    """The conversation-side tool pipeline: registry, roster, ledger and approvals, over
    ``build_api``'s service (same login, directories, validator; ``storage``, ``notifier``
    and ``tenants`` are injected as there). The chat surface supplies the website
    bindings; browser profiles are the API role's (``ToolsRole.api.profiles``). The
    pipeline waits at most ``approval_timeout_seconds`` (real time) for a decision."""
    flags = {"api_enabled": settings.api_enabled, "worker_enabled": settings.worker_enabled}
    registry = ToolRegistry()
    roster = default_agent_roster(**flags, base=base_roster)
    if not schedule_flags_on(**flags):
        return ToolsRole(ToolPipeline(registry), registry, roster, None, None)
    api = build_api(
        settings, clock=clock, ids=ids, storage=storage, notifier=notifier, tenants=tenants
    )
    ledger = api.storage.tool_ledger("api")
    deps = ScheduleToolDeps(
        service=api.service,
        clock=clock,
        agents=api.agents,
        tenants=tenants or tenant_ceilings(settings),
        websites=website_bindings or ConfiguredWebsiteBindings(),
        agent_id=default_agent_id,
        keys=api.keys,
        scanner=SecretScanner(),
    )
    register_schedule_tools(registry, deps, **flags)
    governance = Governance(
        ledger=ledger,
        approvals=approvals,
        clock=clock,
        ids=ids,
        approval_timeout_seconds=approval_timeout_seconds,
    )
    return ToolsRole(ToolPipeline(registry, governance), registry, roster, api, ledger)
