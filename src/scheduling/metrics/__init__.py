"""Prometheus metrics ports of the ``scheduler`` and ``run-worker`` roles (ADR 1510).

Each role exports what it observes: the scheduler its scans and decisions, the run
worker its claims and the ends of its attempts, both as cumulative in-process counters
and histograms (summed across replicas by Prometheus), plus a few gauges of fleet state
read through the role's own login at scrape time. Labels are tenant-safe by
construction (``ROLE_LABELS``); no schedule, run or session id, title, instruction or
token is ever a label or a sample. Depends on ports and the service/runtime observer
protocols only, never on an adapter or another edge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduling.lazy_exports import lazy_exports

if TYPE_CHECKING:
    # ``X as X``: explicit re-exports (``__all__`` is computed, as in scheduling.bootstrap).
    from scheduling.metrics.exporter import ROLE_LABELS as ROLE_LABELS
    from scheduling.metrics.exporter import Exported as Exported
    from scheduling.metrics.exporter import metrics_app as metrics_app
    from scheduling.metrics.exporter import serving_metrics as serving_metrics
    from scheduling.metrics.run_worker import RunWorkerMetrics as RunWorkerMetrics
    from scheduling.metrics.scheduler import SchedulerMetrics as SchedulerMetrics

# A submodule is imported when one of its names is first asked for: the exporter serves
# on uvicorn, which ``scheduling scheduler --help`` has no use for (issue 26 item 4).
_HOME: dict[str, str] = {
    **dict.fromkeys(("ROLE_LABELS", "Exported", "metrics_app", "serving_metrics"), "exporter"),
    "RunWorkerMetrics": "run_worker",
    "SchedulerMetrics": "scheduler",
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOME)
