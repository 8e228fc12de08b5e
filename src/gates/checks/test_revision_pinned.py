"""gate.schedule.revision_pinned on PostgreSQL: a revision pins its execution inputs.

Occurrence 1 fires under revision 1. The schedule is then updated (revision 2: new
instruction, scopes, limits, timeout, cadence time, agent version and policy profile)
and the agent's floating "active" pointer is rotated to a third version. Occurrence 1
still resolves, through its ``schedule_revision``, the original agent version, policy
profile, instruction, scopes, cadence and limits, and its run and seed message are
unchanged; occurrence 2 uses only revision 2 (never the floating pointer).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.revision import RunLimits
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import (
    LIMITS,
    activate_agent_version,
    definition,
    seed_agent_version,
)

pytestmark = pytest.mark.postgres

LIMITS_2 = RunLimits(max_steps=7, max_model_calls=6, max_tool_calls=5, max_cost=Decimal("1.25"))
CADENCE_2 = {"kind": "DAILY", "local_time": "18:30", "timezone": "Europe/Paris"}


@pytest.mark.gate("gate.schedule.revision_pinned")
async def test_first_occurrence_keeps_revision_one(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(instruction="Revision one instruction.")
        first = await h.next_fire(sid)
        h.clock.advance_to(first + timedelta(seconds=4))
        assert (await h.scan()).errors == {}  # a swallowed crash fails the check
        before = (await h.ledger()).of(sid)
        run_1 = before.runs[0]
        rev_1 = (await h.sql("SELECT * FROM schedule_revisions WHERE schedule_id = :i", i=sid))[0]

        await seed_agent_version(h.admin, "v2", "strict")
        await seed_agent_version(h.admin, "v3", "default")
        await h.world.service.update(
            WHO,
            sid,
            1,
            definition(
                instruction="Revision two instruction.",
                requested_scopes=frozenset({"web.search"}),
                limits=LIMITS_2,
                run_timeout_seconds=900,
                cadence=CADENCE_2,
                agent_version="v2",
                policy_profile="strict",
            ),
        )
        await activate_agent_version(h.admin, "v3", h.clock.now())
        # Occurrence 1's run ends (no overlap with occurrence 2).
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :i",
            t=h.clock.now(),
            i=run_1["id"],
        )
        second = await h.next_fire(sid)
        assert second.astimezone(ZoneInfo("Europe/Paris")).strftime("%H:%M") == "18:30"
        h.clock.advance_to(second + timedelta(seconds=4))
        assert (await h.scan()).errors == {}
        after = (await h.ledger()).of(sid)

        occ_1, occ_2 = after.occurrences
        assert (occ_1["schedule_revision"], occ_2["schedule_revision"]) == (1, 2)
        revisions = {
            r["revision"]: r
            for r in await h.sql("SELECT * FROM schedule_revisions WHERE schedule_id = :i", i=sid)
        }
        assert revisions[1] == rev_1
        d1, d2 = revisions[1]["definition"], revisions[2]["definition"]
        assert (d1["agent_version"], d1["policy_profile"]) == ("v1", "default")
        assert d1["instruction"] == "Revision one instruction."
        assert d1["requested_scopes"] == ["memory.read"]
        assert d1["limits"] == LIMITS.to_json()
        assert d1["cadence"]["local_time"] == "09:00:00"
        runs = {r["id"]: r for r in after.runs}
        pinned = ("agent_version", "policy_profile", "requested_scopes", "limits", "deadline_at")
        assert {k: runs[run_1["id"]][k] for k in pinned} == {k: run_1[k] for k in pinned}
        assert occ_2["disposition"] == "MATERIALIZED", occ_2
        run_2 = runs[occ_2["run_id"]]
        assert (run_1["agent_version"], run_1["policy_profile"]) == ("v1", "default")
        assert set(run_1["requested_scopes"]) == {"memory.read"}
        assert run_1["limits"] == LIMITS.to_json()
        assert (run_2["agent_version"], run_2["policy_profile"]) == ("v2", "strict")
        assert set(run_2["requested_scopes"]) == {"web.search"}
        assert run_2["limits"] == LIMITS_2.to_json() == d2["limits"]
        assert run_2["deadline_at"] == h.clock.now() + timedelta(seconds=900)
        seeds = {
            e["session_id"]: e["payload"]["content"]
            for e in after.session_events
            if e["event_type"] == "message.user"
        }
        assert seeds[occ_1["session_id"]] == "Revision one instruction."
        assert seeds[occ_2["session_id"]] == "Revision two instruction."
        assert all(r["agent_version"] != "v3" for r in after.runs)
        gate_evidence.record(
            "occurrences",
            [
                {
                    "revision": o["schedule_revision"],
                    "agent_version": runs[o["run_id"]]["agent_version"],
                    "policy_profile": runs[o["run_id"]]["policy_profile"],
                    "scopes": sorted(runs[o["run_id"]]["requested_scopes"]),
                }
                for o in after.occurrences
            ],
        )
        gate_evidence.record("floating_pointer", "rotated to v3 after the update; unused")
    finally:
        await h.close()
