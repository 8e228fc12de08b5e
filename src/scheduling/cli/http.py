"""``scheduling serve [--host H] [--port P] [--tokens-file F]``: the HTTP control plane.

The production API role from ``bootstrap.build_control_plane`` served by uvicorn until
SIGINT/SIGTERM. Bearer tokens come from the token file (``--tokens-file`` or
``AGENT_SCHEDULE_API_TOKENS_FILE``; digests only, ADR 1501); scopes come from the
durable principal directory. Production refuses to start without a token file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO

from scheduling.bootstrap import StartupRefused, build_control_plane, serve_http, token_file
from scheduling.cli.edge import configure_logging, load_settings, report, system_edge
from scheduling.cli.lifetime import until_signalled
from scheduling.cli.registry import command
from scheduling.domain.reasons import reason

TOKENS_ENV = "AGENT_SCHEDULE_API_TOKENS_FILE"
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
        type=int,
        default=int(os.environ.get("AGENT_SCHEDULE_API_PORT", "8080")),
        help="port (default: $AGENT_SCHEDULE_API_PORT or 8080)",
    )
    parser.add_argument("--tokens-file", default=None, help=f"default: ${TOKENS_ENV}")


@command("serve", "serve the HTTP control plane (uvicorn) until SIGINT/SIGTERM", _configure)
def serve(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    raw = args.tokens_file or os.environ.get(TOKENS_ENV)
    path = Path(raw) if raw else None
    if path is None or (settings.production and not path.is_file()):
        report([f"{TOKENS_MISSING}: give --tokens-file or set {TOKENS_ENV} to an existing file"])
        return 1
    clock, ids = system_edge()

    async def body(stop: asyncio.Event) -> None:
        plane = build_control_plane(settings, clock=clock, ids=ids, tokens=token_file(path))
        try:
            print(f"serving on http://{args.host}:{args.port}", file=out, flush=True)
            await serve_http(plane, args.host, args.port, stop)
        finally:
            await plane.close()

    try:
        asyncio.run(until_signalled(body))
    except StartupRefused as exc:
        report(exc.problems)
        return 1
    print("server stopped", file=sys.stderr)
    return 0
