"""Every role in one process over memory adapters and allow-all admission (development and
demos only); production refuses it."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.adapters.memory.directories import (
    ConfiguredBrowserProfiles,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)
from scheduling.adapters.memory.uow import MemoryUnitOfWorkFactory
from scheduling.bootstrap.choices import tenant_ceilings
from scheduling.bootstrap.refusals import DEVELOPMENT_IN_PRODUCTION, StartupRefused
from scheduling.config import Settings
from scheduling.domain.secrets import SecretScanner
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.service.accounting import RunAccountant
from scheduling.service.admission import AllowAllAdmission
from scheduling.service.maintenance import MaintenanceService
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.schedule_worker import ScheduleWorker, WorkerSettings
from scheduling.service.schedules import ScheduleService
from scheduling.service.validation import DefinitionValidator


@dataclass
class DevelopmentStack:
    """Every role in one process over memory adapters (development and demos only)."""

    service: ScheduleService
    materializer: ScheduleMaterializer
    worker: ScheduleWorker
    maintenance: MaintenanceService
    uow: MemoryUnitOfWorkFactory
    principals: StaticPrincipalDirectory
    agents: StaticAgentRegistry


def build_development(settings: Settings, *, clock: Clock, ids: IdGenerator) -> DevelopmentStack:
    """Memory repositories, static directories and allow-all admission. Production
    refuses it; there is no run queue (PostgreSQL only)."""
    if settings.production:
        raise StartupRefused([f"{DEVELOPMENT_IN_PRODUCTION}: AGENT_SCHEDULE_ENVIRONMENT"])
    uow = MemoryUnitOfWorkFactory()
    principals, agents = StaticPrincipalDirectory(), StaticAgentRegistry()
    tenants = tenant_ceilings(settings)
    validator = DefinitionValidator(
        principals=principals,
        agents=agents,
        browser_profiles=ConfiguredBrowserProfiles(),
        tenants=tenants,
        scanner=SecretScanner(),
    )
    service = ScheduleService(uow=uow, clock=clock, ids=ids, validator=validator)
    materializer = ScheduleMaterializer(
        uow=uow,
        clock=clock,
        ids=ids,
        principals=principals,
        agents=agents,
        tenants=tenants,
        admission=AllowAllAdmission(),
    )
    accountant = RunAccountant(uow=uow, clock=clock, ids=ids)
    worker = ScheduleWorker(
        uow=uow,
        materializer=materializer,
        clock=clock,
        settings=WorkerSettings(
            batch_size=max(settings.scan_batch, 1),
            fallback_poll_seconds=max(settings.fallback_poll_seconds, 0.001),
        ),
        accountant=accountant,
    )
    maintenance = MaintenanceService(uow=uow, clock=clock, ids=ids)
    return DevelopmentStack(service, materializer, worker, maintenance, uow, principals, agents)
