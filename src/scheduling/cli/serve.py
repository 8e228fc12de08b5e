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
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, TextIO

# The composition root's and the exporter's names are read when a role starts, not at
# import: both packages import a module on first access, so ``scheduler --help``
# imports no role and no uvicorn (issue 26 item 4).
from scheduling import bootstrap
from scheduling import metrics as metrics_package
from scheduling.cli.edge import configure_logging, load_settings, report, system_edge
from scheduling.cli.lifetime import until_signalled as _until_signalled
from scheduling.cli.registry import command
from scheduling.cli.role_loop import run_role
from scheduling.config import ConfigurationError, Settings, parse_port
from scheduling.domain.reasons import reason
from scheduling.ports.runtime import RunPriority

if TYPE_CHECKING:
    from scheduling.metrics import Exported

_log = logging.getLogger(__name__)


METRICS_PORT_UNAVAILABLE = reason(
    "schedule.metrics.port_unavailable", "The role's metrics port could not be bound"
)


class _PortUnavailable(Exception):
    """The metrics port could not be bound (its message is the problem line)."""


def _metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        default=None,
        help="Prometheus port (default: $AGENT_SCHEDULE_METRICS_PORT; 0 or unset: none)",
    )
    parser.add_argument(
        "--metrics-host",
        default=None,
        help="address of the metrics port (default: $AGENT_SCHEDULE_METRICS_HOST or 127.0.0.1)",
    )


def metrics_address(args: argparse.Namespace, settings: Settings) -> tuple[str, int] | None:
    """Where to serve the role's metrics (``None``: nowhere, port 0 or unset). A bad
    ``--metrics-port`` is ``ConfigurationError`` (``schedule.config.unparseable``), as
    ``serve --port``, not argparse's generic usage error (exit 2)."""
    port = (
        settings.metrics_port
        if args.metrics_port is None
        else parse_port(args.metrics_port, "--metrics-port", lowest=0)
    )
    return (args.metrics_host or settings.metrics_host, port) if port else None


def _refused(exc: ConfigurationError) -> int:
    report(list(exc.details["problems"]))
    return 1


async def _serve_metrics(
    stack: AsyncExitStack, exported: Exported, address: tuple[str, int] | None
) -> str:
    """Start the role's metrics port (if configured); the text to print beside "started"."""
    if address is None:
        return ""
    host, port = address
    try:
        bound = await stack.enter_async_context(
            metrics_package.serving_metrics(exported, host, port)
        )
    except OSError as exc:
        raise _PortUnavailable(f"{METRICS_PORT_UNAVAILABLE}: {host}:{port}: {exc}") from exc
    return f"; metrics on http://{host}:{bound}/metrics"


@command("scheduler", "run the schedule worker until SIGINT/SIGTERM", _metrics_arguments)
def scheduler(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    try:
        address = metrics_address(args, settings)
    except ConfigurationError as exc:
        return _refused(exc)
    clock, ids = system_edge()

    async def body(stop: asyncio.Event) -> None:
        role = bootstrap.build_scheduler(
            bootstrap.SchedulerSettings.of(settings), clock=clock, ids=ids, stop=stop
        )
        metrics = bootstrap.scheduler_metrics(role, clock=clock)
        try:
            async with AsyncExitStack() as stack:
                try:
                    await role.start()
                except Exception:  # best effort: the table scan still finds every due one
                    _log.warning("wake listener unavailable; polling only", exc_info=True)
                served = await _serve_metrics(stack, metrics, address)
                print(f"scheduler started{served}", file=out, flush=True)
                await role.worker.run(stop)
        finally:
            await role.close()
            _log.info("scheduler metrics: %s", role.worker.metrics.summary())

    return _lifetime(body, "scheduler stopped", out)


def _lifetime(body: Callable[[asyncio.Event], Awaitable[None]], stopped: str, out: TextIO) -> int:
    """Run ``body`` until signalled on the roles' loop (uvloop where it imports, ADR
    2640); a refusal (or a taken metrics port) is exit 1."""
    try:
        run_role(_until_signalled(body))
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    except _PortUnavailable as exc:
        report([str(exc)])
        return 1
    print(stopped, file=out, flush=True)
    return 0


def _configure_run_worker(parser: argparse.ArgumentParser) -> None:
    _metrics_arguments(parser)
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
    try:
        address = metrics_address(args, settings)
    except ConfigurationError as exc:
        return _refused(exc)
    clock, ids = system_edge()
    priority = (
        RunPriority.INTERACTIVE if args.priority_class == "interactive" else RunPriority.ASYNC
    )

    async def body(stop: asyncio.Event) -> None:
        role = bootstrap.build_run_worker(settings, priority, clock=clock, ids=ids)
        metrics = bootstrap.run_worker_metrics(role, settings, clock=clock)
        try:
            async with AsyncExitStack() as stack:
                served = await _serve_metrics(stack, metrics, address)
                print(
                    f"run worker {role.worker.owner} started ({role.slots} slots){served}",
                    file=out,
                    flush=True,
                )
                await role.worker.serve(role.slots, stop)
        finally:
            await role.close()

    return _lifetime(body, "run worker stopped", out)
