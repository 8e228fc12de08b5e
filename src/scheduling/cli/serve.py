"""``scheduling scheduler`` and ``scheduling run-worker --class interactive|async``:
long-running roles that stop gracefully on SIGINT/SIGTERM.

The first signal sets the stop event: the schedule worker wakes from its sleep, the
pass in progress finishes its transaction, and the loop returns; run workers stop
claiming, and a run still held after ``AGENT_SCHEDULE_RUN_DRAIN_SECONDS`` is
checkpointed and its lease released (fenced), so another worker resumes it at once.
A second signal cancels the loop (a crash, which every transaction already
tolerates: it rolls back, and a lease expires)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import TextIO

from scheduling.bootstrap import (
    SchedulerSettings,
    StartupRefused,
    build_run_worker,
    build_scheduler,
)
from scheduling.cli.edge import configure_logging, load_settings, report, system_edge
from scheduling.cli.lifetime import until_signalled as _until_signalled
from scheduling.cli.registry import command
from scheduling.ports.runtime import RunPriority

_log = logging.getLogger(__name__)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


@command("scheduler", "run the schedule worker until SIGINT/SIGTERM", _no_arguments)
def scheduler(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    clock, ids = system_edge()

    async def body(stop: asyncio.Event) -> None:
        role = build_scheduler(SchedulerSettings.of(settings), clock=clock, ids=ids, stop=stop)
        try:
            try:
                await role.start()
            except Exception:  # best effort: the table scan still finds every due schedule
                _log.warning("wake listener unavailable; polling only", exc_info=True)
            print("scheduler started", file=out, flush=True)
            await role.worker.run(stop)
        finally:
            await role.close()
            _log.info("scheduler metrics: %s", role.worker.metrics.summary())

    try:
        asyncio.run(_until_signalled(body))
    except StartupRefused as exc:
        report(exc.problems)
        return 1
    print("scheduler stopped", file=out, flush=True)
    return 0


def _configure_run_worker(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--class",
        dest="priority_class",
        choices=("interactive", "async"),
        required=True,
        help="the priority class this worker claims (disjoint from the other class)",
    )


@command("run-worker", "run a run worker for one priority class", _configure_run_worker)
def run_worker(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    clock, ids = system_edge()
    priority = (
        RunPriority.INTERACTIVE if args.priority_class == "interactive" else RunPriority.ASYNC
    )

    async def body(stop: asyncio.Event) -> None:
        role = build_run_worker(settings, priority, clock=clock, ids=ids)
        try:
            print(
                f"run worker {role.worker.owner} started ({role.slots} slots)",
                file=out,
                flush=True,
            )
            await role.worker.serve(role.slots, stop)
        finally:
            await role.close()

    try:
        asyncio.run(_until_signalled(body))
    except StartupRefused as exc:
        report(exc.problems)
        return 1
    print("run worker stopped", file=out, flush=True)
    return 0
