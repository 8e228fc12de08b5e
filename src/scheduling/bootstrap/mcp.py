"""The MCP role: the model tools served over MCP, stdio or streamable HTTP (ADRs 1601,
2110)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from scheduling.bootstrap.control_plane import edge_authenticator
from scheduling.bootstrap.refusals import FEATURE_DISABLED, refuse
from scheduling.bootstrap.tools import ToolsRole, build_tools
from scheduling.config import Settings
from scheduling.mcp import UNAUTHENTICATED as MCP_UNAUTHENTICATED
from scheduling.mcp import McpEdge
from scheduling.mcp import serve_until as serve_mcp_until
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.tokens import TokenDirectory
from scheduling.runtime.tool_pipeline import DEFAULT_APPROVAL_TIMEOUT_SECONDS
from scheduling.storage import Storage
from scheduling.tools.catalog import schedule_flags_on

# --------------------------------------------------------------------- MCP edge
# The model tools served over MCP (ADRs 1601, 2110): the edge's elicitation is the
# pipeline's approval port; callers authenticate through the HTTP edge's token file
# and the durable principal directory (scopes read on every call).


@dataclass
class McpRole:
    edge: McpEdge
    tools: ToolsRole

    async def close(self) -> None:
        await self.tools.close()


def build_mcp(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    tokens: TokenDirectory,
    default_agent_id: UUID,
    approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    storage: Storage | None = None,
    edge: McpEdge | None = None,
) -> McpRole:
    """``build_tools`` with an ``McpEdge`` attached (its elicitation the approval port,
    ``edge_authenticator`` over ``tokens``). With either schedule flag off the edge
    would serve nothing: startup is refused (``FEATURE_DISABLED``) in every environment;
    production refusals are ``build_api``'s. The pipeline bounds an approval's wait at
    ``approval_timeout_seconds`` (ADR 2121; the elicitation's own bound is a little
    later). Tests inject ``storage``, and for a test of a test a plausible wrong
    ``edge`` (not yet attached; built with the same ``approval_timeout_seconds``)."""
    flags = {"api_enabled": settings.api_enabled, "worker_enabled": settings.worker_enabled}
    if not schedule_flags_on(**flags):
        off = [f"AGENT_SCHEDULE_{name.upper()}" for name, on in flags.items() if not on]
        refuse([f"{FEATURE_DISABLED}: the MCP edge needs both schedule flags; off: {off}"])
    edge = edge or McpEdge(approval_timeout_seconds=approval_timeout_seconds)
    tools = build_tools(
        settings,
        clock=clock,
        ids=ids,
        approvals=edge.approvals,
        default_agent_id=default_agent_id,
        storage=storage,
        approval_timeout_seconds=approval_timeout_seconds,
    )
    assert tools.api is not None  # both flags on: build_tools built the API role
    edge.attach(tools.pipeline, tools.roster, edge_authenticator(tools.api.principals, tokens))
    return McpRole(edge, tools)


# ------------------------------------------------------------------- the MCP edge


async def serve_mcp_http(role: McpRole, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve the MCP edge's streamable HTTP app until ``stop`` is set."""
    await serve_mcp_until(role.edge, host, port, stop)


async def serve_mcp_stdio(
    role: McpRole, token: str, stop: asyncio.Event, *, started: Callable[[], None] | None = None
) -> None:
    """Serve the MCP edge on stdio as ``token``'s principal until ``stop`` is set or the
    session ends. A token the token file does not know is refused before serving
    (``StartupRefused`` with ``schedule.mcp.unauthenticated``); ``started`` is called once
    serving begins."""
    if await role.edge.principal(f"Bearer {token}") is None:
        refuse([f"{MCP_UNAUTHENTICATED}: the stdio bearer token is not in the token file"])
    if started is not None:
        started()
    session = asyncio.create_task(role.edge.serve_stdio(token))
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({session, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if not session.done():
        session.cancel()
    await asyncio.gather(session, return_exceptions=True)
