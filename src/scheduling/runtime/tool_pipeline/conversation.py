"""A scripted conversation: model turns that propose tool calls into the ordinary pipeline.

No model provider exists here (ADR 0703). A ``ScriptedModel`` decides each turn from
the results so far, as a model would: it proposes one call (tool, arguments, key) or
stops, or asks the user when a reference is missing or ambiguous. The conversation
offers only the default agent's roster and sends every proposal through the same
``ToolPipeline.call`` a real model's call reaches (scope check, arguments, ledger,
approval, effect), so what a gate proves is the pipeline, not the service alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from scheduling.domain.identity import Principal
from scheduling.runtime.tool_pipeline.context import ToolExecutionContext, ToolResult, ToolStatus
from scheduling.runtime.tool_pipeline.pipeline import TOOL_UNDECLARED, ToolPipeline


@dataclass(frozen=True)
class ProposedCall:
    tool: str
    arguments: Mapping[str, Any]
    idempotency_key: str
    version: str | None = None


@dataclass(frozen=True)
class AskUser:
    """The model asks instead of guessing (no or several plausible matches)."""

    question: str


Proposal = ProposedCall | AskUser | None
ScriptedModel = Callable[[list[ToolResult]], Proposal]


def scripted(calls: Iterable[ProposedCall]) -> ScriptedModel:
    """A model that proposes ``calls`` in order, whatever the results."""
    queue = list(calls)

    def model(results: list[ToolResult]) -> Proposal:
        return queue[len(results)] if len(results) < len(queue) else None

    return model


@dataclass
class Conversation:
    """One chat session of one principal with the default agent's roster."""

    pipeline: ToolPipeline
    principal: Principal
    roster: frozenset[str]
    session_id: UUID | None = None
    results: list[ToolResult] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)

    async def propose(self, call: ProposedCall) -> ToolResult:
        """One model turn's call through the pipeline (tools off the roster are refused)."""
        if call.tool not in self.roster:
            result = ToolResult(
                call.tool, call.version or "", ToolStatus.FAILED, reason_code=TOOL_UNDECLARED
            )
        else:
            context = ToolExecutionContext(
                principal=self.principal,
                idempotency_key=call.idempotency_key,
                session_id=self.session_id,
            )
            result = await self.pipeline.call(
                call.tool, dict(call.arguments), context, version=call.version
            )
        self.results.append(result)
        return result

    async def play(self, model: ScriptedModel, max_turns: int = 20) -> list[ToolResult]:
        """Run turns until the model stops or asks the user; the results of this play."""
        start = len(self.results)
        for _ in range(max_turns):
            proposal = model(self.results[start:])
            if proposal is None:
                break
            if isinstance(proposal, AskUser):
                self.questions.append(proposal.question)
                break
            await self.propose(proposal)
        return self.results[start:]
