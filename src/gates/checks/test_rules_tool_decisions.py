"""gate.schedule.model_create_retry: a declined call's decision is final for its key.

On PostgreSQL through the ordinary tool pipeline (``ToolWorld``): a ``schedule.create``
bound to the chat's website sign-in P1 is declined by the user; the chat's binding then
moves to P2, so the call prepared again would show another approval view. The retry
with the same key and arguments replays the recorded refusal - REJECTED with
``schedule.tool.approval_denied`` - without asking again and without any effect; it is
not treated as an open approval whose view went stale (``approval_stale``), which
would rewrite the key's recorded outcome.

Tests of the test: ``scheduling-gates mutate`` (``tool_ledger.decision_leaves_state``:
the decision row is written but the invocation keeps ``AWAITING_APPROVAL``).
"""

from __future__ import annotations

import pytest

from gates.checks.tool_checks import (
    PROFILE_1,
    PROFILE_2,
    Verdict,
    effect_rows,
    unchanged_effects,
)
from gates.checks.tool_support import SESSION, WHO, ToolWorld
from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.ports.tool_ledger import WebsiteBinding
from scheduling.runtime.tool_pipeline import APPROVAL_DENIED, ToolStatus

GATE = "gate.schedule.model_create_retry"
ONE, TWO = "https://one.example", "https://two.example"


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_a_declined_key_replays_its_refusal_after_the_view_moved(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        v = Verdict()
        for profile, origin in ((PROFILE_1, ONE), (PROFILE_2, TWO)):
            world.profiles.put(
                BrowserProfile(
                    profile, WHO.tenant_id, WHO.principal_id, BrowserProfileState.READY, (origin,)
                )
            )
        world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE_1, (ONE,)))
        args = {
            "title": "Feed digest",
            "instruction": "Read my feed and summarize it.",
            "at": world.later(days=5),
            "use_website": True,
        }
        before = await effect_rows(world)
        world.approvals.push(False)
        declined = await world.call("schedule.create", args, "declined", version="1.2.0")
        assert declined.status is ToolStatus.REJECTED, declined
        assert declined.reason_code == APPROVAL_DENIED, declined
        world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE_2, (TWO,)))
        asked = len(world.approvals.requests)
        again = await world.call("schedule.create", args, "declined", version="1.2.0")
        await unchanged_effects(world, v, before, "the declined key retried")
        assert (again.status, again.reason_code) == (ToolStatus.REJECTED, APPROVAL_DENIED), (
            f"the declined key answered {again.status} {again.reason_code} on retry"
        )
        assert len(world.approvals.requests) == asked, "the declined key was asked again"
        assert v.problems == [], v.problems
        gate_evidence.record(
            "declined_then_view_moved", f"{again.status.value} {again.reason_code}"
        )
    finally:
        await world.close()
