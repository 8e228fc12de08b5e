"""Maintenance commands: the terminal-retention purge and the next_fire_at repair.

Purge (spec "Persistence"): per tenant, at most ``terminal_purge_batch`` COMPLETED or
CANCELLED schedules whose terminal ``updated_at`` is at least
``terminal_retention_days`` old are deleted with their idempotency keys, occurrences
and revisions, in dependency order. The repository takes the transaction-scoped
advisory lock and ``FOR UPDATE SKIP LOCKED``; sessions, runs and process events are
never deleted.

Repair (spec "Cadence and civil time"): ``next_fire_at`` is a cache. It is wrong when
an ACTIVE schedule has none, when it is not a nominal instant of the current cadence,
or when it is not after the last recorded nominal instant (it would decide an instant
twice). The repaired value is the first nominal instant strictly after the later of
that last recorded instant and now (never a backfill, never early); a one-time
schedule with no recorded occurrence keeps its sole instant so the scheduler decides
it. ``schedule.next_fire_repaired`` is appended before the cache is replaced, in the
same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from scheduling.domain.cadence import Cadence, OnceCadence
from scheduling.domain.errors import NotFoundError, ValidationError
from scheduling.domain.events import next_fire_repaired
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.engine import first_at_or_after, next_after
from scheduling.domain.schedule import ScheduleState
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.schedules import not_found, to_record

INVALID_RETENTION = reason(
    "schedule.retention.invalid_settings",
    "terminal retention days, purge interval or purge batch is not positive",
)

MAINTENANCE_ACTOR = "maintenance"


@dataclass(frozen=True)
class RetentionSettings:
    """The shipped values are 30 days, 3,600 seconds and 100 records."""

    terminal_retention_days: int = 30
    purge_interval_seconds: int = 3600
    terminal_purge_batch: int = 100

    def __post_init__(self) -> None:
        values = (
            self.terminal_retention_days,
            self.purge_interval_seconds,
            self.terminal_purge_batch,
        )
        if any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
            raise ValidationError(INVALID_RETENTION, "retention settings must be positive")


@dataclass(frozen=True)
class Repair:
    """The outcome of one repair check: ``repaired`` is False when the cache was right."""

    schedule_id: UUID
    previous: datetime | None
    current: datetime | None
    repaired: bool


class MaintenanceService:
    """Runs in the maintenance role: tenant-scoped purge, trusted-scope repair."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        clock: Clock,
        ids: IdGenerator,
        retention: RetentionSettings | None = None,
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._ids = ids
        self.retention = retention or RetentionSettings()

    async def purge_terminal(self, tenant_id: str) -> int:
        """One batch of the retention sweep for ``tenant_id``; returns schedules deleted."""
        before = self._clock.now() - timedelta(days=self.retention.terminal_retention_days)
        async with self._uow.begin(tenant_id=tenant_id) as uow:
            deleted = await uow.schedules.purge_terminal(
                tenant_id, before, self.retention.terminal_purge_batch
            )
            await uow.commit()
        return deleted

    async def purge_all(self, tenant_ids: list[str]) -> dict[str, int]:
        """One batch per tenant (a crashed or skipped tenant is retried next interval)."""
        return {tenant: await self.purge_terminal(tenant) for tenant in tenant_ids}

    async def repair_next_fire(self, schedule_id: UUID) -> Repair:
        """Check one schedule's cache and repair it if wrong (see the module docstring)."""
        async with self._uow.begin() as uow:
            try:
                schedule = await uow.schedules.get(schedule_id, None, for_update=True)
            except NotFoundError:
                raise not_found() from None
            stored = schedule.next_fire_at
            if schedule.state is not ScheduleState.ACTIVE:
                return Repair(schedule_id, stored, stored, repaired=False)
            revision = await uow.schedules.get_revision(
                schedule_id, schedule.current_revision, None
            )
            cadence = revision.cadence_value
            latest = await uow.occurrences.latest(schedule_id)
            last = None if latest is None else latest.nominal_fire_at
            if stored is not None and _consistent(cadence, stored, last):
                return Repair(schedule_id, stored, stored, repaired=False)
            now = max(self._clock.now(), schedule.updated_at)
            if isinstance(cadence, OnceCadence):
                expected = cadence.at if last is None else None
            else:
                expected = next_after(cadence, now if last is None else max(last, now))
            if expected == stored:
                return Repair(schedule_id, stored, stored, repaired=False)
            event = next_fire_repaired(
                self._ids.new_uuid(),
                schedule,
                previous=stored,
                repaired=expected,
                actor=MAINTENANCE_ACTOR,
                at=now,
            )
            await uow.events.append(to_record(event))
            updated = schedule.model_copy(update={"next_fire_at": expected, "updated_at": now})
            await uow.schedules.mutate(ScheduleCommand(schedule, updated, None))
            await uow.commit()
        return Repair(schedule_id, stored, expected, repaired=True)


def _consistent(cadence: Cadence, stored: datetime, last: datetime | None) -> bool:
    if last is not None and stored <= last:
        return False
    if isinstance(cadence, OnceCadence):
        return stored == cadence.at
    return first_at_or_after(cadence, stored) == stored
