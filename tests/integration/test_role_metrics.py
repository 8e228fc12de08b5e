"""The scheduler's and run worker's metrics ports (ADR 1510) against PostgreSQL.

Real roles from the composition root on a virtual clock, each serving its registry on a
loopback port: scrapes before and after a firing, a claim, a lease reclaim and a
cancellation show every family and exact sample moves (latencies are exact because the
clock is). Labels stay within ``ROLE_LABELS`` and no label or sample carries a title,
an instruction, an identifier or a token; a planted unsafe family shows the check
catches one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from scheduling import bootstrap as b
from scheduling.metrics import ROLE_LABELS, Exported, serving_metrics
from simulation.worlds.http import OWNER, HttpWorld, http_world

pytestmark = pytest.mark.postgres

SECRETISH = "Marzipan-ball-throwing-instruction-7731"
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


def forbidden_of(world: HttpWorld, made: list[dict[str, Any]]) -> list[str]:
    token = world.tokens[(OWNER.tenant_id, OWNER.principal_id)]
    return [SECRETISH, "Title", token, OWNER.principal_id, *(m["id"] for m in made)]


async def created(world: HttpWorld, n: int) -> list[dict[str, Any]]:
    made = []
    for i in range(n):
        response = await world.create(
            f"role-metrics-{i}",
            title=f"Title {SECRETISH}",
            instruction=f"{SECRETISH} [script:succeed]",
        )
        assert response.status_code == 201, response.text
        made.append(response.json())
    return made


async def test_scheduler_port_counts_its_firings(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        made = await created(world, 3)
        role = world.scheduler()
        metrics = b.scheduler_metrics(role, clock=world.clock)
        async with serving_metrics(metrics, "127.0.0.1", 0) as port:
            fire = datetime.fromisoformat(made[0]["next_fire_at"])
            world.clock.advance_to(fire + timedelta(seconds=2))
            before = await scrape(port)
            await role.worker.run_once()
            after = await scrape(port)
    assert set(before.families) >= SCHEDULER_FAMILIES, SCHEDULER_FAMILIES - set(before.families)
    assert before.value("scheduling_due_schedules") == 3
    assert after.value("scheduling_due_schedules") == 0
    materialized = "scheduling_occurrences_total"
    assert before.value(materialized, disposition="MATERIALIZED") == 0
    assert after.value(materialized, disposition="MATERIALIZED") == 3
    assert after.value(materialized, disposition="MISSED") == 0
    assert after.value("scheduling_due_to_materialized_lag_seconds_count") == 3
    assert after.value("scheduling_due_to_materialized_lag_seconds_sum") == pytest.approx(6.0)
    assert after.value("scheduling_due_to_materialized_lag_seconds_bucket", le="1.0") == 0
    assert after.value("scheduling_due_to_materialized_lag_seconds_bucket", le="2.0") == 3
    assert after.value("scheduling_scan_duration_seconds_count") == 1
    assert after.value("scheduling_scanned_due_schedules_total") == 3
    assert unsafe(after.body, forbidden_of(world, made)) == []


async def test_run_worker_port_counts_claims_reclaims_and_cancellations(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        made = await created(world, 3)
        fire = datetime.fromisoformat(made[0]["next_fire_at"])
        world.clock.advance_to(fire + timedelta(seconds=1))
        await world.scheduler().worker.run_once()
        runner = world.run_worker()
        metrics = b.run_worker_metrics(runner, world.settings, clock=world.clock)
        async with serving_metrics(metrics, "127.0.0.1", 0) as port:
            before = await scrape(port)
            world.clock.advance(7)
            first = await runner.worker.run_once()  # a first claim, 7 s after queueing
            assert first is not None
            assert first.status == "COMPLETED"
            ghost = await runner.queue.claim("ghost", world.clock.now(), 30)
            held = await runner.queue.claim(runner.worker.owner, world.clock.now(), 30)
            assert ghost is not None
            assert held is not None
            cancel = await world.call("POST", f"/v1/runs/{held.run.id}/cancel")
            assert cancel.status_code == 200, cancel.text
            world.clock.advance(5)
            stopped = await runner.worker.execute(held)  # fenced out by the cancel
            assert stopped.lease_lost
            world.clock.advance(31)  # the ghost's lease expires
            reclaimed = await runner.worker.run_once()
            assert reclaimed is not None
            assert reclaimed.recovered
            after = await scrape(port)
        api = await world.call("GET", "/metrics", None)
        assert api.status_code == 200
        rows = Scrape(api.text)
    assert set(before.families) >= RUN_WORKER_FAMILIES, RUN_WORKER_FAMILIES - set(before.families)
    tenant = OWNER.tenant_id
    assert before.value("scheduling_active_scheduled_runs", tenant=tenant) == 3
    assert not after.has("scheduling_active_scheduled_runs", tenant=tenant)
    latency = "scheduling_claim_latency_seconds"
    assert before.value(f"{latency}_count", lane="async") == 0
    assert after.value(f"{latency}_count", lane="async") == 1
    assert after.value(f"{latency}_sum", lane="async") == pytest.approx(7.0)
    assert after.value(f"{latency}_count", lane="interactive") == 0
    assert before.value("scheduling_lease_reclaims_total", lane="async") == 0
    assert after.value("scheduling_lease_reclaims_total", lane="async") == 1
    outcomes = "scheduling_run_outcomes_total"
    assert after.value(outcomes, status="COMPLETED") == 2
    assert after.value(outcomes, status="CANCELLED") == 1
    assert after.value(outcomes, status="FAILED") == 0
    assert after.value("scheduling_run_duration_seconds_count") == 3
    assert after.value("scheduling_cancellation_latency_seconds_count") == 1
    assert after.value("scheduling_cancellation_latency_seconds_sum") == pytest.approx(5.0)
    assert after.value("scheduling_scheduled_cost", tenant=tenant, window="daily") >= 0
    assert after.value("scheduling_scheduled_cost_ceiling", tenant=tenant, window="daily") == 100
    assert after.value("scheduling_scheduled_cost_ceiling", tenant=tenant, window="monthly") == 1000
    assert unsafe(after.body, forbidden_of(world, made)) == []
    # The API computes the same facts from committed rows (revision 0006): every first
    # claim (the worker's, the ghost's, the cancelled one's), each 7 s after queueing.
    assert rows.value(f"{latency}_count", lane="async") == 3
    assert rows.value(f"{latency}_sum", lane="async") == pytest.approx(21.0)
    assert rows.value(f"{latency}_count", lane="interactive") == 0
    assert rows.value("scheduling_lease_reclaims_total", lane="async") == 1
    assert rows.value("scheduling_lease_reclaims_total", lane="interactive") == 0


class Planted:
    """A wrong role exporter: labels a counter by schedule and instruction."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter = Counter("scheduling_fired", "fired", ["schedule", "what"], registry=self.registry)
        counter.labels("0b7c2f3e-1d2a-4c5b-8e9f-001122334455", SECRETISH).inc()

    async def refresh(self) -> None:
        return None


async def test_the_label_check_catches_a_planted_unsafe_exporter() -> None:
    planted: Exported = Planted()
    async with serving_metrics(planted, "127.0.0.1", 0) as port:
        body = (await scrape(port)).body
    found = unsafe(body, [SECRETISH])
    assert "label schedule" in found
    assert "label what" in found
    assert any(f.startswith("value 0b7c2f3e") for f in found)
    assert f"text {SECRETISH}" in found
