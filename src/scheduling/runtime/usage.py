"""Run usage, limits and their enforcement (pure; no I/O, no clock)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scheduling.domain.errors import SchedulingError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits, format_money
from scheduling.ports.runtime import Action, ModelCall, ToolCall, Wait

STEP_LIMIT = reason("schedule.runtime.step_limit", "The run reached its step limit")
MODEL_CALL_LIMIT = reason(
    "schedule.runtime.model_call_limit", "The run reached its model-call limit"
)
TOOL_CALL_LIMIT = reason("schedule.runtime.tool_call_limit", "The run reached its tool-call limit")
COST_LIMIT = reason("schedule.runtime.cost_limit", "The run reached its cost limit")
SYNTHESIS_RESERVE = reason(
    "schedule.runtime.synthesis_reserve",
    "The run reached a final-synthesis reserve; it must answer without another tool call",
)
LIMITS_INVALID = reason(
    "schedule.runtime.limits_invalid", "The run has no complete finite limits; it never starts"
)


@dataclass(frozen=True)
class Usage:
    """What a run consumed; persisted with every checkpoint and on the run row."""

    steps: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    cost: Decimal = Decimal(0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.steps + other.steps,
            self.model_calls + other.model_calls,
            self.tool_calls + other.tool_calls,
            self.cost + other.cost,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "cost": format_money(self.cost),
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        if not isinstance(data, dict):
            return cls()
        return cls(
            int(data.get("steps", 0)),
            int(data.get("model_calls", 0)),
            int(data.get("tool_calls", 0)),
            Decimal(str(data.get("cost", "0"))),
        )


def charge(action: Action) -> Usage:
    """What performing ``action`` costs (Finish and Fail are free)."""
    if isinstance(action, ModelCall):
        return Usage(steps=1, model_calls=1, cost=action.cost)
    if isinstance(action, ToolCall):
        return Usage(steps=1, tool_calls=1, cost=action.cost)
    if isinstance(action, Wait):
        return Usage(steps=1)
    return Usage()


def parse_limits(data: Any) -> RunLimits | None:
    """The run's limits, or ``None`` when they are missing or not finite and positive."""
    if not isinstance(data, dict):
        return None
    try:
        return RunLimits.model_validate(data)
    except (SchedulingError, ValueError):
        return None


def exceeded(limits: RunLimits, after: Usage) -> str | None:
    """The first limit ``after`` would pass, or ``None`` (reaching a limit is allowed)."""
    if after.steps > limits.max_steps:
        return STEP_LIMIT
    if after.model_calls > limits.max_model_calls:
        return MODEL_CALL_LIMIT
    if after.tool_calls > limits.max_tool_calls:
        return TOOL_CALL_LIMIT
    if after.cost > limits.max_cost:
        return COST_LIMIT
    return None


def in_synthesis_reserve(limits: RunLimits, usage: Usage) -> bool:
    """Whether research reached a reserved step, model-call or cost boundary (spec:
    the next request must synthesize from evidence already in context). All-zero
    reserves keep the unreserved behaviour."""
    return (
        (limits.reserve_steps > 0 and usage.steps >= limits.max_steps - limits.reserve_steps)
        or (
            limits.reserve_model_calls > 0
            and usage.model_calls >= limits.max_model_calls - limits.reserve_model_calls
        )
        or (limits.reserve_cost > 0 and usage.cost >= limits.max_cost - limits.reserve_cost)
    )
