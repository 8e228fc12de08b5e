"""rule.tools.derived_bounds on PostgreSQL: ``schedule.create`` derives every bound
from the active agent AND the tenant's ceilings, whichever is lower.

The gate worlds' ceilings sit above the agent's limits and the tool's own caps, so
there every minimum is the agent's or the cap's and a tool that ignored the ceilings
would pass. Here two deployments lower them: ``tight`` below the agent's limits and
below the 300 s / 3,600 s caps, ``minimal`` down to where the final-synthesis reserves
must be dropped (a reserve is kept only strictly below its pinned total), and
``reserve_at_its_total`` where the model-call total equals the reserve. A third test
activates an agent version whose finite cost is above USD 5: the 5 stands in only for
an agent with no finite cost, so that agent's own cost (or a ceiling between 5 and it)
is pinned, never 5. The expected definitions are written out by hand, not computed by
the code under test.

An agent with no finite cost (the spec's "or 5") cannot be observed: every agent
registry reads a version's limits as ``RunLimits``, which refuses a non-finite or
absent ``max_cost`` (``schedule.limits.not_finite``) before the tool derives anything.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gates.checks.tool_support import ToolWorld
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.revision import RunLimits
from scheduling.domain.tenancy import TenantCeilings
from simulation.worlds.service import CEILINGS, LIMITS, POLICY_2, seed_agent_version

pytestmark = pytest.mark.postgres

RULE = "rule.tools.derived_bounds"

DEPLOYMENTS: dict[str, tuple[TenantCeilings, dict[str, Any]]] = {
    # The agent allows 20 steps / model calls / tool calls and USD 2 (LIMITS).
    "tight": (
        CEILINGS.model_copy(
            update={
                "max_steps": 10,
                "max_model_calls": 7,
                "max_tool_calls": 5,
                "max_cost_per_run": Decimal("1.5"),
                "max_run_timeout_seconds": 120,
                "max_misfire_grace_seconds": 1800,
            }
        ),
        {
            "limits": {
                "max_steps": 10,
                "max_model_calls": 7,
                "max_tool_calls": 5,
                "max_cost": "1.5",
                "reserve_steps": 2,
                "reserve_model_calls": 2,
                "reserve_cost": "1",
            },
            "run_timeout_seconds": 120,
            "misfire_grace_seconds": 1800,
            "max_consecutive_failures": 2,
        },
    ),
    "minimal": (
        CEILINGS.model_copy(
            update={
                "max_steps": 2,
                "max_model_calls": 3,
                "max_tool_calls": 1,
                "max_cost_per_run": Decimal(1),
                "max_run_timeout_seconds": 60,
                "max_misfire_grace_seconds": 60,
            }
        ),
        {
            "limits": {
                "max_steps": 2,
                "max_model_calls": 3,
                "max_tool_calls": 1,
                "max_cost": "1",
                "reserve_steps": 0,
                "reserve_model_calls": 2,
                "reserve_cost": "0",
            },
            "run_timeout_seconds": 60,
            "misfire_grace_seconds": 60,
            "max_consecutive_failures": 2,
        },
    ),
    # The model-call total equals the reserve the tool would keep (2): a reserve equal
    # to its total is dropped too (kept only strictly below).
    "reserve_at_its_total": (
        CEILINGS.model_copy(
            update={
                "max_steps": 2,
                "max_model_calls": 2,
                "max_tool_calls": 1,
                "max_cost_per_run": Decimal(1),
                "max_run_timeout_seconds": 60,
                "max_misfire_grace_seconds": 60,
            }
        ),
        {
            "limits": {
                "max_steps": 2,
                "max_model_calls": 2,
                "max_tool_calls": 1,
                "max_cost": "1",
                "reserve_steps": 0,
                "reserve_model_calls": 0,
                "reserve_cost": "0",
            },
            "run_timeout_seconds": 60,
            "misfire_grace_seconds": 60,
            "max_consecutive_failures": 2,
        },
    ),
}


async def created_definition(world: ToolWorld, key: str) -> dict[str, Any]:
    """The stored definition of one schedule.create call under ``key`` (its only
    revision)."""
    args = {"title": "Water the plants", "instruction": "Remind me.", "at": world.later(days=1)}
    result = await world.call("schedule.create", args, key)
    assert result.ok, f"create failed: {result.reason_code} {result.details}"
    assert result.output is not None
    revisions = await world.revisions(result.output["schedule_id"])
    assert len(revisions) == 1
    definition: dict[str, Any] = revisions[0]["definition"]
    return definition


def test_the_deployments_sit_below_the_agent_and_the_caps() -> None:
    """Each lowered ceiling is below what the agent or the tool's cap would give, so
    each expected value can only come from the ceiling."""
    for ceilings, _ in DEPLOYMENTS.values():
        assert ceilings.max_steps < LIMITS.max_steps
        assert ceilings.max_model_calls < LIMITS.max_model_calls
        assert ceilings.max_tool_calls < LIMITS.max_tool_calls
        assert ceilings.max_cost_per_run < LIMITS.max_cost
        assert ceilings.max_run_timeout_seconds < 300
        assert ceilings.max_misfire_grace_seconds < 3600


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("deployment", sorted(DEPLOYMENTS))
async def test_create_pins_the_lower_of_agent_cap_and_ceiling(
    pg_url: str, deployment: str, gate_evidence: GateEvidence
) -> None:
    ceilings, expected = DEPLOYMENTS[deployment]
    world = await ToolWorld.open(pg_url, ceilings=ceilings)
    try:
        definition = await created_definition(world, f"bounds-{deployment}")
        pinned = {key: definition[key] for key in expected}
        assert pinned == expected
        assert definition["requested_scopes"] == []
        gate_evidence.record(deployment, {"ceilings": ceilings.model_dump(mode="json"), **pinned})
    finally:
        await world.close()


# An agent version whose every limit sits above the seeded agent's (LIMITS) and whose
# finite cost is above the USD 5 default.
COSTLY_VERSION = "v-costly"
COSTLY = RunLimits(max_steps=30, max_model_calls=25, max_tool_calls=15, max_cost=Decimal("7.5"))
COSTLY_DEPLOYMENTS: dict[str, tuple[TenantCeilings, str]] = {
    # The gate ceilings (USD 10) sit above the agent: its 7.5 is pinned as is.
    "agent_cost_above_five": (CEILINGS, "7.5"),
    # A ceiling between 5 and the agent's cost wins over the agent, and is not cut to 5.
    "ceiling_between_five_and_agent": (
        CEILINGS.model_copy(update={"max_cost_per_run": Decimal(6)}),
        "6",
    ),
}


def test_the_costly_agent_sits_above_five_and_the_seeded_agent() -> None:
    """The costly agent's cost, and each deployment's expected cost, is above the USD 5
    default, so a tool that capped every cost at 5 is told apart."""
    assert COSTLY.max_cost > 5
    assert COSTLY.max_steps > LIMITS.max_steps
    for _, cost in COSTLY_DEPLOYMENTS.values():
        assert Decimal(cost) > 5


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("deployment", sorted(COSTLY_DEPLOYMENTS))
async def test_a_finite_agent_cost_above_five_is_not_cut_to_five(
    pg_url: str, deployment: str, gate_evidence: GateEvidence
) -> None:
    ceilings, cost = COSTLY_DEPLOYMENTS[deployment]
    # By hand: steps/model/tool calls min(30, 100), min(25, 100), min(15, 100); cost
    # min(7.5, ceiling); reserves 2, 2, 1 each strictly below their totals; 300 s and
    # 3,600 s under the gate's 3,600 s / 7,200 s ceilings.
    expected = {
        "limits": {
            "max_steps": 30,
            "max_model_calls": 25,
            "max_tool_calls": 15,
            "max_cost": cost,
            "reserve_steps": 2,
            "reserve_model_calls": 2,
            "reserve_cost": "1",
        },
        "agent_version": COSTLY_VERSION,
        "run_timeout_seconds": 300,
        "misfire_grace_seconds": 3600,
        "max_consecutive_failures": 2,
    }
    world = await ToolWorld.open(pg_url, ceilings=ceilings)
    try:
        await seed_agent_version(world.admin, COSTLY_VERSION, POLICY_2, limits=COSTLY)
        await world.activate(COSTLY_VERSION)
        definition = await created_definition(world, f"costly-{deployment}")
        pinned = {key: definition[key] for key in expected}
        assert pinned == expected
        gate_evidence.record(deployment, {"agent_cost": str(COSTLY.max_cost), **pinned})
    finally:
        await world.close()
