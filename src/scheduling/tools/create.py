"""schedule.create: one approval-gated schedule from a conversation (spec "Model-callable
creation"). Versions 1.1.1 (at or cadence), 1.2.0 (adds ``use_website``) and 1.3.0
(adds the ``place_call`` flag, which fails closed because calling is not composed here;
ADR-0213).

The definition pins the default agent's active version and its policy profile; the
limits, reserves, timeout, grace and failure policy are derived here from the agent and
the tenant ceilings and no argument can widen them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from scheduling.domain.errors import UnavailableError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.directories import AgentSpec
from scheduling.runtime.tool_pipeline import PreparedCall, ToolExecutionContext
from scheduling.service.validation import AGENT_UNKNOWN, BROWSER_SCOPE, TENANT_NOT_CONFIGURED
from scheduling.service.values import ScheduleDefinition
from scheduling.tools.common import ScheduleToolDeps, instant, require_future, when_payload

CALLING_UNAVAILABLE = reason(
    "schedule.calling_unavailable", "place_call=true needs calling, which is not composed here"
)
BROWSER_PROFILE_REQUIRED = reason(
    "schedule.browser_profile_required",
    "use_website=true but the current chat has no trusted website binding",
)

RUN_TIMEOUT_SECONDS = 300
MISFIRE_GRACE_SECONDS = 3600
DEFAULT_COST = Decimal(5)
MAX_CONSECUTIVE_FAILURES = 2
RESERVE_STEPS, RESERVE_MODEL_CALLS, RESERVE_COST = 2, 2, Decimal(1)


@dataclass(frozen=True)
class ExecutionBounds:
    limits: RunLimits
    run_timeout_seconds: int
    misfire_grace_seconds: int
    max_consecutive_failures: int


def derive_bounds(agent: AgentSpec, ceilings: TenantCeilings) -> ExecutionBounds:
    """The spec's derivation: minima of the agent's limits and the ceilings, reserves
    kept only strictly below their pinned totals, 300 s / 3,600 s caps, two failures."""
    own = agent.limits
    steps = min(own.max_steps, ceilings.max_steps)
    calls = min(own.max_model_calls, ceilings.max_model_calls)
    tools = min(own.max_tool_calls, ceilings.max_tool_calls)
    agent_cost = own.max_cost if own.max_cost.is_finite() else DEFAULT_COST
    cost = min(agent_cost, ceilings.max_cost_per_run)
    limits = RunLimits(
        max_steps=steps,
        max_model_calls=calls,
        max_tool_calls=tools,
        max_cost=cost,
        reserve_steps=RESERVE_STEPS if steps > RESERVE_STEPS else 0,
        reserve_model_calls=RESERVE_MODEL_CALLS if calls > RESERVE_MODEL_CALLS else 0,
        reserve_cost=RESERVE_COST if cost > RESERVE_COST else Decimal(0),
    )
    return ExecutionBounds(
        limits=limits,
        run_timeout_seconds=min(RUN_TIMEOUT_SECONDS, ceilings.max_run_timeout_seconds),
        misfire_grace_seconds=min(MISFIRE_GRACE_SECONDS, ceilings.max_misfire_grace_seconds),
        max_consecutive_failures=MAX_CONSECUTIVE_FAILURES,
    )


class CreateSchedule:
    """The handler of every schedule.create version (the schema says which flags exist)."""

    def __init__(self, deps: ScheduleToolDeps) -> None:
        self._deps = deps

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        deps = self._deps
        if arguments.get("place_call") is True:
            raise ValidationError(CALLING_UNAVAILABLE, "calling is not available")
        title, instruction = str(arguments["title"]), str(arguments["instruction"])
        deps.scan(title=title, instruction=instruction)
        cadence = when_payload(arguments.get("at"), arguments.get("cadence"))
        require_future(cadence, deps.clock)
        scopes: frozenset[str] = frozenset()
        profile_id = None
        view: dict[str, Any] = {"title": title, "instruction": instruction}
        if cadence["kind"] == "ONCE":
            view["at"] = cadence["at"]
        else:
            view["cadence"] = cadence
        if arguments.get("use_website") is True:
            binding = await deps.websites.current(context.principal, context.session_id)
            if binding is None:
                raise ValidationError(BROWSER_PROFILE_REQUIRED, "the chat has no website binding")
            scopes, profile_id = frozenset({BROWSER_SCOPE}), binding.browser_profile_id
            view["website"] = {
                "browser_profile_id": str(binding.browser_profile_id),
                "origins": list(binding.origins),
            }
        view["requested_scopes"] = sorted(scopes)
        agent = await deps.agents.active(deps.agent_id)
        if agent is None:
            raise ValidationError(AGENT_UNKNOWN, "the agent has no active version")
        ceilings = await deps.tenants.ceilings(context.principal.tenant_id)
        if ceilings is None:
            raise UnavailableError(TENANT_NOT_CONFIGURED, "scheduling is not configured")
        bounds = derive_bounds(agent, ceilings)
        definition = ScheduleDefinition(
            title=title,
            instruction=instruction,
            cadence=cadence,
            agent_id=deps.agent_id,
            agent_version=agent.version,
            policy_profile=agent.policy_profile,
            requested_scopes=scopes,
            browser_profile_id=profile_id,
            limits=bounds.limits,
            run_timeout_seconds=bounds.run_timeout_seconds,
            misfire_grace_seconds=bounds.misfire_grace_seconds,
            max_consecutive_failures=bounds.max_consecutive_failures,
        )

        async def execute() -> dict[str, Any]:
            result = await deps.service.create(
                context.principal, context.idempotency_key, definition
            )
            return {
                "schedule_id": str(result.schedule.id),
                "state": result.schedule.state.value,
                "next_fire_at": instant(result.schedule.next_fire_at),
                "replayed": result.replayed,
            }

        return PreparedCall(view=view, execute=execute)
