"""The tracked metrics against PostgreSQL: each role's metrics, scraped from the port
production serves them on (``bootstrap.scheduler_metrics``, ``run_worker_metrics``,
``scheduling.metrics.serving_metrics``), count what the database holds.

``rule.metrics.scheduler``: four schedules are due at one instant F and scanned 2 s
after it by a scheduler role built through the composition root:

* A (daily 09:00 Paris) materializes a run (lag 2 s);
* B (daily 08:58, grace 60 s, failure limit 1) is MISSED 122 s late and auto-paused;
* C (one time, its owner disabled since) is AUTHORIZATION_FAILED and completes;
* D (one time, pinned to an agent version whose policy profile changed since) is
  CONFIGURATION_FAILED and completes.

Three days later A is due again with its run still queued: SKIPPED_OVERLAP, two
instants coalesced, an outage of two days and 5 s. Every figure is compared with the
one the database yields (occurrences by disposition, the sum of their decided-minus-
nominal lags, the coalescing events' counts and span, the auto-pause events), and the
scrape holds no title, instruction, principal id or identifier; the API's ``/metrics``,
computed from committed rows, gives the same figures.

``rule.metrics.run_worker``: three materialized runs; the worker completes one 7 s
after queueing (its first-claim latency), a ghost claims one and lets its lease
expire, the owner cancels the one the worker holds 5 s before the worker's fenced stop;
the worker reclaims the ghost's. Claim latency by lane, the reclaim, outcomes,
durations, the cancellation latency, the active-run gauge and the cost ceilings are
what those events make them, and the API's own ``/metrics`` counts every first claim
from committed rows.

Tests of the test: ``scheduling-gates mutate`` (``metrics.failures_not_counted``: only
MATERIALIZED is counted; ``metrics.auto_paused_on_completion``: any state change counts
as an auto-pause; ``metrics.coalesced_once``: a coalescing adds one, not its count;
``metrics.outage_from_latest``: the span starts at the decided instant;
``metrics.lag_materialized_only``: failures observe no lag;
``metrics.reclaim_as_first_claim``, ``metrics.cost_counts_runs``,
``metrics.cancelled_not_counted``; the API's ``telemetry.outage_to_last_instant`` and
``telemetry.lag_materialized_only``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from gates.checks.metrics_support import (
    RUN_WORKER_FAMILIES,
    SCHEDULER_FAMILIES,
    Scrape,
    scrape,
    unsafe,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.metrics import serving_metrics
from scheduling.ports.runtime import RunPriority
from simulation.worlds.http import OWNER, HttpWorld, http_world
from simulation.worlds.runtime import submission, submitter
from simulation.worlds.service import AGENT_VERSION_2, POLICY, principal, seed_agent_version

pytestmark = pytest.mark.postgres

OTHER = principal("metrics-other", scopes=OWNER.scopes)
SECRET = "Quince-jelly-instruction-4412"
DISPOSITIONS = (
    "MATERIALIZED",
    "MISSED",
    "SKIPPED_OVERLAP",
    "AUTHORIZATION_FAILED",
    "CONFIGURATION_FAILED",
)


async def create(
    world: HttpWorld, key: str, who: Any = OWNER, script: str = "succeed", **fields: Any
) -> dict[str, Any]:
    instruction = f"{SECRET} {key} [script:{script}]"
    made = await world.create(key, who, instruction=instruction, **fields)
    assert made.status_code == 201, made.text
    return dict(made.json())


def once(at: datetime) -> dict[str, Any]:
    return {"kind": "ONCE", "at": at.isoformat()}


def figures_of(scrape: Scrape) -> dict[str, Any]:
    """The scheduler families' figures, in the shape ``ledger`` gives."""
    return {
        "by_disposition": {
            d: scrape.value("scheduling_occurrences_total", disposition=d) for d in DISPOSITIONS
        },
        "lags": scrape.value("scheduling_due_to_materialized_lag_seconds_count"),
        "lag_sum": scrape.value("scheduling_due_to_materialized_lag_seconds_sum"),
        "coalesced": scrape.value("scheduling_misfires_coalesced_total"),
        "outages": scrape.value("scheduling_outage_span_seconds_count"),
        "outage_sum": scrape.value("scheduling_outage_span_seconds_sum"),
        "auto_paused": scrape.value("scheduling_auto_paused_total"),
    }


async def ledger(world: HttpWorld) -> dict[str, Any]:
    """The figures the database yields for what the metrics count."""
    occurrences = await world.sql(
        "SELECT disposition, created_at - nominal_fire_at AS lag FROM schedule_occurrences"
    )
    events = await world.sql("SELECT event_type, payload, occurred_at FROM process_events")
    coalesced = [e for e in events if e["event_type"] == "schedule.misfires_coalesced"]
    return {
        "by_disposition": {
            d: sum(o["disposition"] == d for o in occurrences) for d in DISPOSITIONS
        },
        "lags": len(occurrences),
        "lag_sum": sum(o["lag"].total_seconds() for o in occurrences),
        "coalesced": sum(int(e["payload"]["count"]) for e in coalesced),
        "outages": len(coalesced),
        "outage_sum": sum(
            (
                e["occurred_at"] - datetime.fromisoformat(e["payload"]["first_nominal_at"])
            ).total_seconds()
            for e in coalesced
        ),
        "auto_paused": sum(e["event_type"] == "schedule.auto_paused" for e in events),
    }


@pytest.mark.rule("rule.metrics.scheduler")
async def test_the_scheduler_metrics_count_the_ledger(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, (OWNER, OTHER)) as world:
        await seed_agent_version(world.admin, AGENT_VERSION_2, POLICY)
        a = await create(world, "metrics-a", title="Metrics A")
        fire = datetime.fromisoformat(a["next_fire_at"])
        b = await create(
            world,
            "metrics-b",
            title="Metrics B",
            cadence={"kind": "DAILY", "local_time": "08:58", "timezone": "Europe/Paris"},
            misfire_grace_seconds=60,
            max_consecutive_failures=1,
        )
        assert datetime.fromisoformat(b["next_fire_at"]) == fire - timedelta(seconds=120)
        await create(world, "metrics-c", OTHER, title="Metrics C", cadence=once(fire))
        await create(world, "metrics-d", title="Metrics D", cadence=once(fire), agent_version="v2")
        await world.sql(
            "UPDATE principals SET enabled = false WHERE principal_id = :p",
            p=OTHER.principal_id,
        )
        await world.sql(
            "UPDATE agent_versions SET policy_profile = 'changed' WHERE version = :v",
            v=AGENT_VERSION_2,
        )

        role = world.scheduler()
        metrics = bootstrap.scheduler_metrics(role, clock=world.clock)
        async with serving_metrics(metrics, "127.0.0.1", 0) as port:
            world.clock.advance_to(fire + timedelta(seconds=2))
            before = await scrape(port)
            assert (await role.worker.run_once()).errors == {}
            world.clock.advance_to(fire + timedelta(days=3, seconds=5))
            assert (await role.worker.run_once()).errors == {}
            after = await scrape(port)
        # A create refused for its missing Idempotency-Key beside the four accepted: the
        # API's request counter keeps each status of one route apart.
        refused = await world.call("POST", "/v1/schedules", json=None)
        assert refused.status_code == 400, refused.text
        api = await world.call("GET", "/metrics", None)
        assert api.status_code == 200
        held = await ledger(world)

    # The world is the one described: each disposition once, one coalescing, one pause.
    assert held["by_disposition"] == dict.fromkeys(DISPOSITIONS, 1), held
    assert held["lag_sum"] == 2 + 122 + 2 + 2 + 5, held
    assert (held["coalesced"], held["outage_sum"]) == (2, 2 * 86400 + 5), held
    assert held["auto_paused"] == 1, held

    assert set(before.families) >= SCHEDULER_FAMILIES, SCHEDULER_FAMILIES - set(before.families)
    assert before.value("scheduling_due_schedules") == 4
    assert after.value("scheduling_due_schedules") == 0
    figures = figures_of(after)
    assert figures == held, f"metrics {figures} != ledger {held}"
    # The API's /metrics computes the same families from committed rows: the same facts.
    rows = Scrape(api.text)
    from_rows = figures_of(rows)
    assert from_rows == held, f"the API's metrics {from_rows} != ledger {held}"
    posted = {"method": "POST", "route": "/v1/schedules"}
    assert rows.value("scheduling_http_requests_total", **posted, status="201") == 4
    assert rows.value("scheduling_http_requests_total", **posted, status="400") == 1
    assert after.value("scheduling_scan_duration_seconds_count") == 2
    assert after.value("scheduling_scanned_due_schedules_total") == 5

    forbidden = [SECRET, "Metrics A", OWNER.principal_id, OTHER.principal_id]
    assert unsafe(after.body, forbidden) == []
    gate_evidence.record("figures", figures)


@pytest.mark.rule("rule.metrics.run_worker")
async def test_the_run_worker_metrics_count_claims_reclaims_and_cancellations(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        # Each run that executes spends USD 2 in two model calls (the scripted agent).
        made = [
            await create(world, f"metrics-run-{i}", title=f"Run {i}", script="spend:2")
            for i in range(3)
        ]
        fire = datetime.fromisoformat(made[0]["next_fire_at"])
        world.clock.advance_to(fire + timedelta(seconds=1))
        assert (await world.scheduler().worker.run_once()).errors == {}
        runner = world.run_worker()
        metrics = bootstrap.run_worker_metrics(runner, world.settings, clock=world.clock)
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
        ended = await world.sql(
            "SELECT status, cost, finished_at - created_at AS span FROM runs"
            " WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED')"
        )
        # An interactive (on-demand) run that spends USD 2 ends under an interactive
        # worker: no scheduled run, so that worker's scheduled outcome, duration and cost
        # stay empty while its interactive claim latency counts it.
        lane = world.run_worker(RunPriority.INTERACTIVE)
        own = bootstrap.run_worker_metrics(lane, world.settings, clock=world.clock)
        async with serving_metrics(own, "127.0.0.1", 0) as port:
            await submitter(world.admin, world.clock).submit(OWNER, submission("spend:2"))
            world.clock.advance(3)
            done = await lane.worker.run_once()
            assert done is not None
            assert done.status == "COMPLETED"
            lone = await scrape(port)
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
    # Outcomes, durations and cost: what the runs table says of the runs that ended.
    outcomes = "scheduling_run_outcomes_total"
    for status in ("COMPLETED", "FAILED", "CANCELLED"):
        held_rows = sum(r["status"] == status for r in ended)
        assert after.value(outcomes, status=status) == held_rows, status
    assert after.value(outcomes, status="CANCELLED") == 1
    assert after.value("scheduling_run_duration_seconds_count") == len(ended) == 3
    assert after.value("scheduling_run_duration_seconds_sum") == pytest.approx(
        sum(r["span"].total_seconds() for r in ended)
    )
    spent = float(sum(r["cost"] for r in ended))
    assert spent == 4.0, ended  # two executed runs of USD 2; the cancelled one spent none
    assert after.value("scheduling_run_cost_total") == pytest.approx(spent)
    assert after.value("scheduling_cancellation_latency_seconds_count") == 1
    assert after.value("scheduling_cancellation_latency_seconds_sum") == pytest.approx(5.0)
    assert after.value("scheduling_scheduled_cost", tenant=tenant, window="daily") >= 0
    assert after.value("scheduling_scheduled_cost_ceiling", tenant=tenant, window="daily") == 100
    assert after.value("scheduling_scheduled_cost_ceiling", tenant=tenant, window="monthly") == 1000
    forbidden = [SECRET, "Run 0", OWNER.principal_id, world.tokens[(tenant, OWNER.principal_id)]]
    assert unsafe(after.body, forbidden) == []
    # The API computes the same facts from committed rows (revision 0006): every first
    # claim (the worker's, the ghost's, the cancelled one's), each 7 s after queueing.
    assert rows.value(f"{latency}_count", lane="async") == 3
    assert rows.value(f"{latency}_sum", lane="async") == pytest.approx(21.0)
    assert rows.value(f"{latency}_count", lane="interactive") == 0
    assert rows.value("scheduling_lease_reclaims_total", lane="async") == 1
    assert rows.value("scheduling_lease_reclaims_total", lane="interactive") == 0
    for status in ("COMPLETED", "FAILED", "CANCELLED"):
        counted = lone.value(outcomes, status=status) if lone.has(outcomes, status=status) else 0
        assert counted == 0, ("an interactive run counted as a scheduled outcome", status)
    # The API renders the same run families from committed rows: the same ended runs
    # and the tenant's own ceilings (not its rolling cost).
    for status in ("COMPLETED", "FAILED", "CANCELLED"):
        held_rows = sum(r["status"] == status for r in ended)
        counted = rows.value(outcomes, status=status) if rows.has(outcomes, status=status) else 0
        assert counted == held_rows, ("the API's outcomes", status)
    ceiling = "scheduling_scheduled_cost_ceiling"
    assert rows.value(ceiling, tenant=tenant, window="daily") == 100
    assert rows.value(ceiling, tenant=tenant, window="monthly") == 1000
    for sample in ("scheduling_run_duration_seconds_count", "scheduling_run_cost_total"):
        assert not lone.has(sample) or lone.value(sample) == 0, sample
    assert lone.value(f"{latency}_count", lane="interactive") == 1
    assert lone.value(f"{latency}_sum", lane="interactive") == pytest.approx(3.0)
    gate_evidence.record("ended", sorted(r["status"] for r in ended))
