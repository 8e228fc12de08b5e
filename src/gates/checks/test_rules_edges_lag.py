"""``rule.metrics.scheduler``: the due-to-materialized lag histogram's buckets, not only
its count and sum, as the scheduler role's metrics port and the API's ``/metrics``
(computed from committed rows) serve them.

Three daily schedules are due before one scan 2 s after 09:00 Paris: one at 09:00
(a lag of exactly 2 s, on the ``le="2"`` bound), one at 08:00:02 (exactly 3600 s, on
the last finite bound) and one at 07:00 (7202 s, past every finite bound); the two late
ones are missed past their grace. Every ``le`` bucket of both scrapes is the number of
ledger lags at or below it (Prometheus buckets are inclusive and cumulative): the lag past the last
bound counts in ``+Inf`` and in ``_count`` only, and the sum holds it whole - neither
dropped, nor clamped into the 3600 s bucket, nor counted in it.

Tests of the test: ``scheduling-gates mutate`` (``metrics.lag_clamped_to_last_bucket``,
``metrics.lag_past_last_bucket_dropped``, ``telemetry.inf_bucket_is_last_finite``,
``telemetry.lag_bucket_exclusive``, ``telemetry.lag_count_within_buckets``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from gates.checks.metrics_support import Scrape, scrape
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.metrics import serving_metrics
from scheduling.ports.telemetry import LAG_BUCKETS
from simulation.worlds.http import HttpWorld, http_world

pytestmark = pytest.mark.postgres

FAMILY = "scheduling_due_to_materialized_lag_seconds"


async def daily(world: HttpWorld, key: str, local_time: str) -> dict[str, Any]:
    cadence = {"kind": "DAILY", "local_time": local_time, "timezone": "Europe/Paris"}
    made = await world.create(key, title=f"Lag {key}", cadence=cadence)
    assert made.status_code == 201, made.text
    return dict(made.json())


def buckets_of(scrape: Scrape) -> dict[str, float]:
    """Every ``le`` bucket of the lag family, by its bound's text."""
    family = scrape.families[FAMILY]
    return {
        s.labels["le"]: float(s.value)
        for s in family.samples
        if s.name == f"{FAMILY}_bucket" and set(s.labels) == {"le"}
    }


def expected(lags: list[float]) -> dict[str, float]:
    """The cumulative, inclusive buckets Prometheus defines for ``lags``."""
    out = {repr(float(b)): float(sum(lag <= b for lag in lags)) for b in LAG_BUCKETS}
    out["+Inf"] = float(len(lags))
    return out


def figures(scrape: Scrape) -> dict[str, Any]:
    return {
        "buckets": buckets_of(scrape),
        "count": scrape.value(f"{FAMILY}_count"),
        "sum": scrape.value(f"{FAMILY}_sum"),
    }


@pytest.mark.rule("rule.metrics.scheduler")
async def test_a_lag_past_the_last_bucket_counts_only_in_inf(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        on_two = await daily(world, "lag-two", "09:00")
        fire = datetime.fromisoformat(on_two["next_fire_at"])
        on_hour = await daily(world, "lag-hour", "08:00:02")
        past = await daily(world, "lag-past", "07:00")
        assert datetime.fromisoformat(on_hour["next_fire_at"]) == fire - timedelta(seconds=3598)
        assert datetime.fromisoformat(past["next_fire_at"]) == fire - timedelta(hours=2)

        role = world.scheduler()
        metrics = bootstrap.scheduler_metrics(role, clock=world.clock)
        async with serving_metrics(metrics, "127.0.0.1", 0) as port:
            # At 09:00 exactly all three are due (a schedule is due at its instant).
            world.clock.advance_to(fire)
            due_role = (await scrape(port)).value("scheduling_due_schedules")
            due_api = Scrape((await world.call("GET", "/metrics", None)).text).value(
                "scheduling_due_schedules"
            )
            world.clock.advance_to(fire + timedelta(seconds=2))
            assert (await role.worker.run_once()).errors == {}
            # The missed 07:00 instant's cached next_fire_at is put back on it (a stale
            # cache, as a crashed writer could leave it): the next pass finds the instant
            # already decided and only advances the cadence - no decision to count.
            ahead = await world.sql(
                "UPDATE schedules SET next_fire_at = :at WHERE id = :id RETURNING next_fire_at",
                at=fire - timedelta(hours=2),
                id=past["id"],
            )
            assert len(ahead) == 1
            assert (await role.worker.run_once()).errors == {}
            again = await world.sql(
                "SELECT next_fire_at FROM schedules WHERE id = :id", id=past["id"]
            )
            assert again[0]["next_fire_at"] == fire + timedelta(days=1, hours=-2), again
            served = await scrape(port)
        api = await world.call("GET", "/metrics", None)
        assert api.status_code == 200, api.text
        rows = await world.sql(
            "SELECT disposition, extract(epoch FROM created_at - nominal_fire_at) AS lag"
            " FROM schedule_occurrences"
        )

    lags = sorted(float(r["lag"]) for r in rows)
    # The world is the one described: one lag on a finite bound, one on the last finite
    # bound, one past every finite bound (the two late ones missed past their 900 s grace).
    assert lags == [2.0, 3600.0, 7202.0], rows
    assert sorted(str(r["disposition"]) for r in rows) == ["MATERIALIZED", "MISSED", "MISSED"]
    held = expected(lags)
    assert (held[repr(3600.0)], held["+Inf"]) == (2.0, 3.0), held
    want: dict[str, Any] = {"buckets": held, "count": 3.0, "sum": pytest.approx(sum(lags))}
    assert (due_role, due_api) == (3, 3), ("due at the instant", due_role, due_api)
    decided = {
        d: served.value("scheduling_occurrences_total", disposition=d)
        for d in ("MATERIALIZED", "MISSED")
    }
    assert decided == {"MATERIALIZED": 1.0, "MISSED": 2.0}, ("a re-found instant counted", decided)
    role_figures = figures(served)
    assert role_figures == want, f"the scheduler role's lag {role_figures} != ledger {want}"
    api_figures = figures(Scrape(api.text))
    assert api_figures == want, f"the API's lag {api_figures} != ledger {want}"
    gate_evidence.record("lags", lags)
