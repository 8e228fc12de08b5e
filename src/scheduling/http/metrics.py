"""``/metrics``: the spec's tracked metrics (from ``TelemetrySource``) and the edge's own
request metrics, in the Prometheus text format.

Labels are tenant-safe by construction: ``tenant``, ``disposition``, ``status``,
``window``, ``method``, ``route`` (the template, never a raw path) and ``le``. No
schedule, run or session identifier, title, instruction or token is ever a label or a
sample (a test scrapes a stack full of them and finds none).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from scheduling.ports.telemetry import Histogram as Buckets
from scheduling.ports.telemetry import TelemetrySnapshot

ALLOWED_LABELS = frozenset(
    {"tenant", "disposition", "status", "window", "method", "route", "lane", "le"}
)


class RequestMetrics:
    """Per-process request counters and latency, labelled by method, route template and
    status."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "scheduling_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "scheduling_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            registry=self.registry,
        )

        # Label children by key, so a request costs two dict look-ups, not two
        # ``labels()`` calls (each validates, joins and locks). The keys are bounded:
        # methods from a fixed set, route templates, statuses.
        self._counted: dict[tuple[str, str, int], Counter] = {}
        self._timed: dict[tuple[str, str], Histogram] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        counted = self._counted.get((method, route, status))
        if counted is None:
            counted = self._counted.setdefault(
                (method, route, status), self.requests.labels(method, route, str(status))
            )
        timed = self._timed.get((method, route))
        if timed is None:
            timed = self._timed.setdefault((method, route), self.latency.labels(method, route))
        counted.inc()
        timed.observe(seconds)


def _histogram(name: str, doc: str, value: Buckets | None) -> Iterable[Metric]:
    if value is None:
        return []
    family = HistogramMetricFamily(name, doc)
    buckets = [(repr(float(le)), float(n)) for le, n in value.buckets]
    buckets.append(("+Inf", float(value.count)))
    family.add_metric([], buckets, sum_value=value.total)
    return [family]


class SnapshotCollector(Collector):
    def __init__(self, snapshot: TelemetrySnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield GaugeMetricFamily(
            "scheduling_due_schedules",
            "ACTIVE schedules whose next_fire_at has passed",
            value=s.due_schedules,
        )
        occurrences = CounterMetricFamily(
            "scheduling_occurrences", "Recorded occurrences by disposition", labels=["disposition"]
        )
        for disposition in (
            "MATERIALIZED",
            "MISSED",
            "SKIPPED_OVERLAP",
            "AUTHORIZATION_FAILED",
            "CONFIGURATION_FAILED",
        ):
            occurrences.add_metric([disposition], s.occurrences.get(disposition, 0))
        yield occurrences
        yield from _histogram(
            "scheduling_due_to_materialized_lag_seconds",
            "Nominal instant to decision (p50/p95/p99 via histogram_quantile)",
            s.lag,
        )
        yield CounterMetricFamily(
            "scheduling_misfires_coalesced",
            "Nominal instants coalesced by misfire handling",
            value=s.misfires_coalesced,
        )
        yield from _histogram(
            "scheduling_outage_span_seconds",
            "Oldest coalesced instant to the decision that closed the outage",
            s.outage_span,
        )
        active = GaugeMetricFamily(
            "scheduling_active_scheduled_runs",
            "Queued or running scheduled runs",
            labels=["tenant"],
        )
        for tenant, n in sorted(s.active_scheduled_runs.items()):
            active.add_metric([tenant], n)
        yield active
        yield CounterMetricFamily(
            "scheduling_auto_paused",
            "Schedules auto-paused by the failure limit",
            value=s.auto_paused,
        )
        outcomes = CounterMetricFamily(
            "scheduling_run_outcomes", "Scheduled runs by status", labels=["status"]
        )
        for status, n in sorted(s.run_outcomes.items()):
            outcomes.add_metric([status], n)
        yield outcomes
        yield from _histogram(
            "scheduling_run_duration_seconds",
            "Scheduled run creation to terminal",
            s.run_duration,
        )
        yield CounterMetricFamily(
            "scheduling_run_cost", "Committed cost of scheduled runs", value=float(s.run_cost)
        )
        yield from _histogram(
            "scheduling_cancellation_latency_seconds",
            "Run cancel request to the run's terminal write",
            s.cancellation_latency,
        )
        cost = GaugeMetricFamily(
            "scheduling_scheduled_cost",
            "Committed cost of scheduled runs ended in the rolling window, as admission charges"
            " the ceiling",
            labels=["tenant", "window"],
        )
        ceiling = GaugeMetricFamily(
            "scheduling_scheduled_cost_ceiling",
            "Tenant ceiling for the rolling window",
            labels=["tenant", "window"],
        )
        for (tenant, window), value in sorted(s.scheduled_cost.items()):
            cost.add_metric([tenant, window], float(value))
        for (tenant, window), value in sorted(s.cost_ceiling.items()):
            ceiling.add_metric([tenant, window], float(value))
        yield cost
        yield ceiling
        if s.claim_latency:
            latency = HistogramMetricFamily(
                "scheduling_claim_latency_seconds",
                "Claimable to first claim, by lane (interactive or async)",
                labels=["lane"],
            )
            for lane, histogram in sorted(s.claim_latency.items()):
                buckets = [(repr(float(le)), float(n)) for le, n in histogram.buckets]
                buckets.append(("+Inf", float(histogram.count)))
                latency.add_metric([lane], buckets, sum_value=histogram.total)
            yield latency
        reclaims = CounterMetricFamily(
            "scheduling_lease_reclaims",
            "Claims of a run whose previous lease had expired, by lane",
            labels=["lane"],
        )
        for lane, n in sorted(s.lease_reclaims.items()):
            reclaims.add_metric([lane], n)
        yield reclaims


def render(snapshot: TelemetrySnapshot | None, requests: RequestMetrics) -> bytes:
    registry = CollectorRegistry()
    if snapshot is not None:
        registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry) + generate_latest(requests.registry)
