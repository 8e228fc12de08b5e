"""rule.tools.derived_bounds on PostgreSQL: ``schedule.create`` derives every bound
from the active agent AND the tenant's ceilings, whichever is lower.

The gate worlds' ceilings sit above the agent's limits and the tool's own caps, so
there every minimum is the agent's or the cap's and a tool that ignored the ceilings
would pass. Here two deployments lower them: ``tight`` below the agent's limits and
below the 300 s / 3,600 s caps, ``minimal`` down to where the final-synthesis reserves
must be dropped (a reserve is kept only strictly below its pinned total), and
``reserve_at_its_total`` where the model-call total equals the reserve. The expected
definitions are written out by hand, not computed by the code under test.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gates.checks.tool_support import ToolWorld
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.tenancy import TenantCeilings
from simulation.worlds.service import CEILINGS, LIMITS

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
        args = {"title": "Water the plants", "instruction": "Remind me.", "at": world.later(days=1)}
        result = await world.call("schedule.create", args, f"bounds-{deployment}")
        assert result.ok, f"create failed: {result.reason_code} {result.details}"
        assert result.output is not None
        revisions = await world.revisions(result.output["schedule_id"])
        assert len(revisions) == 1
        definition = revisions[0]["definition"]
        pinned = {key: definition[key] for key in expected}
        assert pinned == expected
        assert definition["requested_scopes"] == []
        gate_evidence.record(deployment, {"ceilings": ceilings.model_dump(mode="json"), **pinned})
    finally:
        await world.close()
