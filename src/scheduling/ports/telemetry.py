"""The telemetry port: tenant-safe aggregates of the spec's "Tracked metrics", read from
authoritative rows (never an identifier of a schedule, run or session, never text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

Buckets = tuple[float, ...]
LAG_BUCKETS: Buckets = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
DURATION_BUCKETS: Buckets = (1, 5, 10, 30, 60, 300, 900, 1800, 3600, 14400)
SPAN_BUCKETS: Buckets = (60, 600, 3600, 21600, 86400, 604800, 2592000, 31536000)


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts per upper bound (``le``), the total count and the sum."""

    buckets: tuple[tuple[float, int], ...]
    count: int
    total: float


@dataclass(frozen=True)
class TelemetrySnapshot:
    due_schedules: int = 0
    occurrences: dict[str, int] = field(default_factory=dict)  # by disposition
    lag: Histogram | None = None  # nominal instant -> decision, seconds
    misfires_coalesced: int = 0
    outage_span: Histogram | None = None
    active_scheduled_runs: dict[str, int] = field(default_factory=dict)  # by tenant
    auto_paused: int = 0
    run_outcomes: dict[str, int] = field(default_factory=dict)  # scheduled, by status
    run_duration: Histogram | None = None
    run_cost: Decimal = Decimal(0)
    cancellation_latency: Histogram | None = None
    scheduled_cost: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    cost_ceiling: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    # Claim facts (revision 0006, ADR 1512): claimable to first claim by lane
    # ("interactive", "async"), and claims of an expired lease by lane.
    claim_latency: dict[str, Histogram] = field(default_factory=dict)
    lease_reclaims: dict[str, int] = field(default_factory=dict)


class TelemetrySource(Protocol):
    async def snapshot(self) -> TelemetrySnapshot: ...


# ------------------------------------------------------------ role metrics (ADR 1510)


@dataclass(frozen=True)
class ScheduledRunGauges:
    """Fleet state a run worker's metrics port reports at scrape time: queued or running
    scheduled runs by tenant, rolling scheduled cost by (tenant, window) and the tenant
    ceiling of each window."""

    active: dict[str, int] = field(default_factory=dict)
    cost: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    ceiling: dict[tuple[str, str], Decimal] = field(default_factory=dict)


class SchedulerGauges(Protocol):
    async def due_schedules(self) -> int: ...


class RunGauges(Protocol):
    async def scheduled_runs(self) -> ScheduledRunGauges: ...
