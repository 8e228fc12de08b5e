"""The Model Context Protocol edge: the six schedule tools for real model clients.

A sibling of the HTTP and CLI edges: it depends on the tool pipeline (and through it
the service layer), never on another edge or an adapter. Streamable HTTP transport;
every request carries ``Authorization: Bearer <token>``; approvals are completed by
the client through MCP elicitation (see docs/decisions/1601-mcp-edge.md).
"""

from scheduling.mcp.edge import (
    IDEMPOTENCY_FIELD,
    UNAUTHENTICATED,
    Authenticator,
    ElicitedApprovals,
    McpEdge,
    approval_schema,
)

__all__ = [
    "IDEMPOTENCY_FIELD",
    "UNAUTHENTICATED",
    "Authenticator",
    "ElicitedApprovals",
    "McpEdge",
    "approval_schema",
]
