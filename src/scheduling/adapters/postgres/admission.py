"""The PostgreSQL ``ScheduleAdmissionController`` (spec "Ports", "Capacity, fairness, and cost").

Inside the materialization transaction it first holds a transaction-scoped advisory
lock on the tenant (``pg_advisory_xact_lock``: the durable store's context read takes
it, ADR 1750; with another store admission sends it), then reads the tenant's committed
scheduled runs in one statement: active runs and their ``max_cost`` reservations,
runs created in the last minute (the rate), and the committed cost of scheduled runs
finished in the rolling day and the rolling 30 days. The lock is held until the
materializer commits, so two schedules racing for the last slot serialize before
either creates a run. A scheduled run is one whose ``metadata`` names a schedule.
Every instant is the Clock-supplied ``now`` parameter; SQL never reads ``now()``.

The read is bounded by its windows (ADR 1702): only rows that are active, finished in
the rolling 30 days, or created in the last minute can contribute to any term, so the
WHERE clause says exactly that and three indexes (tenant + status, tenant +
finished_at, tenant + created_at) serve it as a bitmap OR; its cost follows the
windows, not the tenant's history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import BigInteger, Numeric, and_, any_, bindparam, case, cast, func, or_, select
from sqlalchemy.dialects.postgresql import array

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.repositories.schedules import advisory_key
from scheduling.adapters.postgres.tables import runs
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.admission import DEFAULT_BACKOFF_SECONDS, TenantUsage, decide_admission
from scheduling.domain.reasons import reason
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.admission import AdmissionOutcome, ScheduleAdmissionDecision
from scheduling.ports.directories import TenantConfiguration
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.unit_of_work import UnitOfWork

NOT_CONFIGURED = reason(
    "schedule.admission.not_configured", "The tenant has no scheduling ceilings to admit against"
)

ACTIVE = ("QUEUED", "RUNNING")
DAY = timedelta(days=1)
MONTH = timedelta(days=30)


@lru_cache(maxsize=4096)
def admission_lock_key(tenant_id: str) -> int:
    """The advisory-lock key that serializes one tenant's admissions. Cached: a pure
    function of the tenant, hashed twice per decision otherwise (ADR 2580)."""
    return advisory_key(f"scheduling.admission:{tenant_id}")


def usage_query() -> Any:
    """The usage read, built once with bound instants (every call binds only values).
    The materialization context read carries it as a subquery (ADR 2250)."""
    # = ANY(ARRAY[...]) is what PostgreSQL makes of IN (...); unlike SQLAlchemy's
    # expanding IN it compiles to fixed SQL a prepared statement can keep.
    active = runs.c.status == any_(array(ACTIVE))
    finished = runs.c.finished_at
    rate_since = bindparam("rate_since", type_=runs.c.created_at.type)
    day_since = bindparam("day_since", type_=finished.type)
    month_since = bindparam("month_since", type_=finished.type)
    # The reservation is the run's pinned max_cost (RunLimits JSON: a decimal string).
    reserve = func.coalesce(cast(runs.c.limits["max_cost"].astext, Numeric(18, 6)), 0)
    zero = Decimal(0)
    return select(
        func.count().filter(active),
        func.count().filter(runs.c.created_at > rate_since),
        func.coalesce(func.sum(case((active, reserve), else_=zero)), zero),
        func.coalesce(
            func.sum(case((and_(~active, finished > day_since), runs.c.cost), else_=zero)), zero
        ),
        func.coalesce(
            func.sum(case((and_(~active, finished > month_since), runs.c.cost), else_=zero)), zero
        ),
    ).where(
        runs.c.tenant_id == bindparam("tenant_id", type_=runs.c.tenant_id.type),
        or_(active, finished > month_since, runs.c.created_at > rate_since),
        runs.c.metadata.has_key("schedule_id"),
    )


_USAGE = Prepared(usage_query())


def committed_cost_query() -> Any:
    """Every tenant's committed scheduled-run cost since the bound ``since``: the cost
    of terminal scheduled runs finished in the window, exactly the term ``usage_query``
    charges a daily or monthly ceiling with. The cost gauges shown against those
    ceilings read this, so the figure an operator compares with a ceiling is the one
    admission enforces (not the runs created in the window, nor a running run's
    partial cost)."""
    active = runs.c.status == any_(array(ACTIVE))
    since = bindparam("since", type_=runs.c.finished_at.type)
    return (
        select(runs.c.tenant_id, func.coalesce(func.sum(runs.c.cost), Decimal(0)))
        .where(~active, runs.c.finished_at > since, runs.c.metadata.has_key("schedule_id"))
        .group_by(runs.c.tenant_id)
    )


COMMITTED_COST = committed_cost_query()
COST_WINDOWS = (("daily", DAY), ("monthly", MONTH))
"""The gauges' windows: admission's rolling day and rolling 30 days."""


def usage_params(tenant_id: str, now: datetime) -> dict[str, Any]:
    """The bound values of ``usage_query`` for ``tenant_id`` at ``now``."""
    return {
        "tenant_id": tenant_id,
        "rate_since": now - timedelta(minutes=1),
        "day_since": now - DAY,
        "month_since": now - MONTH,
    }


def usage_of(values: Sequence[Any]) -> TenantUsage:
    """``TenantUsage`` from the five values of one ``usage_query`` row, in order."""
    return TenantUsage(
        active_runs=int(values[0]),
        materialized_last_minute=int(values[1]),
        active_reserved_cost=Decimal(values[2]),
        daily_committed_cost=Decimal(values[3]),
        monthly_committed_cost=Decimal(values[4]),
    )


_LOCK = Prepared(select(func.pg_advisory_xact_lock(bindparam("key", type_=BigInteger))))


async def tenant_usage(uow: UnitOfWork, tenant_id: str, now: datetime) -> TenantUsage:
    """The tenant's committed scheduled-run usage at ``now`` (one statement)."""
    return await uow.admission.usage(tenant_id, now)


class PostgresAdmissionRepository:
    """See ``scheduling.ports.repositories.AdmissionRepository``: the unit of work's
    transaction, its advisory locks and the prepared usage read."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def lock_tenant(self, tenant_id: str) -> None:
        """Serialize the tenant's admissions until this transaction ends. The durable
        store's context read already took the lock (ADR 1750); another store did not."""
        key = admission_lock_key(tenant_id)
        if key in self._tx.advisory_locks:
            return
        await self._tx.fetch(_LOCK, {"key": key})
        self._tx.advisory_locks.add(key)

    async def usage(self, tenant_id: str, now: datetime) -> TenantUsage:
        """The usage read; if the materialization context read already carried it for
        this tenant and instant, after the tenant lock (ADR 2250), that value, once."""
        prefetched = self._tx.take_usage(tenant_id, now)
        if prefetched is not None:
            return prefetched
        (row,) = await self._tx.fetch(_USAGE, usage_params(tenant_id, now))
        return usage_of(row)


class PostgresAdmissionController:
    """Admission from committed rows under a tenant-scoped transaction advisory lock."""

    def __init__(
        self,
        tenants: TenantConfiguration,
        *,
        backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
        probe: Probe | None = None,
    ) -> None:
        self._tenants = tenants
        self._backoff = backoff_seconds
        self._probe: Probe = probe or NullProbe()

    async def check(
        self, uow: UnitOfWork, tenant_id: str, revision: ScheduleRevision, now: datetime
    ) -> ScheduleAdmissionDecision:
        ceilings = await self._tenants.ceilings(tenant_id)
        if ceilings is None:
            return ScheduleAdmissionDecision(AdmissionOutcome.REJECT, NOT_CONFIGURED)
        await self._lock(uow, tenant_id)
        await self._probe.step("materialize.admission_locked")
        usage = await uow.admission.usage(tenant_id, now)
        return decide_admission(usage, ceilings, revision, backoff_seconds=self._backoff)

    async def _lock(self, uow: UnitOfWork, tenant_id: str) -> None:
        """Serialize the tenant's admissions until this transaction ends (the unit of
        work's admission repository sends no statement if the context read took it)."""
        await uow.admission.lock_tenant(tenant_id)
