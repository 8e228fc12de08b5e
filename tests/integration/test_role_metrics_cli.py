"""``scheduling scheduler`` and ``scheduling run-worker`` as real subprocesses serve their
metrics port (ADR 1510): the scheduler's from ``AGENT_SCHEDULE_METRICS_PORT``, the run
worker's from ``--metrics-port``. A scrape shows the families, then the firing and the
claim move their samples; a port already in use is a stable refusal, not a traceback."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.test_cli_ops import SCRIPT, WHO, sql, start, terminate

from scheduling import bootstrap as b
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.cli import build_parser
from scheduling.cli.serve import metrics_address
from scheduling.config import UNPARSEABLE, ConfigurationError, Settings
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import CEILINGS, ceiling_env, definition, seed_durable

pytestmark = pytest.mark.postgres


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def development_env(url: str) -> dict[str, str]:
    env = {
        "AGENT_SCHEDULE_ENVIRONMENT": "development",
        "AGENT_SCHEDULE_API_ENABLED": "1",
        "AGENT_SCHEDULE_WORKER_ENABLED": "1",
        "AGENT_SCHEDULE_DATABASE_URL": url,
        "AGENT_SCHEDULE_FALLBACK_POLL_SECONDS": "1",
        "AGENT_SCHEDULE_TENANTS": WHO.tenant_id,
        **ceiling_env(CEILINGS),
    }
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}, **env}


Key = tuple[str, tuple[tuple[str, str], ...]]


async def samples(port: int) -> dict[Key, float]:
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): float(s.value)
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


async def wait_for(
    port: int, key: tuple[str, tuple[tuple[str, str], ...]], seconds: float
) -> float:
    deadline = time.monotonic() + seconds
    while True:
        value = (await samples(port)).get(key, 0.0)
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.2)


MATERIALIZED = ("scheduling_occurrences_total", (("disposition", "MATERIALIZED"),))
CLAIMS = ("scheduling_claim_latency_seconds_count", (("lane", "async"),))
COMPLETED = ("scheduling_run_outcomes_total", (("status", "COMPLETED"),))


async def test_roles_serve_their_metrics_port(pg_url: str) -> None:
    env = development_env(pg_url)
    db_now = (await sql(pg_url, "SELECT now() AS t"))[0]["t"]
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    await seed_durable(admin, [WHO], at=db_now - timedelta(minutes=5))
    await admin.dispose()
    api = b.build_api(
        Settings.from_env(env), clock=VirtualClock(db_now - timedelta(minutes=1)), ids=SeededIds(5)
    )
    try:
        at = (db_now - timedelta(seconds=30)).isoformat()
        await api.service.create(WHO, "metrics-1", definition(cadence={"kind": "ONCE", "at": at}))
    finally:
        await api.close()

    port = free_port()
    scheduler = start("scheduler", env={**env, "AGENT_SCHEDULE_METRICS_PORT": str(port)})
    try:
        materialized = await wait_for(port, MATERIALIZED, 20)
        scraped = await samples(port)
    finally:
        code, _, err = terminate(scheduler)
    assert code == 0, err
    assert materialized == 1
    assert scraped[("scheduling_scan_duration_seconds_count", ())] >= 1
    assert ("scheduling_due_schedules", ()) in scraped

    port = free_port()
    worker = start("run-worker", "--class", "async", "--metrics-port", str(port), env=env)
    try:
        claims = await wait_for(port, CLAIMS, 20)
        completed = await wait_for(port, COMPLETED, 20)
    finally:
        code, _, err = terminate(worker)
    assert code == 0, err
    assert (claims, completed) == (1, 1)


def test_a_port_in_use_is_a_stable_refusal(pg_url: str) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [SCRIPT, "run-worker", "--class", "async", "--metrics-port", str(port)],
            env=development_env(pg_url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "PROBLEM: schedule.metrics.port_unavailable" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_outside_the_range_is_the_stable_unparseable_refusal() -> None:
    # no longer argparse's usage error (exit 2): tests/unit/test_port_options.py runs both
    parser = build_parser()
    for role in (["scheduler"], ["run-worker", "--class", "async"]):
        args = parser.parse_args([*role, "--metrics-port", "70000"])
        with pytest.raises(ConfigurationError) as refused:
            metrics_address(args, Settings.from_env({}))
        assert refused.value.code == UNPARSEABLE
        assert "must be an integer in 0..65535" in refused.value.details["problems"][0]
