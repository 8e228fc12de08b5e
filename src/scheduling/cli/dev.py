"""``scheduling dev``: the whole control plane in one process, for development only.

Given a PostgreSQL URL (``--database-url`` or ``AGENT_SCHEDULE_DATABASE_URL``; the
harness's ``python -m simulation.devstack`` starts a throwaway server from the project's
provider and calls this same stack, ADR 1503), it migrates, provisions a demo tenant,
principal, agent and token, and runs the API, a schedule worker and an async and an
interactive run worker until SIGINT/SIGTERM, printing the URL, the token and a curl line
that creates a schedule firing a minute later. ``AGENT_SCHEDULE_ENVIRONMENT=production``
refuses it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TextIO
from uuid import UUID

# Read when the command runs: the composition root imports the roles, the HTTP stack and
# the migration runner on first access, so ``dev --help`` does not (issue 26 item 4).
from scheduling import bootstrap
from scheduling.cli.edge import configure_logging, report, system_edge
from scheduling.cli.lifetime import until_signalled
from scheduling.cli.registry import command
from scheduling.config import (
    CeilingSettings,
    ConfigurationError,
    Environment,
    Settings,
    parse_port,
)
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.runtime import RunPriority
from scheduling.service.validation import PLATFORM_SCOPES

DEMO_TENANT = "demo"
DEMO_PRINCIPAL = "developer"
DEMO_AGENT = UUID("0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e01")
DEMO_LIMITS = {"max_steps": 10, "max_model_calls": 10, "max_tool_calls": 10, "max_cost": "1"}


def dev_settings(url: str) -> Settings:
    """Scheduling on, over PostgreSQL, durable directory, PostgreSQL admission; demo
    tenant ceilings; short polls so a firing shows up quickly."""
    return Settings(
        environment=Environment.DEVELOPMENT,
        api_flag="1",
        worker_flag="1",
        database_url=url,
        tenants=(DEMO_TENANT,),
        ceilings=CeilingSettings(
            max_run_timeout_seconds=3600,
            max_misfire_grace_seconds=3600,
            max_steps=100,
            max_model_calls=100,
            max_tool_calls=100,
            max_cost_per_run=Decimal("10"),
            max_active_runs=10,
            max_materializations_per_minute=60,
            max_daily_cost=Decimal("100"),
            max_monthly_cost=Decimal("1000"),
        ),
        fallback_poll_seconds=2.0,
        admission_backoff_seconds=2.0,
    )


Announce = Callable[[str, str, str], None]
"""Called once the stack serves: (base URL, the demo bearer token, a curl line). The
token is handed to the developer, never stored in a model or logged."""


def curl_line(url: str, token: str, clock: Clock) -> str:
    """Shell lines to paste: they set ``$URL`` and ``$TOKEN``, compute the firing time when
    pasted (a minute later, UTC; GNU or BSD ``date``), create a one-time schedule and set
    ``$ID`` to its id (or print the refusal and fail). Each paste is a new schedule (the
    idempotency key carries the time). ``clock`` is unused: the time is the paste's."""
    del clock
    body = {
        "title": "Hello from scheduling dev",
        "instruction": "Say hello. [script:succeed]",
        "cadence": {"kind": "ONCE", "at": "@AT@"},
        "agent_id": str(DEMO_AGENT),
        "requested_scopes": [],
        "limits": DEMO_LIMITS,
        "run_timeout_seconds": 300,
        "misfire_grace_seconds": 600,
        "max_consecutive_failures": 2,
    }
    data = "'" + json.dumps(body).replace('"@AT@"', '"\'"$AT"\'"') + "'"
    pick_id = (
        "python3 -c 'import json,sys; d=json.load(sys.stdin);"
        ' print(d["id"]) if "id" in d else sys.exit(json.dumps(d))\''
    )
    return "\n".join(
        (
            f"export URL={shlex.quote(url)} TOKEN={shlex.quote(token)}",
            "AT=$(date -u -d '+1 minute' +%Y-%m-%dT%H:%M:%SZ 2>/dev/null"
            " || date -u -v+1M +%Y-%m-%dT%H:%M:%SZ)",
            'ID=$(curl -sS -X POST "$URL/v1/schedules" -H "Authorization: Bearer $TOKEN" \\',
            "  -H \"Idempotency-Key: hello-$AT\" -H 'Content-Type: application/json' \\",
            f"  -d {data} \\",
            f"  | {pick_id})",
            'echo "schedule $ID fires at $AT"',
        )
    )


async def provision_demo(url: str, clock: Clock) -> None:
    async with bootstrap.open_provisioning(url, clock) as service:
        await service.import_principals(
            {
                "principals": [
                    {
                        "tenant_id": DEMO_TENANT,
                        "principal_id": DEMO_PRINCIPAL,
                        "scopes": sorted(PLATFORM_SCOPES),
                        "authority_inputs": {"roles": ["developer"]},
                    }
                ]
            }
        )
        await service.import_agents(
            {
                "agents": [
                    {
                        "agent_id": str(DEMO_AGENT),
                        "version": "v1",
                        "policy_profile": "default",
                        "limits": DEMO_LIMITS,
                        "spec": {"model": "scripted", "tools": []},
                        "active": True,
                    }
                ]
            }
        )


async def run_dev_stack(
    url: str,
    stop: asyncio.Event,
    *,
    clock: Clock,
    ids: IdGenerator,
    host: str = "127.0.0.1",
    port: int = 8080,
    state_dir: Path,
    announce: Announce,
) -> None:
    """Migrate, provision, then serve every role until ``stop`` is set."""
    await bootstrap.upgrade_to_head(url)
    await provision_demo(url, clock)
    tokens = state_dir / "tokens.json"
    _, token = bootstrap.issue_token(tokens, DEMO_TENANT, DEMO_PRINCIPAL, clock.now())
    settings = dev_settings(url)
    plane = bootstrap.build_control_plane(
        settings, clock=clock, ids=ids, tokens=bootstrap.token_file(tokens)
    )
    scheduler = bootstrap.build_scheduler(
        bootstrap.SchedulerSettings.of(settings), clock=clock, ids=ids, stop=stop
    )
    workers = [
        bootstrap.build_run_worker(settings, RunPriority.ASYNC, clock=clock, ids=ids),
        bootstrap.build_run_worker(settings, RunPriority.INTERACTIVE, clock=clock, ids=ids),
    ]
    try:
        await scheduler.start()
        async with bootstrap.running_http(plane, host, port) as base:
            announce(base, token, curl_line(base, token, clock))
            await asyncio.gather(
                scheduler.worker.run(stop),
                *(w.worker.serve(w.slots, stop) for w in workers),
                stop.wait(),
            )
    finally:
        for role in workers:
            await role.close()
        await scheduler.close()
        await plane.close()


def print_stack(out: TextIO) -> Announce:
    def announce(url: str, bearer: str, curl: str) -> None:
        print(f"control plane: {url}  (OpenAPI: {url}/openapi.json)", file=out)
        print(f"token:         {bearer}", file=out)
        print(
            "paste into a shell: it sets $URL and $TOKEN, and $ID to a new schedule"
            " that fires a minute after you paste it",
            file=out,
        )
        for line in curl.splitlines():
            print(f"  {line}", file=out)
        print(
            'then: curl -sS -H "Authorization: Bearer $TOKEN"'
            ' "$URL/v1/schedules/$ID/occurrences"   (README, "Try the control plane")',
            file=out,
            flush=True,
        )

    return announce


def dev_port(raw: str) -> int | None:
    """``--port`` of ``scheduling dev`` and ``python -m simulation.devstack`` (0: a free
    one); ``None`` after reporting a value that is not a port: the stable
    ``schedule.config.unparseable`` line and exit 1, as ``serve --port``, not
    argparse's generic usage error (exit 2)."""
    try:
        return parse_port(raw, "--port", lowest=0)
    except ConfigurationError as exc:
        report(list(exc.details["problems"]))
        return None


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url", default=None, help="default: $AGENT_SCHEDULE_DATABASE_URL"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", default="8080", help="port (default 8080; 0: a free one)")


@command("dev", "development only: API + schedule worker + run workers in one process", _configure)
def dev(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    if os.environ.get("AGENT_SCHEDULE_ENVIRONMENT", "").strip().lower() == "production":
        report([f"{bootstrap.DEVELOPMENT_IN_PRODUCTION}: scheduling dev never runs in production"])
        return 1
    port = dev_port(args.port)
    if port is None:
        return 1
    url = args.database_url or os.environ.get("AGENT_SCHEDULE_DATABASE_URL")
    if not url:
        print(
            "error: give --database-url or set AGENT_SCHEDULE_DATABASE_URL"
            " (or run `python -m simulation.devstack` for a throwaway PostgreSQL)",
            file=sys.stderr,
        )
        return 2
    clock, ids = system_edge()
    with tempfile.TemporaryDirectory(prefix="scheduling-dev-") as state:

        async def body(stop: asyncio.Event) -> None:
            await run_dev_stack(
                url,
                stop,
                clock=clock,
                ids=ids,
                host=args.host,
                port=port,
                state_dir=Path(state),
                announce=print_stack(out),
            )

        try:
            asyncio.run(until_signalled(body))
        except bootstrap.StartupRefused as exc:
            report(exc.problems)
            return 1
    return 0
