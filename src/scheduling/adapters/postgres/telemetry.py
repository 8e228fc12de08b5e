"""``TelemetrySource`` over PostgreSQL: aggregates computed from committed rows at scrape
time (counts, sums and histogram buckets in SQL; no row identifier leaves the query)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from scheduling.adapters.postgres.admission import COMMITTED_COST, COST_WINDOWS
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.clock import Clock
from scheduling.ports.telemetry import (
    DURATION_BUCKETS,
    LAG_BUCKETS,
    SPAN_BUCKETS,
    Buckets,
    Histogram,
    TelemetrySnapshot,
)

SCHEDULED_PRIORITY = 10
# The run queue's lanes (priority classes): 0 is interactive, every other class async.
LANES = (("interactive", "priority = 0"), ("async", "priority <> 0"))


def _histogram_sql(expression: str, source: str, buckets: Buckets) -> str:
    cuts = ", ".join(
        f"count(*) FILTER (WHERE {expression} <= {b}) AS b{i}" for i, b in enumerate(buckets)
    )
    # Every fragment is a constant of this module (no input reaches the SQL text).
    return f"SELECT {cuts}, count(*) AS n, coalesce(sum({expression}), 0) AS s FROM {source}"  # noqa: S608


class PostgresTelemetry:
    def __init__(
        self, engine: AsyncEngine, clock: Clock, ceilings: TenantCeilings | None = None
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._ceilings = ceilings

    async def _histogram(self, conn: Any, expression: str, source: str, b: Buckets) -> Histogram:
        row = (await conn.execute(text(_histogram_sql(expression, source, b)))).one()
        counts = tuple((bound, int(row[i])) for i, bound in enumerate(b))
        return Histogram(counts, int(row[len(b)]), float(row[len(b) + 1]))

    async def snapshot(self) -> TelemetrySnapshot:
        now = self._clock.now()
        async with self._engine.connect() as conn:

            async def q(sql: str, **params: Any) -> Any:
                return await conn.execute(text(sql), params)

            due = (
                await q(
                    "SELECT count(*) FROM schedules WHERE state = 'ACTIVE' AND next_fire_at <= :n",
                    n=now,
                )
            ).scalar_one()
            dispositions = {
                str(r[0]): int(r[1])
                for r in await q(
                    "SELECT disposition, count(*) FROM schedule_occurrences GROUP BY 1"
                )
            }
            lag = await self._histogram(
                conn,
                "extract(epoch FROM (coalesce(materialized_at, created_at) - nominal_fire_at))",
                "schedule_occurrences",
                LAG_BUCKETS,
            )
            coalesced = (
                await q(
                    "SELECT coalesce(sum((payload->>'count')::bigint), 0) FROM process_events"
                    " WHERE event_type = 'schedule.misfires_coalesced'"
                )
            ).scalar_one()
            # The outage span: its oldest coalesced instant to the decision that closed
            # it (the event's time), as the scheduler role measures it.
            span = await self._histogram(
                conn,
                "extract(epoch FROM (occurred_at - (payload->>'first_nominal_at')::timestamptz))",
                "process_events WHERE event_type = 'schedule.misfires_coalesced'",
                SPAN_BUCKETS,
            )
            active = {
                str(r[0]): int(r[1])
                for r in await q(
                    "SELECT tenant_id, count(*) FROM runs WHERE priority = :p"
                    " AND status IN ('QUEUED', 'RUNNING') GROUP BY 1",
                    p=SCHEDULED_PRIORITY,
                )
            }
            paused = (
                await q(
                    "SELECT count(*) FROM process_events WHERE event_type = 'schedule.auto_paused'"
                )
            ).scalar_one()
            outcomes = {
                str(r[0]): int(r[1])
                for r in await q(
                    "SELECT status, count(*) FROM runs WHERE priority = :p GROUP BY 1",
                    p=SCHEDULED_PRIORITY,
                )
            }
            terminal = f"runs WHERE priority = {SCHEDULED_PRIORITY} AND finished_at IS NOT NULL"
            duration = await self._histogram(
                conn, "extract(epoch FROM (finished_at - created_at))", terminal, DURATION_BUCKETS
            )
            cost = (
                await q(
                    "SELECT coalesce(sum(cost), 0) FROM runs WHERE priority = :p",
                    p=SCHEDULED_PRIORITY,
                )
            ).scalar_one()
            cancel = await self._histogram(
                conn,
                "extract(epoch FROM (r.finished_at - e.occurred_at))",
                "runs r JOIN session_events e ON e.run_id = r.id"
                " AND e.event_type = 'run.cancelled'",
                LAG_BUCKETS,
            )
            # Against the ceilings: the committed cost admission charges them with.
            windows: dict[tuple[str, str], Decimal] = {}
            for window, width in COST_WINDOWS:
                for r in await conn.execute(COMMITTED_COST, {"since": now - width}):
                    windows[(str(r[0]), window)] = Decimal(r[1])
            claim_latency, reclaims = {}, {}
            for lane, predicate in LANES:
                claim_latency[lane] = await self._histogram(
                    conn,
                    "extract(epoch FROM (first_claimed_at - greatest(created_at, scheduled_for)))",
                    f"runs WHERE first_claimed_at IS NOT NULL AND {predicate}",
                    LAG_BUCKETS,
                )
                reclaims[lane] = int(
                    (
                        await q(
                            # A constant predicate of this module (no input in the text).
                            f"SELECT coalesce(sum(lease_reclaims), 0) FROM runs WHERE {predicate}"  # noqa: S608
                        )
                    ).scalar_one()
                )
        ceilings: dict[tuple[str, str], Decimal] = {}
        if self._ceilings is not None:
            for tenant, _ in list(windows) or []:
                ceilings[(tenant, "daily")] = self._ceilings.max_daily_cost
                ceilings[(tenant, "monthly")] = self._ceilings.max_monthly_cost
        return TelemetrySnapshot(
            due_schedules=int(due),
            occurrences=dispositions,
            lag=lag,
            misfires_coalesced=int(coalesced),
            outage_span=span,
            active_scheduled_runs=active,
            auto_paused=int(paused),
            run_outcomes=outcomes,
            run_duration=duration,
            run_cost=Decimal(cost),
            cancellation_latency=cancel,
            scheduled_cost=windows,
            cost_ceiling=ceilings,
            claim_latency=claim_latency,
            lease_reclaims=reclaims,
        )
