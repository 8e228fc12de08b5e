"""The scheduler's and run worker's Prometheus ports (ADR 1510)."""

from __future__ import annotations

from scheduling.bootstrap.run_worker import RunWorkerRole
from scheduling.bootstrap.scheduler import SchedulerRole
from scheduling.config import Settings
from scheduling.metrics import RunWorkerMetrics, SchedulerMetrics
from scheduling.ports.clock import Clock

# ------------------------------------------------------------------ role metrics
# The scheduler's and run worker's Prometheus ports (ADR 1510): an observer attached to
# the role's worker, and scrape-time gauges read through the role's own login.


def scheduler_metrics(role: SchedulerRole, *, clock: Clock) -> SchedulerMetrics:
    """Attach a ``SchedulerMetrics`` to ``role``'s worker (every later pass feeds it)."""
    metrics = SchedulerMetrics(role.storage.scheduler_gauges(clock, "scheduler"))
    role.worker.metrics.observers.append(metrics)
    return metrics


def run_worker_metrics(
    role: RunWorkerRole, settings: Settings, *, clock: Clock
) -> RunWorkerMetrics:
    """Attach a ``RunWorkerMetrics`` to ``role``'s worker (every later claim feeds it)."""
    gauges = role.storage.run_gauges(clock, settings.ceilings.to_ceilings(), role.role)
    metrics = RunWorkerMetrics(reader=role.uow, gauges=gauges)
    role.worker.observer = metrics
    return metrics
