"""In-memory ``AdmissionRepository`` and ``PendingAccountsRepository``: the same reads
as the PostgreSQL ones over the unit of work's working tables. Memory has no advisory
lock (a memory unit of work already refuses to publish over a concurrent commit), so
``lock_tenant`` records the lock and takes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from uuid import UUID

from scheduling.adapters.memory.store import Tables, Working
from scheduling.domain.admission import TenantUsage
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.ports.records import RunRecord, RunStatus

_ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
_TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
_DAY = timedelta(days=1)
_MONTH = timedelta(days=30)


class _Reads:
    def __init__(self, uow: Working) -> None:
        self._uow = uow

    @property
    def t(self) -> Tables:
        return self._uow.tables()

    def _visible(self, run: RunRecord) -> bool:
        return self._uow.scope.sees(run.tenant_id, run.principal_id)


class MemoryAdmissionRepository(_Reads):
    """See ``scheduling.ports.repositories.AdmissionRepository``."""

    def __init__(self, uow: Working) -> None:
        super().__init__(uow)
        self.locked: set[str] = set()

    async def lock_tenant(self, tenant_id: str) -> None:
        self._uow.tables()  # refuses a closed unit of work, like the lock statement
        self.locked.add(tenant_id)

    async def usage(self, tenant_id: str, now: datetime) -> TenantUsage:
        active = minute = 0
        reserved = daily = monthly = Decimal(0)
        for run in self.t.runs.values():
            if run.tenant_id != tenant_id or "schedule_id" not in run.metadata:
                continue
            if not self._visible(run):
                continue
            if run.created_at > now - timedelta(minutes=1):
                minute += 1
            if run.status in _ACTIVE:
                active += 1
                max_cost = run.limits.get("max_cost")
                reserved += Decimal(str(max_cost)) if max_cost is not None else Decimal(0)
            elif run.finished_at is not None:
                if run.finished_at > now - _DAY:
                    daily += run.cost
                if run.finished_at > now - _MONTH:
                    monthly += run.cost
        return TenantUsage(
            active_runs=active,
            materialized_last_minute=minute,
            active_reserved_cost=reserved,
            daily_committed_cost=daily,
            monthly_committed_cost=monthly,
        )


class MemoryPendingAccountsRepository(_Reads):
    """See ``scheduling.ports.repositories.PendingAccountsRepository``."""

    async def claim(self, limit: int) -> list[UUID]:
        """One process, one accountant: every pending run is this claim's."""
        return await self.pending(limit)

    async def pending(self, limit: int) -> list[UUID]:
        t = self.t
        accounted = {
            (e.schedule_id, str(e.payload.get("occurrence_id")))
            for e in t.events.values()
            if e.event_type == RUN_ACCOUNTED
        }
        found: list[RunRecord] = []
        for occ in t.occurrences.values():
            if occ.disposition is not OccurrenceDisposition.MATERIALIZED or occ.run_id is None:
                continue
            run = t.runs.get(occ.run_id)
            if run is None or run.status not in _TERMINAL or not self._visible(run):
                continue
            if (occ.schedule_id, str(occ.id)) in accounted:
                continue
            found.append(run)
        found.sort(key=lambda r: (r.finished_at is None, r.finished_at or r.created_at, r.id.bytes))
        return [run.id for run in found[:limit]]
