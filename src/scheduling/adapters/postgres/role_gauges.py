"""Scrape-time gauges of the scheduler's and run worker's metrics ports (ADR 1510), read
through the role's own login (never the trusted one): counts and sums, no row
identifier leaves the query. A scheduled run is one whose creation payload links a
schedule (``metadata ? 'schedule_id'``). The daily and monthly cost is admission's own
committed cost (``admission.COMMITTED_COST``)."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import text

from scheduling.adapters.postgres.admission import COMMITTED_COST, COST_WINDOWS
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.clock import Clock
from scheduling.ports.telemetry import ScheduledRunGauges

_DUE = text("SELECT count(*) FROM schedules WHERE state = 'ACTIVE' AND next_fire_at <= :now")
_ACTIVE = text(
    "SELECT tenant_id, count(*) FROM runs WHERE metadata ? 'schedule_id'"
    " AND status IN ('QUEUED', 'RUNNING') GROUP BY 1"
)


class PostgresSchedulerGauges:
    def __init__(self, uow: PostgresUnitOfWorkFactory, clock: Clock) -> None:
        self._uow, self._clock = uow, clock

    async def due_schedules(self) -> int:
        async with self._uow.begin() as uow:
            return int((await uow.tx.execute(_DUE, {"now": self._clock.now()})).scalar_one())


class PostgresRunGauges:
    def __init__(
        self, uow: PostgresUnitOfWorkFactory, clock: Clock, ceilings: TenantCeilings | None
    ) -> None:
        self._uow, self._clock, self._ceilings = uow, clock, ceilings

    async def scheduled_runs(self) -> ScheduledRunGauges:
        now = self._clock.now()
        cost: dict[tuple[str, str], Decimal] = {}
        async with self._uow.begin() as uow:
            active = {str(t): int(n) for t, n in await uow.tx.execute(_ACTIVE)}
            for window, width in COST_WINDOWS:
                since = now - width
                for tenant, total in await uow.tx.execute(COMMITTED_COST, {"since": since}):
                    cost[(str(tenant), window)] = Decimal(total)
        ceiling: dict[tuple[str, str], Decimal] = {}
        if self._ceilings is not None:
            for tenant in sorted({t for t, _ in cost} | set(active)):
                ceiling[(tenant, "daily")] = self._ceilings.max_daily_cost
                ceiling[(tenant, "monthly")] = self._ceilings.max_monthly_cost
        return ScheduledRunGauges(active=active, cost=cost, ceiling=ceiling)
