"""gate.schedule.scope_isolated, facet run_snapshot: a run tool needs its declared scope
in the run's snapshot, whichever tool it is.

``test_scope_isolated_run`` proves it for ``web.search``; here the other scoped tool the
scripted agent calls, ``memory.recall`` (declared by agent version ``v-tools``, which
reads memory: scope ``memory.read``). Real PostgreSQL, end to end: the creator holds
``memory.read`` and ``web.search``; a run requesting only ``web.search`` is refused the
recall with ``schedule.tool.scope_denied`` naming the missing ``memory.read`` (a tool
declared with no or another scope would let the run read memory it never requested),
and the control requesting ``memory.read`` runs it.
"""

from __future__ import annotations

from uuid import UUID

import pytest

from gates.checks.test_scope_isolated_run import fire_and_run
from gates.runner.pytest_plugin import GateEvidence
from scheduling.runtime import TOOL_SCOPE_DENIED
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import TOOL_AGENT_VERSION, seed_tool_agent
from simulation.worlds.service import START

GATE = "gate.schedule.scope_isolated"
CASES: list[tuple[str, frozenset[str], str | None]] = [
    ("without_memory_read", frozenset({"web.search"}), TOOL_SCOPE_DENIED),
    ("with_memory_read", frozenset({"memory.read"}), None),
]


@pytest.mark.postgres
@pytest.mark.gate(GATE, facet="run_snapshot")
async def test_a_recall_needs_memory_read_in_the_snapshot(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_tool_agent(h.admin, START)
        assert {"memory.read", "web.search"} <= WHO.scopes
        schedules: dict[str, UUID] = {}
        for label, scopes, _ in CASES:
            schedules[label] = await h.create(
                key=f"recall-{label}",
                instruction="Recall my notes. [script:tools:1]",
                agent_version=TOOL_AGENT_VERSION,
                requested_scopes=scopes,
            )
        runs = await fire_and_run(h, schedules)
        observed: dict[str, object] = {}
        for label, scopes, denial in CASES:
            run = (await h.sql("SELECT * FROM runs WHERE id = :i", i=runs[label]))[0]
            assert frozenset(run["requested_scopes"]) == scopes, label
            assert run["status"] == "COMPLETED", (label, run["status"])
            tools = await h.sql(
                "SELECT event_type, payload FROM session_events WHERE run_id = :i"
                " AND event_type LIKE 'tool.%' ORDER BY seq",
                i=runs[label],
            )
            assert len(tools) == 1, (label, tools)
            payload = tools[0]["payload"]
            assert payload["tool"] == "memory.recall", (label, payload)
            if denial is None:
                assert tools[0]["event_type"] == "tool.result", (label, tools)
            else:
                assert tools[0]["event_type"] == "tool.denied", (label, tools)
                assert payload["reason_code"] == denial, (label, payload)
                assert payload["missing_scopes"] == ["memory.read"], (label, payload)
            observed[label] = {"snapshot": sorted(scopes), "tool_event": tools[0]["event_type"]}
        gate_evidence.record("recall_runs", observed)
    finally:
        await h.close()
