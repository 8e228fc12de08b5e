"""The ordinary tool pipeline (see docs/decisions/1600-tool-pipeline-and-its-vocabulary.md).

``spec`` declares a tool (classification and closed schema), ``registry`` binds specs to
handlers, ``pipeline`` checks and runs calls, ``approval`` holds the policy and the port,
``arguments`` validates inputs, ``conversation`` drives scripted model turns.
"""

from scheduling.runtime.tool_pipeline.approval import (
    APPROVAL_EFFECTS,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalPort,
    ApprovalRequest,
    ScriptedApprovals,
)
from scheduling.runtime.tool_pipeline.arguments import (
    INVALID_ARGUMENTS,
    arguments_hash,
    validate_arguments,
)
from scheduling.runtime.tool_pipeline.context import (
    PreparedCall,
    ToolExecutionContext,
    ToolResult,
    ToolStatus,
)
from scheduling.runtime.tool_pipeline.conversation import (
    AskUser,
    Conversation,
    Proposal,
    ProposedCall,
    ScriptedModel,
    scripted,
)
from scheduling.runtime.tool_pipeline.pipeline import (
    APPROVAL_DENIED,
    APPROVAL_STALE,
    OUTPUT_TOO_LARGE,
    TOOL_SCOPE_DENIED,
    TOOL_TIMEOUT,
    TOOL_UNDECLARED,
    TOOL_UNKNOWN,
    Governance,
    ToolDecision,
    ToolOutput,
    ToolPipeline,
    cut_to_bytes,
    declared_tools,
    output_bytes,
)
from scheduling.runtime.tool_pipeline.registry import (
    Normalizer,
    RegisteredTool,
    TextHandler,
    ToolHandler,
    ToolRegistry,
)
from scheduling.runtime.tool_pipeline.spec import (
    TOOL_INVALID_SPEC,
    Idempotency,
    OutputTrust,
    Risk,
    SideEffect,
    TargetKind,
    ToolKind,
    ToolSource,
    ToolSpec,
)

__all__ = [
    "APPROVAL_DENIED",
    "APPROVAL_EFFECTS",
    "APPROVAL_STALE",
    "INVALID_ARGUMENTS",
    "OUTPUT_TOO_LARGE",
    "TOOL_INVALID_SPEC",
    "TOOL_SCOPE_DENIED",
    "TOOL_TIMEOUT",
    "TOOL_UNDECLARED",
    "TOOL_UNKNOWN",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalPort",
    "ApprovalRequest",
    "AskUser",
    "Conversation",
    "Governance",
    "Idempotency",
    "Normalizer",
    "OutputTrust",
    "PreparedCall",
    "Proposal",
    "ProposedCall",
    "RegisteredTool",
    "Risk",
    "ScriptedApprovals",
    "ScriptedModel",
    "SideEffect",
    "TargetKind",
    "TextHandler",
    "ToolDecision",
    "ToolExecutionContext",
    "ToolHandler",
    "ToolKind",
    "ToolOutput",
    "ToolPipeline",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "ToolSpec",
    "ToolStatus",
    "arguments_hash",
    "cut_to_bytes",
    "declared_tools",
    "output_bytes",
    "scripted",
    "validate_arguments",
]
