"""``scheduling serve [--host H] [--port P] [--tokens-file F] [--workers N]``: the HTTP
control plane.

The production API role from ``bootstrap.build_control_plane`` served by uvicorn until
SIGINT/SIGTERM. Bearer tokens come from the token file (``--tokens-file`` or
``AGENT_SCHEDULE_API_TOKENS_FILE``; digests only, ADR 1501); scopes come from the
durable principal directory. Production refuses to start without a token file.

``--workers N`` (default ``AGENT_SCHEDULE_API_WORKERS`` or 1; ADR 2320): N spawned
processes, each building its own control plane and naming itself, accept on one socket
the parent binds. The parent checks the settings and builds (then closes) a control
plane first, so a refusal is reported once, by it, before any worker starts.

Each serving process runs on the roles' loop (``role_loop.run_role``: uvloop where it
imports), which is the loop uvicorn's own ``loop="auto"`` picks (ADR 2700).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

# The composition root's names are read when serving starts, not at import: the package
# imports a builder's module (FastAPI, uvicorn) on first access, so ``serve --help``
# imports neither (issue 26 item 4).
from scheduling import bootstrap
from scheduling.cli.edge import (
    TOKENS_ENV,
    configure_logging,
    load_settings,
    report,
    system_edge,
    tokens_path,
)
from scheduling.cli.lifetime import listening_socket, supervise, until_signalled
from scheduling.cli.registry import command
from scheduling.cli.role_loop import run_role
from scheduling.config import UNPARSEABLE, ConfigurationError, Settings, parse_port
from scheduling.domain.reasons import reason

if TYPE_CHECKING:
    from scheduling.bootstrap import ControlPlane

WORKERS_ENV = "AGENT_SCHEDULE_API_WORKERS"
PORT_ENV = "AGENT_SCHEDULE_API_PORT"
TOKENS_MISSING = reason(
    "schedule.http.tokens_file_missing", "Production serving needs an existing API token file"
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default=os.environ.get("AGENT_SCHEDULE_API_HOST", "127.0.0.1"),
        help="address to listen on (default: $AGENT_SCHEDULE_API_HOST or 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        default=None,
        help=f"port (default: ${PORT_ENV} or 8080)",
    )
    parser.add_argument("--tokens-file", default=None, help=f"default: ${TOKENS_ENV}")
    parser.add_argument(
        "--workers",
        default=None,
        help=f"worker processes sharing the socket (default: ${WORKERS_ENV} or 1)",
    )


def api_port(flag: str | None, env: str | None) -> int | None:
    """``--port``, else ``AGENT_SCHEDULE_API_PORT``, else 8080; ``None`` after reporting
    a value that is not a port (parsed here, not by argparse, so a bad value is a
    stable ``schedule.config.unparseable`` refusal, exit 1, like the other settings)."""
    raw, name = (flag, "--port") if flag is not None else (env, PORT_ENV)
    if raw is None or (flag is None and not raw.strip()):
        return 8080
    try:
        return parse_port(raw, name)
    except ConfigurationError as exc:
        report(list(exc.details["problems"]))
        return None


def worker_count(flag: str | None, env: str | None) -> int | None:
    """``--workers``, else ``AGENT_SCHEDULE_API_WORKERS``, else 1; ``None`` after
    reporting a value that is not a positive integer."""
    raw, name = (flag, "--workers") if flag is not None else (env, WORKERS_ENV)
    if raw is None:
        return 1
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if count < 1:
        report([f"{UNPARSEABLE}: {name}={raw!r} must be a positive integer (worker processes)"])
        return None
    return count


@command("serve", "serve the HTTP control plane (uvicorn) until SIGINT/SIGTERM", _configure)
def serve(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    port = api_port(args.port, os.environ.get(PORT_ENV))
    workers = worker_count(args.workers, os.environ.get(WORKERS_ENV))
    if port is None or workers is None:
        return 1
    path = tokens_path(args.tokens_file, settings)
    if path is None:
        report([f"{TOKENS_MISSING}: give --tokens-file or set {TOKENS_ENV} to an existing file"])
        return 1
    if workers > 1 and settings.storage == "memory":
        report(
            [f"{bootstrap.MEMORY_REPOSITORIES}: {workers} workers would each hold their own store"]
        )
        return 1
    if workers > 1:
        return _serve_workers(settings, args.host, port, path, workers, out)

    async def body(stop: asyncio.Event) -> None:
        plane = _plane(settings, path)
        try:
            print(f"serving on http://{args.host}:{port}", file=out, flush=True)
            await bootstrap.serve_http(plane, args.host, port, stop)
        finally:
            await plane.close()

    try:
        run_role(until_signalled(body))
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    print("server stopped", file=sys.stderr)
    return 0


def _plane(settings: Settings, tokens: Path) -> ControlPlane:
    clock, ids = system_edge()
    return bootstrap.build_control_plane(
        settings, clock=clock, ids=ids, tokens=bootstrap.token_file(tokens)
    )


def _serve_workers(
    settings: Settings, host: str, port: int, tokens: Path, workers: int, out: TextIO
) -> int:
    async def trial() -> None:  # what a worker would refuse is refused once, here
        await _plane(settings, tokens).close()

    try:
        asyncio.run(trial())
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    with listening_socket(host, port) as sock:
        print(f"serving on http://{host}:{port} ({workers} workers)", file=out, flush=True)
        code = supervise(
            _worker, lambda i: (sock, host, port, str(tokens), i, os.getpid()), workers
        )
    print("server stopped", file=sys.stderr)
    return code


def _worker(
    sock: socket.socket, host: str, port: int, tokens: str, index: int, parent: int
) -> None:
    """One of ``serve --workers N``'s processes: the one-process path on a shared socket."""
    configure_logging("serve", worker=index)
    settings = load_settings()
    if settings is None:
        raise SystemExit(1)

    async def body(stop: asyncio.Event) -> None:
        plane = _plane(settings, Path(tokens))
        try:
            await bootstrap.serve_http(plane, host, port, stop, sock)
        finally:
            await plane.close()

    try:
        run_role(until_signalled(body, parent=parent))
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        raise SystemExit(1) from None
