"""``scheduling mcp [--transport stdio|http]``: the model tools over the Model Context
Protocol (ADRs 1601, 2110).

The same settings and environment as ``scheduling serve`` (PostgreSQL URL, the two
schedule flags, production refusals) and the same token file (``--tokens-file`` or
``AGENT_SCHEDULE_API_TOKENS_FILE``; digests only, issued by ``scheduling tokens add``);
scopes come from the durable principal directory on every call.

* ``--transport http``: streamable HTTP on ``--host``/``--port`` at ``/mcp/``; every
  request carries ``Authorization: Bearer <token>``.
* ``--transport stdio`` (the default; an MCP host starts the process): stdio has no
  per-request header, so the bearer token is given once at start, in
  ``AGENT_SCHEDULE_MCP_TOKEN`` or a file named by ``--bearer-file`` (never an argument,
  which every process listing shows). Startup refuses an unknown token; every call
  resolves it again, so a revocation applies to the next call. stdout carries only
  the protocol; everything else goes to stderr.

Approvals are elicited from the client; ``--approval-timeout`` seconds without an answer
is the retryable ``schedule.tool.approval_timeout`` (ADR 2121).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO
from uuid import UUID

# Read when serving starts: the composition root imports the MCP SDK on first access,
# so ``mcp --help`` does not (issue 26 item 4).
from scheduling import bootstrap
from scheduling.cli.edge import (
    TOKENS_ENV,
    configure_logging,
    load_settings,
    report,
    system_edge,
    tokens_path,
)
from scheduling.cli.lifetime import until_signalled
from scheduling.cli.registry import command
from scheduling.config import ConfigurationError, Settings, parse_port
from scheduling.domain.reasons import reason

TOKEN_ENV = "AGENT_SCHEDULE_MCP_TOKEN"  # noqa: S105 (the variable's name, not a token)
AGENT_ENV = "AGENT_SCHEDULE_MCP_AGENT_ID"
PORT_ENV = "AGENT_SCHEDULE_MCP_PORT"
MCP_TOKENS_MISSING = reason(
    "schedule.mcp.tokens_file_missing",
    "MCP serving needs the API token file (production: existing)",
)
MCP_AGENT_MISSING = reason(
    "schedule.mcp.agent_missing", "MCP serving needs the default agent's id (a UUID)"
)
MCP_TOKEN_MISSING = reason(
    "schedule.mcp.token_missing", "stdio MCP serving needs the caller's bearer token at start"
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default: an MCP host starts this process) or streamable HTTP",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("AGENT_SCHEDULE_MCP_HOST", "127.0.0.1"),
        help="http: address to listen on (default: $AGENT_SCHEDULE_MCP_HOST or 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        default=None,
        help=f"http: port (default: ${PORT_ENV} or 8090; 0: a free one)",
    )
    parser.add_argument(
        "--tokens-file", default=None, help=f"the API token file (default: ${TOKENS_ENV})"
    )
    parser.add_argument(
        "--bearer-file",
        default=None,
        help=f"stdio: a file holding the caller's bearer token (default: ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--agent-id", default=None, help=f"the default agent's id (default: ${AGENT_ENV})"
    )
    parser.add_argument(
        "--approval-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for an approval (300); then the retryable approval_timeout",
    )


def _agent(raw: str | None) -> UUID | None:
    try:
        return UUID(raw) if raw else None
    except ValueError:
        return None


def mcp_port(flag: str | None, env: str | None) -> int:
    """``--port``, else ``AGENT_SCHEDULE_MCP_PORT``, else 8090; parsed when the command
    runs, not while building the parser (a bad variable broke every subcommand), and
    a bad value is ``ConfigurationError`` (``schedule.config.unparseable``), as
    ``serve --port``."""
    raw, name = (flag, "--port") if flag is not None else (env, PORT_ENV)
    if raw is None or (flag is None and not raw.strip()):
        return 8090
    return parse_port(raw, name, lowest=0)


def _bearer(args: argparse.Namespace) -> str | None:
    if args.bearer_file:
        try:
            return Path(args.bearer_file).read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):  # unreadable: no token (refused at startup)
            return None
    return os.environ.get(TOKEN_ENV, "").strip() or None


def _problems(
    args: argparse.Namespace, settings: Settings
) -> tuple[list[str], Path | None, UUID | None, str | None, int]:
    problems: list[str] = []
    try:
        port = mcp_port(args.port, os.environ.get(PORT_ENV))
    except ConfigurationError as exc:
        problems.extend(exc.details["problems"])
        port = -1
    path = tokens_path(args.tokens_file, settings)
    if path is None:
        problems.append(
            f"{MCP_TOKENS_MISSING}: give --tokens-file or set {TOKENS_ENV} to an existing file"
        )
    agent = _agent(args.agent_id or os.environ.get(AGENT_ENV))
    if agent is None:
        problems.append(f"{MCP_AGENT_MISSING}: give --agent-id or set {AGENT_ENV} to a UUID")
    token = _bearer(args) if args.transport == "stdio" else None
    if args.transport == "stdio" and token is None:
        problems.append(f"{MCP_TOKEN_MISSING}: set {TOKEN_ENV} or give --bearer-file")
    return problems, path, agent, token, port


def _announce_stdio() -> None:
    print("serving MCP on stdio", file=sys.stderr, flush=True)


@command("mcp", "serve the model tools over MCP (stdio or streamable HTTP)", _configure)
def mcp(args: argparse.Namespace, out: TextIO) -> int:
    configure_logging()
    settings = load_settings()
    if settings is None:
        return 1
    problems, path, agent, token, port = _problems(args, settings)
    if problems or path is None or agent is None:
        report(problems)
        return 1
    clock, ids = system_edge()

    async def body(stop: asyncio.Event) -> None:
        role = bootstrap.build_mcp(
            settings,
            clock=clock,
            ids=ids,
            tokens=bootstrap.token_file(path),
            default_agent_id=agent,
            approval_timeout_seconds=args.approval_timeout,
        )
        try:
            if token is not None:
                await bootstrap.serve_mcp_stdio(role, token, stop, started=_announce_stdio)
            else:
                url = f"http://{args.host}:{port}/mcp/"
                print(f"serving MCP on {url}", file=out, flush=True)
                await bootstrap.serve_mcp_http(role, args.host, port, stop)
        finally:
            await role.close()

    try:
        asyncio.run(until_signalled(body))
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    print("MCP server stopped", file=sys.stderr)
    return 0
