"""``rule.metrics.run_worker``: the claim-latency buckets, the scheduled-cost gauges of
each rolling window and the active gauge, as the run worker role's metrics port and the
API's ``/metrics`` (computed from committed rows) serve them.

One daily schedule whose runs spend USD 2: its first run is claimed 3 s after it became
claimable and completes; a day later its second run is claimed 7202 s after it became
claimable (past the last finite latency bound). Both scrapes are compared with the runs
rows: every ``le`` bucket of the async claim latency counts the first-claim latencies at
or below it (the 7202 s one only in ``+Inf``), the daily and monthly scheduled cost are
the committed cost of the scheduled runs that ended within one and thirty days (the
first run has left the daily window, not the monthly one), each beside its own ceiling; the active
gauges read the one queued run while it waits and a third run while it is held RUNNING.
The owner cancels that third run 5 s before the worker's fenced stop: the API's
duration family counts the three ended runs with their creation-to-finish spans, and
its cancellation latency is the cancel event to the run's terminal write.

Tests of the test: ``scheduling-gates mutate`` (``metrics.claim_latency_clamped``,
``telemetry.claim_inf_is_last_finite``, ``metrics.scheduled_cost_zero``,
``http.metrics_cost_is_ceiling``, ``telemetry.cost_windows_swapped``,
``http.metrics_active_gauge_empty``, ``telemetry.active_queued_only``,
``role_gauges.active_queued_only``, ``telemetry.duration_from_claim``,
``telemetry.cancellation_from_created``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from gates.checks.metrics_support import Scrape, scrape
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.metrics import serving_metrics
from scheduling.ports.telemetry import LAG_BUCKETS
from simulation.worlds.http import OWNER, HttpWorld, http_world

pytestmark = pytest.mark.postgres

LATENCY = "scheduling_claim_latency_seconds"
WINDOWS = (("daily", 1), ("monthly", 30))


def latency_of(scrape: Scrape) -> dict[str, Any]:
    family = scrape.families[LATENCY]
    buckets = {
        s.labels["le"]: float(s.value)
        for s in family.samples
        if s.name == f"{LATENCY}_bucket" and s.labels.get("lane") == "async"
    }
    return {
        "buckets": buckets,
        "count": scrape.value(f"{LATENCY}_count", lane="async"),
        "sum": scrape.value(f"{LATENCY}_sum", lane="async"),
    }


def latency_expected(latencies: list[float]) -> dict[str, Any]:
    buckets = {repr(float(b)): float(sum(x <= b for x in latencies)) for b in LAG_BUCKETS}
    buckets["+Inf"] = float(len(latencies))
    return {
        "buckets": buckets,
        "count": float(len(latencies)),
        "sum": pytest.approx(sum(latencies)),
    }


def cost_of(scrape: Scrape, tenant: str) -> dict[str, float]:
    return {
        w: scrape.value("scheduling_scheduled_cost", tenant=tenant, window=w) for w, _ in WINDOWS
    }


async def cost_held(world: HttpWorld, now: datetime) -> dict[str, float]:
    """The committed cost of the scheduled runs that ended within each window (what
    admission charges the ceilings with), from the runs rows."""
    rows = await world.sql(
        "SELECT cost, finished_at FROM runs WHERE metadata ? 'schedule_id' AND tenant_id = :t"
        " AND status NOT IN ('QUEUED', 'RUNNING')",
        t=OWNER.tenant_id,
    )
    return {
        w: float(
            sum(
                (r["cost"] for r in rows if r["finished_at"] > now - timedelta(days=d)),
                Decimal(0),
            )
        )
        for w, d in WINDOWS
    }


@pytest.mark.rule("rule.metrics.run_worker")
async def test_claim_latency_buckets_and_cost_windows_equal_the_runs(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    tenant = OWNER.tenant_id
    async with http_world(pg_url) as world:
        made = await world.create(
            "run-metrics", instruction="Spend a little [script:spend:2]", title="Run metrics"
        )
        assert made.status_code == 201, made.text
        fire = datetime.fromisoformat(made.json()["next_fire_at"])
        scheduler = world.scheduler()
        runner = world.run_worker()
        metrics = bootstrap.run_worker_metrics(runner, world.settings, clock=world.clock)
        async with serving_metrics(metrics, "127.0.0.1", 0) as port:
            world.clock.advance_to(fire + timedelta(seconds=1))
            assert (await scheduler.worker.run_once()).errors == {}
            world.clock.advance(3)
            first = await runner.worker.run_once()
            assert first is not None
            assert first.status == "COMPLETED", first
            world.clock.advance_to(fire + timedelta(days=1, seconds=1))
            assert (await scheduler.worker.run_once()).errors == {}
            queued = await world.call("GET", "/metrics", None)
            assert queued.status_code == 200
            world.clock.advance(7202)
            second = await runner.worker.run_once()
            assert second is not None
            served = await scrape(port)
            api = await world.call("GET", "/metrics", None)
            assert api.status_code == 200
            claims = await world.sql(
                "SELECT extract(epoch FROM first_claimed_at - greatest(created_at, scheduled_for))"
                " AS latency FROM runs WHERE first_claimed_at IS NOT NULL"
            )
            held = await cost_held(world, world.clock.now())
            # A third run is held RUNNING (claimed, not yet executed): the active gauges
            # count it; the owner cancels it 5 s before the worker's fenced stop.
            world.clock.advance_to(fire + timedelta(days=2, seconds=1))
            assert (await scheduler.worker.run_once()).errors == {}
            world.clock.advance(4)  # queued 4 s before its claim and cancel
            holding = await runner.queue.claim(runner.worker.owner, world.clock.now(), 30)
            assert holding is not None
            running = (await scrape(port), Scrape((await world.call("GET", "/metrics", None)).text))
            cancel = await world.call("POST", f"/v1/runs/{holding.run.id}/cancel")
            assert cancel.status_code == 200, cancel.text
            world.clock.advance(5)
            stopped = await runner.worker.execute(holding)
            assert stopped.lease_lost
            ended_role = await scrape(port)
        ended_api = Scrape((await world.call("GET", "/metrics", None)).text)
        ended = await world.sql(
            "SELECT extract(epoch FROM finished_at - created_at) AS span FROM runs"
            " WHERE metadata ? 'schedule_id' AND finished_at IS NOT NULL"
        )
        cancels = await world.sql(
            "SELECT extract(epoch FROM r.finished_at - e.occurred_at) AS latency FROM runs r"
            " JOIN session_events e ON e.run_id = r.id AND e.event_type = 'run.cancelled'"
        )

    latencies = sorted(float(r["latency"]) for r in claims)
    # The world is the one described: one latency on a finite bound, one past them all;
    # the first run's USD 2 has left the daily window and stays in the monthly one.
    assert latencies == [3.0, 7202.0], claims
    assert held["monthly"] == held["daily"] + 2.0, held
    want = latency_expected(latencies)
    assert want["buckets"][repr(3600.0)] == 1.0
    role = latency_of(served)
    assert role == want, f"the run worker's claim latency {role} != the runs {want}"
    rows = latency_of(Scrape(api.text))
    assert rows == want, f"the API's claim latency {rows} != the runs {want}"

    assert cost_of(served, tenant) == held, ("the run worker's scheduled cost", held)
    assert cost_of(Scrape(api.text), tenant) == held, ("the API's scheduled cost", held)
    for scraped in (served, Scrape(api.text)):
        ceiling = "scheduling_scheduled_cost_ceiling"
        assert scraped.value(ceiling, tenant=tenant, window="daily") == 100
        assert scraped.value(ceiling, tenant=tenant, window="monthly") == 1000
    # While the second run waited, the API's active gauge read it; while the third was
    # RUNNING, both gauges read it.
    active = "scheduling_active_scheduled_runs"
    assert Scrape(queued.text).value(active, tenant=tenant) == 1
    assert [r.value(active, tenant=tenant) for r in running] == [1, 1], "a running run"
    # The API's duration and cancellation-latency families: the ended runs rows.
    spans = [float(r["span"]) for r in ended]
    assert len(spans) == 3, ended
    duration = "scheduling_run_duration_seconds"
    for scraped in (ended_role, ended_api):
        assert scraped.value(f"{duration}_count") == 3
        assert scraped.value(f"{duration}_sum") == pytest.approx(sum(spans))
    latency = [float(r["latency"]) for r in cancels]
    assert len(latency) == 1, cancels
    cancelled = "scheduling_cancellation_latency_seconds"
    assert ended_api.value(f"{cancelled}_count") == 1
    assert ended_api.value(f"{cancelled}_sum") == pytest.approx(sum(latency))
    assert ended_role.value(f"{cancelled}_sum") == pytest.approx(5.0)
    # The cancel's own latency is not the run's age (4 s when it was cancelled).
    assert sum(latency) < 4, cancels
    gate_evidence.record("latencies", latencies)
    gate_evidence.record("cost", held)
