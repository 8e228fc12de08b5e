"""The run-worker role's metrics: what its claims and attempts observed
(``RunObserver``), and fleet gauges of scheduled runs read at scrape time.

* Claim latency, per lane (``interactive``: priority class 0, ``async``: every other
  class; spec "Configuration"): from the moment a run became claimable
  (``max(created_at, scheduled_for)``) to its first claim. Only first claims count; a
  claim of a run whose previous lease expired (a crashed or drained holder) is a lease
  reclaim instead.
* Outcome, duration (creation to terminal) and cost of each scheduled run this worker
  ended, and of each it saw cancelled under it.
* Cancellation latency: the cancel write (the run's ``finished_at``) to this worker's
  fenced stop, i.e. how long a cancelled run kept executing.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduling.domain.errors import NotFoundError
from scheduling.ports.records import TERMINAL_RUN_STATUSES, RunRecord, RunStatus
from scheduling.ports.runtime import ClaimedRun, RunPriority, priority_class
from scheduling.ports.telemetry import DURATION_BUCKETS, LAG_BUCKETS, RunGauges
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime.worker import RunOutcome

LANES = tuple(p.name.lower() for p in RunPriority)


def lane_of(run: RunRecord) -> str:
    return priority_class(run.priority).name.lower()


def is_scheduled(run: RunRecord) -> bool:
    return "schedule_id" in run.metadata


class RunWorkerMetrics:
    """``RunObserver`` feeding a registry of its own (one per role process). ``reader``
    reads a run whose lease this worker lost (was it cancelled?); ``gauges`` the fleet
    state at scrape."""

    def __init__(
        self, reader: UnitOfWorkFactory | None = None, gauges: RunGauges | None = None
    ) -> None:
        self._reader, self._gauges = reader, gauges
        self.registry = CollectorRegistry()
        r = self.registry
        self.claim_latency = Histogram(
            "scheduling_claim_latency_seconds",
            "Claimable to first claim, by lane (interactive or async)",
            ["lane"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.reclaims = Counter(
            "scheduling_lease_reclaims",
            "Claims of a run whose previous lease had expired, by lane",
            ["lane"],
            registry=r,
        )
        for lane in LANES:
            self.claim_latency.labels(lane)
            self.reclaims.labels(lane)
        self.outcomes = Counter(
            "scheduling_run_outcomes",
            "Scheduled runs ended, by terminal status",
            ["status"],
            registry=r,
        )
        for status in sorted(s.value for s in TERMINAL_RUN_STATUSES):
            self.outcomes.labels(status)
        self.duration = Histogram(
            "scheduling_run_duration_seconds",
            "Scheduled run creation to terminal",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.cost = Counter(
            "scheduling_run_cost", "Committed cost of scheduled runs ended", registry=r
        )
        self.cancellation = Histogram(
            "scheduling_cancellation_latency_seconds",
            "Run cancel write to the worker's fenced stop",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.active = Gauge(
            "scheduling_active_scheduled_runs",
            "Queued or running scheduled runs (read at scrape)",
            ["tenant"],
            registry=r,
        )
        self.scheduled_cost = Gauge(
            "scheduling_scheduled_cost",
            "Committed cost of scheduled runs ended in the rolling window, as admission charges"
            " the ceiling (read at scrape)",
            ["tenant", "window"],
            registry=r,
        )
        self.ceiling = Gauge(
            "scheduling_scheduled_cost_ceiling",
            "Tenant ceiling for the rolling window",
            ["tenant", "window"],
            registry=r,
        )

    def claimed(self, claimed: ClaimedRun) -> None:
        run = claimed.run
        if claimed.recovered:
            self.reclaims.labels(lane_of(run)).inc()
        elif run.first_claimed_at == claimed.claimed_at:  # this claim wrote it: the first
            claimable = max(run.created_at, run.scheduled_for)
            seconds = (claimed.claimed_at - claimable).total_seconds()
            self.claim_latency.labels(lane_of(run)).observe(max(seconds, 0.0))

    async def ended(self, outcome: RunOutcome, run: RunRecord) -> None:
        if outcome.lease_lost:
            current = await self._current(run)
            if current is None or current.status is not RunStatus.CANCELLED:
                return  # another holder took it over: not this worker's end
            if current.finished_at is not None:
                stopped = (outcome.ended_at - current.finished_at).total_seconds()
                self.cancellation.observe(max(stopped, 0.0))
            run = current
        if run.status not in TERMINAL_RUN_STATUSES or not is_scheduled(run):
            return
        self.outcomes.labels(run.status.value).inc()
        if run.finished_at is not None:
            span = (run.finished_at - run.created_at).total_seconds()
            self.duration.observe(max(span, 0.0))
        self.cost.inc(float(run.cost))

    async def _current(self, run: RunRecord) -> RunRecord | None:
        if self._reader is None:
            return None
        try:
            async with self._reader.begin() as uow:
                return await uow.runs.get(run.id, None)
        except NotFoundError:
            return None

    async def refresh(self) -> None:
        if self._gauges is None:
            return
        state = await self._gauges.scheduled_runs()
        # Gauges of tenants that left the result must not linger at their last value.
        for gauge in (self.active, self.scheduled_cost, self.ceiling):
            gauge.clear()
        for tenant, n in sorted(state.active.items()):
            self.active.labels(tenant).set(n)
        for (tenant, window), value in sorted(state.cost.items()):
            self.scheduled_cost.labels(tenant, window).set(float(value))
        for (tenant, window), value in sorted(state.ceiling.items()):
            self.ceiling.labels(tenant, window).set(float(value))
