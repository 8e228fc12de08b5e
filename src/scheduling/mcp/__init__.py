"""The Model Context Protocol edge: the six schedule tools for real model clients.

A sibling of the HTTP and CLI edges: it depends on the tool pipeline (and through it
the service layer), never on another edge or an adapter. Two transports: streamable
HTTP (``Authorization: Bearer <token>`` on every request) and stdio (the token given
once at start, resolved again on every call); approvals are completed by the client
through MCP elicitation (docs/decisions/1601-mcp-edge.md, 2110-2112). ``scheduling mcp``
serves it; ``bootstrap.build_mcp`` wires it.
"""

from scheduling.mcp.edge import (
    ELICITATION_UNSUPPORTED,
    IDEMPOTENCY_FIELD,
    INTERNAL,
    RESULT_META,
    UNAUTHENTICATED,
    ApprovalUnanswered,
    Authenticator,
    ElicitedApprovals,
    McpEdge,
    approval_schema,
    approved_by,
    result_text,
    tool_result,
)
from scheduling.mcp.serving import serve_until, serving

__all__ = [
    "ELICITATION_UNSUPPORTED",
    "IDEMPOTENCY_FIELD",
    "INTERNAL",
    "RESULT_META",
    "UNAUTHENTICATED",
    "ApprovalUnanswered",
    "Authenticator",
    "ElicitedApprovals",
    "McpEdge",
    "approval_schema",
    "approved_by",
    "result_text",
    "serve_until",
    "serving",
    "tool_result",
]
