"""The run substrate: queue claims, the run worker, the scripted agent and the minimal
tool pipeline (see docs/runtime.md). Run cancellation is a use case of the public edges:
``scheduling.service.cancellation``."""

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
    "COST_LIMIT",
    "DEADLINE_EXCEEDED",
    "LEASE_LOST",
    "MODEL_CALL_LIMIT",
    "STEP_LIMIT",
    "TOOL_CALL_LIMIT",
    "TOOL_SCOPE_DENIED",
    "TOOL_UNDECLARED",
    "TOOL_UNKNOWN",
    "LeaseLost",
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
