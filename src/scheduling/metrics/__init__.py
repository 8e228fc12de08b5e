"""Prometheus metrics ports of the ``scheduler`` and ``run-worker`` roles (ADR 1510).

Each role exports what it observes: the scheduler its scans and decisions, the run
worker its claims and the ends of its attempts, both as cumulative in-process counters
and histograms (summed across replicas by Prometheus), plus a few gauges of fleet state
read through the role's own login at scrape time. Labels are tenant-safe by
construction (``ROLE_LABELS``); no schedule, run or session id, title, instruction or
token is ever a label or a sample. Depends on ports and the service/runtime observer
protocols only, never on an adapter or another edge.
"""

from scheduling.metrics.exporter import ROLE_LABELS, Exported, metrics_app, serving_metrics
from scheduling.metrics.run_worker import RunWorkerMetrics
from scheduling.metrics.scheduler import SchedulerMetrics

__all__ = [
    "ROLE_LABELS",
    "Exported",
    "RunWorkerMetrics",
    "SchedulerMetrics",
    "metrics_app",
    "serving_metrics",
]
