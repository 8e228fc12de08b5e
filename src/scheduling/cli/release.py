"""``scheduling release-check``: configuration validation plus the privilege checks of
the scheduler login and the run-worker login (connecting as each). Exit 0 only when
all are clean; every problem is printed on its own ``PROBLEM:`` line."""

from __future__ import annotations

import argparse
import asyncio
from typing import TextIO

# Read when the command runs: the composition root imports the privilege checks (and
# the migration head they compare with) on first access, so ``--help`` does not.
from scheduling import bootstrap
from scheduling.cli.edge import load_settings, report
from scheduling.cli.registry import command
from scheduling.config import Settings, validate_release
from scheduling.domain.reasons import reason

SCHEDULER_PRIVILEGES = reason(
    "schedule.config.scheduler_privileges",
    "The scheduler login deviates from the release allowlist (or the schema head differs)",
)
SCHEDULER_UNREACHABLE = reason(
    "schedule.config.scheduler_unreachable", "Release validation could not connect as the scheduler"
)
RUN_WORKER_PRIVILEGES = reason(
    "schedule.config.run_worker_privileges",
    "The run-worker login deviates from its release allowlist (or the schema head differs)",
)
RUN_WORKER_UNREACHABLE = reason(
    "schedule.config.run_worker_unreachable",
    "Release validation could not connect as the run-worker login",
)
TRANSACTION_POOLING = reason(
    "schedule.config.transaction_pooling",
    "A login's URL reaches PostgreSQL through a pooler in transaction or statement mode;"
    " use session pooling or a direct connection",
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scheduler-url",
        default=None,
        help="scheduler login URL (default: AGENT_SCHEDULE_SCHEDULER_DATABASE_URL)",
    )
    parser.add_argument(
        "--run-worker-url",
        default=None,
        help="run-worker login URL (default: AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL)",
    )


async def release_problems(
    settings: Settings, scheduler_url: str | None = None, run_worker_url: str | None = None
) -> list[str]:
    """Every configuration problem, then every privilege problem of the run-worker
    login and of the scheduler login (both required when scheduling is on)."""
    problems = validate_release(settings)
    worker_url = run_worker_url or settings.run_worker_database_url
    if worker_url and (settings.api_enabled or settings.worker_enabled):
        roles = bootstrap.role_names(settings.role_prefix or bootstrap.DEFAULT_ROLE_PREFIX)
        try:
            # A login pooled per transaction is refused before anything else: its
            # privileges cannot be read reliably through such a pooler either.
            pooled = await bootstrap.pooling_problems(worker_url)
            found = [] if pooled else await bootstrap.run_worker_release_problems(worker_url, roles)
        except Exception as exc:  # any connection failure is one reported problem
            problems.append(f"{RUN_WORKER_UNREACHABLE}: {type(exc).__name__}")
        else:
            problems += [f"{TRANSACTION_POOLING}: run-worker login: {p}" for p in pooled]
            problems += [f"{RUN_WORKER_PRIVILEGES}: {problem}" for problem in found]
    url = scheduler_url or settings.scheduler_database_url
    if not (settings.api_enabled or settings.worker_enabled) or not url:
        return problems  # disabled, or the missing login was already reported
    roles = bootstrap.role_names(settings.role_prefix or bootstrap.DEFAULT_ROLE_PREFIX)
    try:
        pooled = await bootstrap.pooling_problems(url)
        found = [] if pooled else await bootstrap.scheduler_release_problems(url, roles)
    except Exception as exc:  # any connection failure is one reported problem
        return [*problems, f"{SCHEDULER_UNREACHABLE}: {type(exc).__name__}"]
    return (
        problems
        + [f"{TRANSACTION_POOLING}: scheduler login: {p}" for p in pooled]
        + [f"{SCHEDULER_PRIVILEGES}: {problem}" for problem in found]
    )


@command(
    "release-check",
    "validate release configuration and the scheduler and run-worker logins",
    _configure,
)
def release_check(args: argparse.Namespace, out: TextIO) -> int:
    settings = load_settings()
    if settings is None:
        return 1
    problems = asyncio.run(release_problems(settings, args.scheduler_url, args.run_worker_url))
    if problems:
        report(problems)
        print(f"release check failed: {len(problems)} problem(s)", file=out)
        return 1
    state = "enabled" if settings.api_enabled else "disabled"
    print(f"release check passed (scheduling {state})", file=out)
    return 0
