"""rule.materialize.configuration_fresh on PostgreSQL: firing revalidates configuration.

``gate.schedule.authority_fresh`` covers the authority half of "Materialization
succeeds only when ..."; this rule covers the configuration half (the deleted agent
version is swept by ``materialize_atomic``'s ``agent_missing`` path, whose run-free
setup lets it delete the row a run would reference). Separate cases, each on its own
schedule and database, each after ONE long-lived worker (one materializer, one agent
registry, one tenant configuration) first materialized an occurrence under the
original configuration, so a worker that caches configuration is caught:

* the pinned agent version's policy profile changes (``policy_mismatch``);
* the tenant loses its scheduling ceilings (``tenant_unconfigured``);
* one tenant ceiling at a time drops just below the value the revision pinned - run
  timeout, misfire grace, steps, model calls, tool calls, cost per run
  (``ceiling_exceeded``): a check that reads only some of the six is caught by the
  others.

Each due occurrence fails closed: CONFIGURATION_FAILED with its stable reason, an
audited ``schedule.occurrence.configuration_failed`` event, no session or run, cadence
advanced, failure count incremented. Restoring the configuration affects only the next
occurrence, which materializes with the revision's pinned limits (never narrowed or
substituted); the failed one is never rewritten.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest

from gates.checks.fail_closed import fails_closed_then_recovers
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.tenancy import TenantCeilings
from scheduling.service.materializer import (
    CEILING_EXCEEDED,
    POLICY_MISMATCH,
    TENANT_UNCONFIGURED,
)
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    CEILINGS,
    LIMITS,
    POLICY,
    definition,
)

pytestmark = pytest.mark.postgres

RULE = "rule.materialize.configuration_fresh"
PINNED = definition()
"""The definition every case creates; its limits are ``LIMITS``."""


class SwitchableCeilings:
    """The tenant configuration port whose ceilings the case changes between passes of
    one long-lived worker (deployment configuration that an operator edits)."""

    def __init__(self, ceilings: TenantCeilings | None) -> None:
        self.current = ceilings

    async def ceilings(self, tenant_id: str) -> TenantCeilings | None:
        return self.current


Change = Callable[[MaterializeWorld, SwitchableCeilings], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    code: str
    breaks: Change
    restores: Change


async def _policy(h: MaterializeWorld, profile: str) -> None:
    await h.sql(
        "UPDATE agent_versions SET policy_profile = :p WHERE agent_id = :a AND version = :v",
        p=profile,
        a=AGENT_ID,
        v=AGENT_VERSION,
    )


async def change_policy(h: MaterializeWorld, _: SwitchableCeilings) -> None:
    await _policy(h, "rotated-policy")


async def restore_policy(h: MaterializeWorld, _: SwitchableCeilings) -> None:
    await _policy(h, POLICY)


async def unconfigure(_: MaterializeWorld, tenants: SwitchableCeilings) -> None:
    tenants.current = None


async def restore_ceilings(_: MaterializeWorld, tenants: SwitchableCeilings) -> None:
    tenants.current = CEILINGS


PINNED_VALUES: dict[str, int | Decimal] = {
    "max_run_timeout_seconds": PINNED.run_timeout_seconds,
    "max_misfire_grace_seconds": PINNED.misfire_grace_seconds,
    "max_steps": LIMITS.max_steps,
    "max_model_calls": LIMITS.max_model_calls,
    "max_tool_calls": LIMITS.max_tool_calls,
    "max_cost_per_run": LIMITS.max_cost,
}
"""Each ceiling the firing must compare, with the value the revision pinned under it."""


def lower(ceiling: str) -> Change:
    """Drop ``ceiling`` just below the pinned value (a cent for money, 1 otherwise),
    every other ceiling unchanged."""
    pinned = PINNED_VALUES[ceiling]
    below = pinned - Decimal("0.01") if isinstance(pinned, Decimal) else pinned - 1

    async def change(_: MaterializeWorld, tenants: SwitchableCeilings) -> None:
        tenants.current = CEILINGS.model_copy(update={ceiling: below})

    return change


CASES: dict[str, Case] = {
    "policy_profile_changed": Case(POLICY_MISMATCH, change_policy, restore_policy),
    "tenant_unconfigured": Case(TENANT_UNCONFIGURED, unconfigure, restore_ceilings),
    **{
        f"ceiling_below_pinned:{name}": Case(CEILING_EXCEEDED, lower(name), restore_ceilings)
        for name in PINNED_VALUES
    },
}


def test_the_pinned_values_sit_inside_the_world_ceilings() -> None:
    """The cases lower one ceiling below a pinned value; that is only a change if the
    pinned value was within the ceiling before (else every case would fail at once)."""
    assert PINNED.limits == LIMITS
    for name, pinned in PINNED_VALUES.items():
        assert pinned <= getattr(CEILINGS, name), name
        assert pinned > 1, name


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("case", sorted(CASES))
async def test_due_occurrence_fails_closed_on_configuration(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    spec = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    tenants = SwitchableCeilings(CEILINGS)
    h.tenants = tenants
    try:
        worker = h.worker(h.materializer())
        sid = await h.create()

        async def breaks() -> None:
            await spec.breaks(h, tenants)

        async def restores() -> None:
            await spec.restores(h, tenants)

        _, after = await fails_closed_then_recovers(
            h,
            worker,
            sid,
            disposition="CONFIGURATION_FAILED",
            code=spec.code,
            breaks=breaks,
            restores=restores,
        )
        run = after.runs[1]
        assert run["policy_profile"] == POLICY
        assert run["limits"] == LIMITS.to_json()
        assert (run["deadline_at"] - run["scheduled_for"]) == timedelta(
            seconds=PINNED.run_timeout_seconds
        )
        gate_evidence.record(
            case,
            {
                "reason_code": spec.code,
                "occurrences": [o["disposition"] for o in after.occurrences],
                "restored_run_limits": run["limits"],
                "worker": "one long-lived worker materialized under the old configuration first",
            },
        )
    finally:
        await h.close()
