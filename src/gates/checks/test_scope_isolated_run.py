"""gate.schedule.scope_isolated, facet run_snapshot: a scheduled run uses exactly its
requested scopes, and an undeclared tool is denied.

Real PostgreSQL, end to end. A creator holding a superset of scopes (every schedule
scope plus ``memory.read``, ``web.search``, ``browser.profile.read``; before firing it is
granted ``web.fetch`` too) schedules restricted runs requesting only ``memory.read``.
Each run must snapshot exactly ``{"memory.read"}``. The scripted agent then asks for
``web.search``:

* agent version ``v1`` does not declare the tool -> denied ``schedule.tool.undeclared``;
* agent version ``v-tools`` declares it, but the run's snapshot lacks ``web.search``
  (which the creator holds) -> denied ``schedule.tool.scope_denied``;
* control: the same agent with ``web.search`` requested -> the tool runs. This is what
  shows the denials come from the snapshot and the declaration, so the check can fail.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.records import PrincipalRecord
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import TOOL_SCOPE_DENIED, TOOL_UNDECLARED
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import TOOL_AGENT_VERSION, run_worker, seed_tool_agent
from simulation.worlds.service import AGENT_VERSION, START, definition

GATE = "gate.schedule.scope_isolated"
REQUESTED = frozenset({"memory.read"})
CASES: list[tuple[str, str, frozenset[str], str | None]] = [
    ("undeclared", AGENT_VERSION, REQUESTED, TOOL_UNDECLARED),
    ("outside_snapshot", TOOL_AGENT_VERSION, REQUESTED, TOOL_SCOPE_DENIED),
    ("control_allowed", TOOL_AGENT_VERSION, REQUESTED | {"web.search"}, None),
]


async def fire_and_run(h: MaterializeWorld, schedules: dict[str, UUID]) -> dict[str, UUID]:
    """Each schedule fired once (a second after the earliest is due) and its run taken
    to its end by one run worker; the run of each label."""
    fire = (await h.sql("SELECT min(next_fire_at) AS f FROM schedules"))[0]["f"]
    h.clock.advance_to(fire + timedelta(seconds=1))
    runs: dict[str, UUID] = {}
    for label, sid in schedules.items():
        made = await h.materializer().materialize(sid)
        assert made.run_id is not None, (label, made)
        runs[label] = made.run_id
    worker = run_worker(h.admin, h.clock, "w1", capacity=QueueCapacity(4, 1, 1))
    for _ in runs:
        assert await worker.run_once() is not None
    return runs


@pytest.mark.postgres
@pytest.mark.gate(GATE, facet="run_snapshot")
async def test_run_snapshots_requested_scopes_and_denies_undeclared_tools(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_tool_agent(h.admin, START)
        assert {"memory.read", "web.search"} < WHO.scopes
        schedules: dict[str, UUID] = {}
        for label, version, scopes, _ in CASES:
            schedules[label] = await h.create(
                key=f"scope-{label}",
                instruction="Search the news. [script:undeclared_tool]",
                agent_version=version,
                requested_scopes=scopes,
            )
        # The creator gains a further scope before firing; runs must not inherit it.
        wider = WHO.scopes | {"web.fetch"}
        async with h.admin.begin() as uow:
            now = h.clock.now()
            await uow.principals.put(
                PrincipalRecord(
                    WHO.tenant_id,
                    WHO.principal_id,
                    True,
                    wider,
                    {"roles": ["member", "reader"]},
                    now,
                    now,
                )
            )
            await uow.commit()
        # The grant changed the owner's authority version, which each revision pinned
        # (ADR 1200): the owner re-approves the same definitions under the wider
        # authority (revision 2 re-pins), and the runs must still not inherit it.
        for label, version, scopes, _ in CASES:
            await h.world.service.update(
                WHO,
                schedules[label],
                1,
                definition(
                    instruction="Search the news. [script:undeclared_tool]",
                    agent_version=version,
                    requested_scopes=scopes,
                ),
            )
        runs = await fire_and_run(h, schedules)
        observed: dict[str, Any] = {}
        for label, version, scopes, denial in CASES:
            run = (await h.sql("SELECT * FROM runs WHERE id = :i", i=runs[label]))[0]
            snapshot = frozenset(run["requested_scopes"])
            assert snapshot == scopes, (label, snapshot)
            assert snapshot < wider
            assert run["agent_version"] == version
            assert run["status"] == "COMPLETED"
            tools = await h.sql(
                "SELECT event_type, payload FROM session_events WHERE run_id = :i"
                " AND event_type LIKE 'tool.%' ORDER BY seq",
                i=runs[label],
            )
            assert len(tools) == 1, (label, tools)
            if denial is None:
                assert tools[0]["event_type"] == "tool.result", (label, tools)
            else:
                assert tools[0]["event_type"] == "tool.denied", (label, tools)
                assert tools[0]["payload"]["reason_code"] == denial
            observed[label] = {
                "snapshot": sorted(snapshot),
                "agent_version": version,
                "tool_event": tools[0]["event_type"],
                "reason_code": tools[0]["payload"].get("reason_code"),
            }
        denied_scope = observed["outside_snapshot"]
        assert denied_scope["reason_code"] == TOOL_SCOPE_DENIED
        gate_evidence.record("creator_scopes_at_firing", sorted(wider))
        gate_evidence.record("runs", observed)
    finally:
        await h.close()
