"""Scraping a role's metrics port, for the metrics rules and their tests (not a test
module): the text a Prometheus server would read, parsed by ``prometheus_client``'s own
parser, and the tenant-safety check every scrape must pass."""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from scheduling.metrics import ROLE_LABELS

SCHEDULER_FAMILIES = {
    "scheduling_due_schedules",
    "scheduling_scan_duration_seconds",
    "scheduling_scanned_due_schedules",
    "scheduling_occurrences",
    "scheduling_due_to_materialized_lag_seconds",
    "scheduling_misfires_coalesced",
    "scheduling_outage_span_seconds",
    "scheduling_auto_paused",
}
RUN_WORKER_FAMILIES = {
    "scheduling_claim_latency_seconds",
    "scheduling_lease_reclaims",
    "scheduling_run_outcomes",
    "scheduling_run_duration_seconds",
    "scheduling_run_cost",
    "scheduling_cancellation_latency_seconds",
    "scheduling_active_scheduled_runs",
    "scheduling_scheduled_cost",
    "scheduling_scheduled_cost_ceiling",
}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")


class Scrape:
    def __init__(self, body: str) -> None:
        self.body = body
        self.families = {f.name: f for f in text_string_to_metric_families(body)}

    def value(self, sample: str, **labels: str) -> float:
        for family in self.families.values():
            for s in family.samples:
                if s.name == sample and s.labels == labels:
                    return float(s.value)
        raise KeyError((sample, labels))

    def has(self, sample: str, **labels: str) -> bool:
        try:
            self.value(sample, **labels)
        except KeyError:
            return False
        return True


async def scrape(port: int) -> Scrape:
    """``/metrics`` of the port on 127.0.0.1 (which serves nothing else)."""
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        missing = await client.get(f"http://127.0.0.1:{port}/v1/schedules")
        assert missing.status_code == 404
    return Scrape(response.text)


def unsafe(body: str, forbidden: Iterable[str]) -> list[str]:
    """Every label name outside ``ROLE_LABELS`` and every label value or line carrying a
    forbidden text or an identifier."""
    found = []
    forbidden = list(forbidden)
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found += [f"label {k}" for k in sample.labels if k not in ROLE_LABELS]
            for value in sample.labels.values():
                if _UUID.search(value) or any(f in value for f in forbidden):
                    found.append(f"value {value}")
    found += [f"text {f}" for f in forbidden if f in body]
    return found
