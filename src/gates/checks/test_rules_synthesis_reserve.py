"""rule.runtime.synthesis_reserve on PostgreSQL: a materialized run's final-synthesis
reserves, applied by the ordinary run worker.

A schedule pinned to an agent version that declares ``memory.recall`` fires; its run
is the scripted ``research:3`` agent (three rounds of a model call costing USD 1 and a
recall, then the answer), executed by the run worker production builds. One case per
reserve - steps, model calls, cost - plus the all-zero reserve: once research reaches
the reserved boundary, every further tool call is refused with
``schedule.runtime.synthesis_reserve`` (never charged) and the run still completes with
its answer inside its hard totals; without reserves all three recalls run. The
expected tool outcomes are counted by hand from the limits below; the step case's
boundary falls exactly on a recall (a reserve entered one step late would let it
run). Without reserves, a recall at the step total is charged and fails the run with
``schedule.runtime.step_limit``, never refused as if reserved. A recall charged just
before the boundary, whose worker then crashes, is performed by the worker that
recovers the run, not refused as reserved after its charge.

Tests of the test: ``scheduling-gates mutate`` (``reserve.*``,
``worker.charged_call_refused_as_reserved``).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.revision import RunLimits
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import STEP_LIMIT, RunOutcome, WorkerSettings
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import TOOL_AGENT_VERSION, run_worker, seed_tool_agent
from simulation.worlds.service import START, activate_agent_version

pytestmark = pytest.mark.postgres

RULE = "rule.runtime.synthesis_reserve"
DENIED = "schedule.runtime.synthesis_reserve"
OK, NO = "tool.result", "tool.denied"
CASES: dict[str, tuple[RunLimits, list[str]]] = {
    # 2 steps a round; the reserve starts at 5 - 2 = 3 steps, exactly where the second
    # recall would be taken (3 used): it and the third are refused, uncharged.
    "steps": (
        RunLimits(
            max_steps=5, max_model_calls=10, max_tool_calls=10, max_cost=Decimal(10),
            reserve_steps=2,
        ),
        [OK, NO, NO],
    ),
    # The reserve starts at 4 - 2 = 2 model calls: the second round's recall is refused.
    "model_calls": (
        RunLimits(
            max_steps=10, max_model_calls=4, max_tool_calls=10, max_cost=Decimal(10),
            reserve_model_calls=2,
        ),
        [OK, NO, NO],
    ),
    # USD 1 a model call; the reserve starts at 4 - 2 = USD 2 spent.
    "cost": (
        RunLimits(
            max_steps=10, max_model_calls=10, max_tool_calls=10, max_cost=Decimal(4),
            reserve_cost=Decimal(2),
        ),
        [OK, NO, NO],
    ),
    "unreserved": (
        RunLimits(max_steps=6, max_model_calls=3, max_tool_calls=3, max_cost=Decimal(3)),
        [OK, OK, OK],
    ),
}  # fmt: skip


async def research_run(h: MaterializeWorld, limits: RunLimits) -> tuple[UUID, RunOutcome]:
    """A schedule pinned to the recall-declaring agent version with ``limits``, fired,
    and its run executed by the run worker production builds."""
    await seed_tool_agent(h.admin, START)
    await activate_agent_version(h.admin, TOOL_AGENT_VERSION, START)
    sid = await h.create(
        agent_version=TOOL_AGENT_VERSION,
        instruction="Look into the notes, then answer. [script:research:3]",
        limits=limits,
    )
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    await h.scan()
    worker = run_worker(h.storage, h.clock, "w", capacity=QueueCapacity(4, 1, 1))
    outcome = await worker.run_once()
    assert outcome is not None
    return sid, outcome


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_materialized_run_synthesizes_inside_its_reserve(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    limits, outcomes = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        sid, outcome = await research_run(h, limits)
        (run_id,) = [o["run_id"] for o in (await h.ledger()).of(sid).occurrences]
        assert outcome.status == "COMPLETED", outcome
        ledger = (await h.ledger()).of(sid)
        (run,) = ledger.runs
        assert run["id"] == run_id
        tools = [e for e in ledger.session_events if e["event_type"].startswith("tool.")]
        assert [e["event_type"] for e in tools] == outcomes
        assert all(e["payload"]["reason_code"] == DENIED for e in tools if e["event_type"] == NO)
        assert run["usage"]["tool_calls"] == outcomes.count(OK)
        assert run["usage"]["steps"] <= limits.max_steps
        assert run["usage"]["model_calls"] == 3
        assert Decimal(str(run["usage"]["cost"])) <= limits.max_cost
        kinds = [e["event_type"] for e in ledger.session_events]
        assert kinds.count("message.assistant") == 1
        gate_evidence.record(case, {"tools": outcomes, "usage": run["usage"]})
    finally:
        await h.close()


@pytest.mark.rule(RULE)
async def test_without_reserves_the_step_total_fails_the_run(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """All-zero reserves keep the unreserved behaviour at the total too: with 3 steps, the
    second recall (3 used) is not refused as if reserved, it is charged and fails the
    run with ``schedule.runtime.step_limit``, one recall made and none refused."""
    limits = RunLimits(max_steps=3, max_model_calls=10, max_tool_calls=10, max_cost=Decimal(10))
    h = await MaterializeWorld.open(pg_url)
    try:
        sid, outcome = await research_run(h, limits)
        assert (outcome.status, outcome.reason_code) == ("FAILED", STEP_LIMIT), outcome
        ledger = (await h.ledger()).of(sid)
        (run,) = ledger.runs
        tools = [
            e["event_type"] for e in ledger.session_events if e["event_type"].startswith("tool.")
        ]
        assert tools == [OK], tools
        assert run["usage"]["steps"] == 3, run["usage"]
        gate_evidence.record("unreserved_at_the_total", {"tools": tools, "usage": run["usage"]})
    finally:
        await h.close()


class CrashAtCharge(Exception):
    """The first worker's injected crash."""


class CrashAfterCharges:
    """A probe: the worker crashes right after its ``nth`` ``run.charged`` commit."""

    def __init__(self, nth: int) -> None:
        self.nth, self.seen = nth, 0

    async def step(self, name: str) -> None:
        if name == "run.charged":
            self.seen += 1
            if self.seen == self.nth:
                raise CrashAtCharge(f"run.charged #{self.nth}")


@pytest.mark.rule(RULE)
async def test_a_recall_charged_before_the_boundary_runs_after_a_crash(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The reserve starts at 5 - 3 = 2 steps. The first recall is taken at 1 step, so it
    is charged (to 2) outside the reserve; the worker crashes right after that charge.
    The worker that recovers the run performs that recall (already charged, so never
    refused as reserved: it was decided before the boundary), and refuses the later
    ones: one recall result, two refusals, one tool call charged."""
    limits = RunLimits(
        max_steps=5, max_model_calls=10, max_tool_calls=10, max_cost=Decimal(10), reserve_steps=3
    )
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_tool_agent(h.admin, START)
        await activate_agent_version(h.admin, TOOL_AGENT_VERSION, START)
        sid = await h.create(
            agent_version=TOOL_AGENT_VERSION,
            instruction="Look into the notes, then answer. [script:research:3]",
            limits=limits,
        )
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        await h.scan()
        settings = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, poll_seconds=1)
        capacity = QueueCapacity(4, 1, 1)
        first = run_worker(
            h.storage, h.clock, "w1", capacity=capacity, settings=settings,
            probe=CrashAfterCharges(2),
        )  # fmt: skip
        with pytest.raises(CrashAtCharge):
            await first.run_once()
        h.clock.advance(settings.lease_seconds + 1)
        second = run_worker(h.storage, h.clock, "w2", capacity=capacity, settings=settings)
        outcome = await second.run_once()
        assert outcome is not None
        assert outcome.recovered
        assert outcome.status == "COMPLETED", outcome
        ledger = (await h.ledger()).of(sid)
        (run,) = ledger.runs
        tools = [
            e["event_type"] for e in ledger.session_events if e["event_type"].startswith("tool.")
        ]
        assert tools == [OK, NO, NO], tools
        assert run["usage"]["tool_calls"] == 1, run["usage"]
        gate_evidence.record("recovered_charged_recall", {"tools": tools, "usage": run["usage"]})
    finally:
        await h.close()
