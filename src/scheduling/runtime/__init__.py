"""The run substrate: queue claims, the run worker, cancellation, the scripted agent and
the minimal tool pipeline (see docs/runtime.md)."""

from scheduling.runtime.cancellation import (
    CANCEL_FORBIDDEN,
    CANCEL_TERMINAL,
    RUN_CANCEL_SCOPE,
    RunCancellation,
)
from scheduling.runtime.scripted import Script, ScriptedAgent
from scheduling.runtime.submission import RunSubmitter, Submission
from scheduling.runtime.tools import (
    TOOL_SCOPE_DENIED,
    TOOL_UNDECLARED,
    TOOL_UNKNOWN,
    ToolPipeline,
    ToolRegistry,
    ToolSpec,
    scripted_tools,
)
from scheduling.runtime.usage import (
    COST_LIMIT,
    MODEL_CALL_LIMIT,
    STEP_LIMIT,
    TOOL_CALL_LIMIT,
    Usage,
)
from scheduling.runtime.worker import (
    AGENT_FAILED,
    DEADLINE_EXCEEDED,
    LEASE_LOST,
    LeaseLost,
    RunOutcome,
    RunWorker,
    WorkerSettings,
)

__all__ = [
    "AGENT_FAILED",
    "CANCEL_FORBIDDEN",
    "CANCEL_TERMINAL",
    "COST_LIMIT",
    "DEADLINE_EXCEEDED",
    "LEASE_LOST",
    "MODEL_CALL_LIMIT",
    "RUN_CANCEL_SCOPE",
    "STEP_LIMIT",
    "TOOL_CALL_LIMIT",
    "TOOL_SCOPE_DENIED",
    "TOOL_UNDECLARED",
    "TOOL_UNKNOWN",
    "LeaseLost",
    "RunCancellation",
    "RunOutcome",
    "RunSubmitter",
    "RunWorker",
    "Script",
    "ScriptedAgent",
    "Submission",
    "ToolPipeline",
    "ToolRegistry",
    "ToolSpec",
    "Usage",
    "WorkerSettings",
    "scripted_tools",
]
