"""The scheduler role's metrics: what its due scans and materialization decisions
observed (``PassObserver``), and the due-schedule gauge read at scrape time.

Family names and meanings match the API's ``/metrics`` (ADR 1504) where both exist;
``scheduling_scan_duration_seconds`` exists only here (a pass is a process fact)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.domain.schedule import ScheduleState
from scheduling.ports.telemetry import LAG_BUCKETS, SPAN_BUCKETS, SchedulerGauges
from scheduling.service.materializer import MaterializeResult

SCAN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class SchedulerMetrics:
    """``PassObserver`` feeding a registry of its own (one per role process)."""

    def __init__(self, gauges: SchedulerGauges | None = None) -> None:
        self._gauges = gauges
        self.registry = CollectorRegistry()
        r = self.registry
        self.due = Gauge(
            "scheduling_due_schedules",
            "ACTIVE schedules whose next_fire_at has passed (read at scrape)",
            registry=r,
        )
        self.scan = Histogram(
            "scheduling_scan_duration_seconds",
            "One due-scan pass of this scheduler (the read and its materializations)",
            buckets=SCAN_BUCKETS,
            registry=r,
        )
        self.scanned_due = Counter(
            "scheduling_scanned_due_schedules",
            "Due schedule ids read by this scheduler's scans",
            registry=r,
        )
        self.occurrences = Counter(
            "scheduling_occurrences",
            "Occurrences this scheduler decided, by disposition",
            ["disposition"],
            registry=r,
        )
        for disposition in OccurrenceDisposition:
            self.occurrences.labels(disposition.value)
        self.lag = Histogram(
            "scheduling_due_to_materialized_lag_seconds",
            "Nominal instant to decision (p50/p95/p99 via histogram_quantile)",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.coalesced = Counter(
            "scheduling_misfires_coalesced",
            "Nominal instants coalesced by misfire handling",
            registry=r,
        )
        self.outage = Histogram(
            "scheduling_outage_span_seconds",
            "Oldest coalesced instant to the decision that closed the outage",
            buckets=SPAN_BUCKETS,
            registry=r,
        )
        self.auto_paused = Counter(
            "scheduling_auto_paused", "Schedules auto-paused by the failure limit", registry=r
        )

    def scanned(self, due: int, seconds: float) -> None:
        self.scan.observe(seconds)
        self.scanned_due.inc(due)

    def decided(self, result: MaterializeResult) -> None:
        lag = result.lag_seconds
        occurrence = result.occurrence
        if lag is None or occurrence is None:  # not a decision made by this call
            return
        self.lag.observe(max(lag, 0.0))
        self.occurrences.labels(occurrence.disposition.value).inc()
        if result.coalesced:
            self.coalesced.inc(result.coalesced)
        if result.coalesced_first is not None:
            span = (occurrence.created_at - result.coalesced_first).total_seconds()
            self.outage.observe(max(span, 0.0))
        if result.state_after is ScheduleState.PAUSED:
            self.auto_paused.inc()

    async def refresh(self) -> None:
        if self._gauges is not None:
            self.due.set(await self._gauges.due_schedules())
