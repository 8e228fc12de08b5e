"""The API role: ``ScheduleService`` over the API login, with ``PostgresNotifier`` waking
schedulers after create, update and resume commit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from scheduling.adapters.memory.directories import ConfiguredBrowserProfiles
from scheduling.bootstrap.choices import tenant_ceilings
from scheduling.bootstrap.owned import OwnedStorage
from scheduling.bootstrap.refusals import (
    DATABASE_URL_MISSING,
    FEATURE_DISABLED,
    StartupRefused,
    production_problems,
    refuse,
    release_problems,
)
from scheduling.config import Settings
from scheduling.domain.secrets import SecretScanner
from scheduling.ports.clock import Clock
from scheduling.ports.directories import (
    AgentRegistry,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.ids import IdGenerator
from scheduling.ports.keys import KeyRing
from scheduling.ports.notifier import ScheduleNotifier
from scheduling.ports.probe import Probe
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.schedules import ScheduleService
from scheduling.service.validation import DefinitionValidator, Scanner
from scheduling.storage import Storage, storage_for


class ScheduleServiceArgs(TypedDict):
    """What ``build_api`` constructs the ``ScheduleService`` with (kept on the role, so
    ``scheduling.testing.swap_service`` can build another class the same way)."""

    uow: UnitOfWorkFactory
    clock: Clock
    ids: IdGenerator
    validator: DefinitionValidator
    notifier: ScheduleNotifier | None
    probe: Probe | None
    keys: KeyRing


@dataclass
class ApiRole(OwnedStorage):
    service: ScheduleService
    uow: UnitOfWorkFactory
    principals: SchedulePrincipalDirectory
    agents: AgentRegistry
    profiles: ConfiguredBrowserProfiles
    storage: Storage
    owns_storage: bool
    keys: KeyRing
    """The deployment key ring (ADR 2100): PostgreSQL's seeded keys over the API role."""
    service_args: ScheduleServiceArgs


def build_api(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    probe: Probe | None = None,
    storage: Storage | None = None,
    notifier: ScheduleNotifier | None = None,
    scanner: Scanner | None = None,
    tenants: TenantConfiguration | None = None,
) -> ApiRole:
    """The schedule API's application service over the API role.

    Without ``storage`` the settings choose it and the role owns it (``close``
    releases it). Tests inject ``storage`` (then left open), a recording ``notifier``,
    and for a test of a test a deliberately weak ``scanner`` or other ``tenants``
    (a broken service subclass: ``scheduling.testing.swap_service``)."""
    problems = release_problems(settings)
    if not settings.api_enabled:
        problems.append(f"{FEATURE_DISABLED}: AGENT_SCHEDULE_API_ENABLED is off")
    owns_storage = storage is None
    if storage is None:
        if settings.storage == "postgres" and not (
            settings.api_database_url or settings.database_url
        ):
            refuse([*problems, f"{DATABASE_URL_MISSING}: no API database URL"])
        storage = storage_for(settings, pool_size=settings.api_pool_size)
    uow = storage.as_role("api")
    if notifier is None:
        notifier = storage.notifier("api")
    durable = settings.principal_directory == "durable"
    principals, agents = storage.directories("api", durable=durable)
    if settings.production:
        problems += production_problems(storage=storage, principals=principals)
    if problems:
        # A refused role never opened a connection: its pool holds nothing to release.
        raise StartupRefused(problems)
    profiles = ConfiguredBrowserProfiles()
    validator = DefinitionValidator(
        principals=principals,
        agents=agents,
        browser_profiles=profiles,
        tenants=tenants or tenant_ceilings(settings),
        scanner=scanner or SecretScanner(),
    )
    keys = storage.key_ring("api")
    args = ScheduleServiceArgs(
        uow=uow,
        clock=clock,
        ids=ids,
        validator=validator,
        notifier=notifier,
        probe=probe,
        keys=keys,
    )
    service = ScheduleService(**args)
    return ApiRole(service, uow, principals, agents, profiles, storage, owns_storage, keys, args)
