"""The maintenance role: the terminal-retention purge (maintenance login) and the
``next_fire_at`` repair (scheduler login, which may advance that column)."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from scheduling.bootstrap.choices import retention_settings
from scheduling.bootstrap.refusals import (
    DATABASE_URL_MISSING,
    MEMORY_REPOSITORIES,
    production_problems,
    refuse,
    release_problems,
)
from scheduling.config import Settings
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.service.maintenance import MaintenanceService, Repair, RetentionSettings
from scheduling.storage import Storage, one_role_storage


@dataclass
class MaintenanceRole:
    purge: MaintenanceService
    repair: MaintenanceService
    tenants: tuple[str, ...]
    storages: list[Storage] = field(default_factory=list)
    """What the role opened itself (``close`` releases them)."""

    async def purge_once(self) -> dict[str, int]:
        """One batch of the retention sweep for every configured tenant."""
        return await self.purge.purge_all(list(self.tenants))

    async def repair_next_fire(self, schedule_id: UUID) -> Repair:
        return await self.repair.repair_next_fire(schedule_id)

    async def close(self) -> None:
        for storage in self.storages:
            await storage.close()


def build_maintenance(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    storage: Storage | None = None,
    retention: RetentionSettings | None = None,
) -> MaintenanceRole:
    """Purge through the maintenance role (tenant-scoped deletes); repair through the
    scheduler role, the one that may advance ``next_fire_at`` and append its event.

    Tests inject ``storage`` (not released by ``close``) and may override the
    ``retention`` the settings give."""
    problems = release_problems(settings)
    if storage is not None:
        if settings.production:
            problems += production_problems(storage=storage)
        if problems:
            refuse(problems)
        kept = retention or retention_settings(settings)
        return MaintenanceRole(
            purge=MaintenanceService(
                uow=storage.as_role("maintenance"), clock=clock, ids=ids, retention=kept
            ),
            repair=MaintenanceService(
                uow=storage.as_role("scheduler"), clock=clock, ids=ids, retention=kept
            ),
            tenants=settings.tenants,
        )
    if settings.storage != "postgres":
        problems.append(f"{MEMORY_REPOSITORIES}: maintenance runs against PostgreSQL only")
    purge_url = settings.maintenance_database_url or settings.database_url
    repair_fallback = None if settings.production else settings.database_url
    repair_url = settings.scheduler_database_url or repair_fallback
    if purge_url is None or repair_url is None:
        problems.append(f"{DATABASE_URL_MISSING}: maintenance or scheduler login URL missing")
    if problems or purge_url is None or repair_url is None:
        refuse(problems)
    retention = retention or retention_settings(settings)
    # Production may not SET LOCAL ROLE to the scheduler over the migration login.
    purge = one_role_storage(
        settings, "maintenance", settings.maintenance_database_url, fallback=settings.database_url
    )
    repair = one_role_storage(
        settings, "scheduler", settings.scheduler_database_url, fallback=repair_fallback
    )
    return MaintenanceRole(
        purge=MaintenanceService(
            uow=purge.as_role("maintenance"), clock=clock, ids=ids, retention=retention
        ),
        repair=MaintenanceService(
            uow=repair.as_role("scheduler"), clock=clock, ids=ids, retention=retention
        ),
        tenants=settings.tenants,
        storages=[purge, repair],
    )
