"""The tool pipeline's settings wired through the composition root, and its effect timeout.

On PostgreSQL, the pipeline built by ``bootstrap.build_tools`` (as ``ToolWorld`` builds
it, with the arguments below added):

* rule.tools.derived_bounds: a deployment that injects its per-tenant configuration
  (``tenants=``, as the API role takes it) holds each ``schedule.create`` to the
  CALLER'S tenant's ceilings, not to the settings' defaults nor another tenant's
  (two tenants, called alternately): the stored limits, timeout and grace are written
  out by hand.
* gate.schedule.model_create_happy_path: ``approval_timeout_seconds`` given to
  ``build_tools`` bounds the wait for an approver that never answers: the call ends as
  the retryable ``schedule.tool.approval_timeout`` with no schedule (the approver gives
  up by itself only after ``HANG_SECONDS`` real seconds, raising a BaseException no
  product ``except Exception`` turns into an answer).
* gate.schedule.model_create_retry: an approved create whose effect commits but
  outlasts the tool's timeout answers the retryable ``schedule.tool.timeout``; a retry
  with the same key and arguments returns the original schedule (replayed), never the
  timeout as the key's final result and never a second schedule. The tool's timeout is
  lowered to 50 ms for the call (the spec's 15 s would make the check slow); the
  effect sleeps one real second after it commits.

Tests of the test: ``scheduling-gates mutate`` (``bootstrap.tools_ignore_injected_tenants``,
``tools.ceilings_looked_up_by_principal``, ``tools.ceilings_cached_once``,
``bootstrap.tools_approval_timeout_unwired``, ``pipeline.tool_timeout_recorded_final``,
``pipeline.tool_timeout_not_retryable``, ``pipeline.effect_unbounded``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from gates.checks.tool_support import (
    EVERYONE,
    WHO,
    WHO_B,
    InspectingApprovals,
    ToolWorld,
    tool_env,
)
from scheduling.bootstrap import build_tools
from scheduling.config import Settings
from scheduling.runtime.tool_pipeline import (
    ApprovalDecision,
    ApprovalPort,
    ApprovalRequest,
    PreparedCall,
    ToolExecutionContext,
    ToolHandler,
    ToolStatus,
)
from scheduling.testing import (
    ConfiguredTenantConfiguration,
    ConfiguredWebsiteBindings,
    open_storage,
)
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import AGENT_ID, CEILINGS, START, seed_durable

pytestmark = pytest.mark.postgres

HANG_SECONDS = 3.0
BOUND_SECONDS = 0.05
EFFECT_SLEEP_SECONDS = 1.0


async def open_world(
    url: str,
    *,
    tenants: ConfiguredTenantConfiguration | None = None,
    approval_timeout_seconds: float | None = None,
    approvals: ApprovalPort | None = None,
) -> ToolWorld:
    """``ToolWorld.open``'s world with ``build_tools`` given ``tenants`` and/or
    ``approval_timeout_seconds`` (the settings keep the gate world's ceilings)."""
    storage = open_storage(url, pool_size=5)
    admin = storage.factory("trusted")
    await seed_durable(admin, list(EVERYONE), at=START)
    clock, ids = VirtualClock(START), SeededIds(0)
    scripted = InspectingApprovals(clock)
    websites = ConfiguredWebsiteBindings()
    extra: dict[str, Any] = {}
    if approval_timeout_seconds is not None:
        extra["approval_timeout_seconds"] = approval_timeout_seconds
    role = build_tools(
        Settings.from_env(tool_env(url)),
        clock=clock,
        ids=ids,
        approvals=approvals or scripted,
        default_agent_id=AGENT_ID,
        website_bindings=websites,
        storage=storage,
        tenants=tenants,
        **extra,
    )
    assert role.api is not None
    return ToolWorld(storage, admin, role, clock, ids, scripted, websites, role.api.profiles)


# Injected ceilings below the agent's limits (20 / 20 / 20, USD 2) and the tool's caps
# (300 s, 3,600 s); the settings' own (the gate ceilings) sit above both.
INJECTED = CEILINGS.model_copy(
    update={
        "max_steps": 9,
        "max_model_calls": 8,
        "max_tool_calls": 4,
        "max_cost_per_run": Decimal("1.25"),
        "max_run_timeout_seconds": 90,
        "max_misfire_grace_seconds": 600,
    }
)
INJECTED_EXPECTED = {
    "limits": {
        "max_steps": 9,
        "max_model_calls": 8,
        "max_tool_calls": 4,
        "max_cost": "1.25",
        "reserve_steps": 2,
        "reserve_model_calls": 2,
        "reserve_cost": "1",
    },
    "run_timeout_seconds": 90,
    "misfire_grace_seconds": 600,
    "max_consecutive_failures": 2,
}


# The second tenant's own ceilings, lower still in a different way (by hand: reserves
# kept only strictly below their totals, so steps 2 and cost 1 drop theirs).
INJECTED_B = CEILINGS.model_copy(
    update={
        "max_steps": 2,
        "max_model_calls": 6,
        "max_tool_calls": 3,
        "max_cost_per_run": Decimal(1),
        "max_run_timeout_seconds": 45,
        "max_misfire_grace_seconds": 120,
    }
)
INJECTED_B_EXPECTED = {
    "limits": {
        "max_steps": 2,
        "max_model_calls": 6,
        "max_tool_calls": 3,
        "max_cost": "1",
        "reserve_steps": 0,
        "reserve_model_calls": 2,
        "reserve_cost": "0",
    },
    "run_timeout_seconds": 45,
    "misfire_grace_seconds": 120,
    "max_consecutive_failures": 2,
}


@pytest.mark.rule("rule.tools.derived_bounds")
async def test_create_uses_the_injected_ceilings_of_the_callers_tenant(pg_url: str) -> None:
    """Per-tenant ceilings injected (the default is the settings' own): each tenant's
    create is held to its own tenant's, in either order (no tenant's answer reused)."""
    tenants = ConfiguredTenantConfiguration(
        {WHO.tenant_id: INJECTED, WHO_B.tenant_id: INJECTED_B}, default=CEILINGS
    )
    world = await open_world(pg_url, tenants=tenants)
    try:
        for n, (who, want) in enumerate(
            ((WHO, INJECTED_EXPECTED), (WHO_B, INJECTED_B_EXPECTED), (WHO, INJECTED_EXPECTED))
        ):
            args = {"title": "Plants", "instruction": "Water them.", "at": world.later(days=1)}
            result = await world.call("schedule.create", args, f"injected-{n}", who=who)
            assert result.ok, (result.reason_code, result.details)
            assert result.output is not None
            (revision,) = await world.revisions(result.output["schedule_id"])
            definition = revision["definition"]
            pinned = {k: definition[k] for k in want}
            assert pinned == want, f"{who.tenant_id} call {n}: {pinned}"
    finally:
        await world.close()


class ApproverGaveUp(BaseException):
    """The approver was still waiting after HANG_SECONDS: nothing bounded the wait."""


class NeverAnswers:
    def __init__(self) -> None:
        self.asked = 0

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked += 1
        await asyncio.sleep(HANG_SECONDS)
        raise ApproverGaveUp("no approval timeout ended the wait")


@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_the_built_approval_timeout_bounds_the_wait(pg_url: str) -> None:
    approver = NeverAnswers()
    world = await open_world(pg_url, approval_timeout_seconds=BOUND_SECONDS, approvals=approver)
    try:
        args = {"title": "Unanswered", "instruction": "Wait.", "at": world.later(days=1)}
        try:
            result = await world.call("schedule.create", args, "never-answered")
        except ApproverGaveUp:
            pytest.fail("build_tools' approval_timeout_seconds did not bound the wait")
        assert approver.asked == 1
        assert result.status is ToolStatus.FAILED, result
        assert result.reason_code == "schedule.tool.approval_timeout", result.reason_code
        assert result.retryable
        assert (await world.counts())["schedules"] == 0
    finally:
        await world.close()


def slow_effect(inner: ToolHandler, effects: list[asyncio.Future[dict[str, Any]]]) -> ToolHandler:
    """The real handler whose effect runs to its commit even when the pipeline's
    timeout cancels the call (shielded; kept in ``effects``), then sleeps past it."""

    class Slow:
        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            prepared = await inner.prepare(args, context)
            run = prepared.execute

            async def execute() -> dict[str, Any]:
                effects.append(asyncio.ensure_future(run()))
                out = await asyncio.shield(effects[-1])
                await asyncio.sleep(EFFECT_SLEEP_SECONDS)
                return out

            return PreparedCall(prepared.view, execute)

    return Slow()


@pytest.mark.gate("gate.schedule.model_create_retry")
async def test_a_timed_out_effect_is_recovered_by_the_same_key(pg_url: str) -> None:
    world = await open_world(pg_url)
    try:
        registry = world.role.registry
        effects: list[asyncio.Future[dict[str, Any]]] = []
        versions = registry.versions("schedule.create")
        originals = [registry.get("schedule.create", s.version) for s in versions]
        for tool in originals:
            assert tool is not None
            assert tool.handler is not None
            quick = replace(tool.spec, timeout_seconds=BOUND_SECONDS)
            registry.register(replace(tool, spec=quick, handler=slow_effect(tool.handler, effects)))
        args = {"title": "Slow", "instruction": "Remind me.", "at": world.later(days=1)}
        try:
            first = await world.call("schedule.create", args, "slow-key")
        finally:
            for tool in originals:
                assert tool is not None
                registry.register(tool)
            await asyncio.gather(*effects)  # the effect has committed
        assert len(effects) == 1
        assert first.status is ToolStatus.FAILED, first
        assert first.reason_code == "schedule.tool.timeout", first.reason_code
        assert first.retryable, "schedule.tool.timeout must be retryable"
        rows = await world.sql("SELECT id FROM schedules")
        assert len(rows) == 1, f"{len(rows)} schedules after the timed-out effect"
        retry = await world.call("schedule.create", args, "slow-key")
        assert retry.ok, (retry.status, retry.reason_code)
        assert retry.output is not None
        assert retry.output["schedule_id"] == str(rows[0]["id"])
        assert retry.output["replayed"] is True
        assert (await world.counts())["schedules"] == 1
        assert len(world.approvals.requests) == 1, "the recovery asked for approval again"
    finally:
        await world.close()
