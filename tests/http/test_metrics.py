"""``/metrics`` carries every tracked metric with tenant-safe labels only: after a stack
has materialized, run, missed and cancelled schedules with distinctive titles and
instructions, no label name outside the allowed set exists and no label value or sample
contains an instruction, a title, an identifier or a token."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduling.http.metrics import ALLOWED_LABELS
from simulation.worlds.http import OWNER, http_world

pytestmark = pytest.mark.postgres

SECRETISH = "Marzipan-ball-throwing-instruction-7731"
TRACKED = {
    "scheduling_due_schedules",
    "scheduling_occurrences",
    "scheduling_due_to_materialized_lag_seconds",
    "scheduling_misfires_coalesced",
    "scheduling_outage_span_seconds",
    "scheduling_active_scheduled_runs",
    "scheduling_auto_paused",
    "scheduling_run_outcomes",
    "scheduling_run_duration_seconds",
    "scheduling_run_cost",
    "scheduling_cancellation_latency_seconds",
    "scheduling_scheduled_cost",
    "scheduling_scheduled_cost_ceiling",
    "scheduling_claim_latency_seconds",
    "scheduling_lease_reclaims",
    "scheduling_http_requests",
    "scheduling_http_request_duration_seconds",
}


async def test_metrics_are_complete_and_tenant_safe(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        made = []
        extras: tuple[dict[str, Any], ...] = ({}, {"misfire_grace_seconds": 60})
        for n, extra in enumerate(extras):
            response = await world.create(
                f"m{n}",
                title=f"Title {SECRETISH}",
                instruction=f"{SECRETISH} [script:succeed]",
                **extra,
            )
            made.append(response.json())
        fire = datetime.fromisoformat(made[0]["next_fire_at"])
        world.clock.advance_to(fire + timedelta(seconds=1))
        scheduler, runner = world.scheduler(), world.run_worker()
        await scheduler.worker.run_once()
        while await runner.worker.run_once() is not None:
            pass
        world.clock.advance(3 * 86400 + 7200)  # the 60 s-grace schedule misses, coalescing
        await scheduler.worker.run_once()
        scrape = await world.call("GET", "/metrics", None)
        assert scrape.status_code == 200
        body = scrape.text
    families = {f.name: f for f in text_string_to_metric_families(body)}
    assert set(families) >= TRACKED, sorted(TRACKED - set(families))
    forbidden = [SECRETISH, "Title", *(m["id"] for m in made)]
    forbidden += [world.tokens[(OWNER.tenant_id, OWNER.principal_id)], OWNER.principal_id]
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-")
    for family in families.values():
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, (sample.name, sample.labels)
            for value in sample.labels.values():
                assert not uuid.search(value), (sample.name, value)
                assert all(f not in value for f in forbidden), (sample.name, value)
    assert all(f not in body for f in forbidden)
    occurrences = {
        s.labels["disposition"]: s.value
        for s in families["scheduling_occurrences"].samples
        if s.name.endswith("_total")
    }
    assert occurrences["MATERIALIZED"] >= 1
    assert occurrences["MISSED"] >= 1
    coalesced = families["scheduling_misfires_coalesced"].samples[0].value
    assert coalesced >= 1
    outcomes = {s.labels["status"]: s.value for s in families["scheduling_run_outcomes"].samples}
    assert outcomes.get("COMPLETED", 0) >= 1
