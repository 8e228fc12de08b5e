"""The run substrate on real PostgreSQL: claims, capacity, fencing, limits, deadline,
crash recovery, cancellation and the tool pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from uuid import UUID

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.run_queue import PostgresRunQueue
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import AuthorizationError, ConflictError, NotFoundError
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.runtime import (
    COST_LIMIT,
    DEADLINE_EXCEEDED,
    LEASE_LOST,
    MODEL_CALL_LIMIT,
    STEP_LIMIT,
    TOOL_CALL_LIMIT,
    TOOL_SCOPE_DENIED,
    TOOL_UNDECLARED,
    RunSubmitter,
    WorkerSettings,
)
from scheduling.runtime.usage import SYNTHESIS_RESERVE
from scheduling.service.cancellation import CANCEL_FORBIDDEN, CANCEL_TERMINAL, RunCancellation
from simulation.engine.clock import VirtualClock
from simulation.worlds.runtime import (
    TOOL_AGENT_VERSION,
    limits,
    run_row,
    run_worker,
    seed_tool_agent,
    submission,
    submitter,
)
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

WHO = principal("runner", scopes={"memory.read", "web.search", "run.cancel", "session.read"})
WIDE = QueueCapacity(8, 1, 1)


class Crash(Exception):
    """An injected worker crash."""


class CrashAt:
    """A probe that raises at the ``nth`` arrival at ``step`` (counting from 1)."""

    def __init__(self, step: str, nth: int) -> None:
        self.step_name, self.nth, self.seen = step, nth, 0

    async def step(self, name: str) -> None:
        if name == self.step_name:
            self.seen += 1
            if self.seen == self.nth:
                raise Crash(f"crash at {name} #{self.nth}")


@dataclass
class Env:
    admin: PostgresUnitOfWorkFactory
    clock: VirtualClock
    submit: RunSubmitter


@pytest.fixture
async def env(pg_url: str) -> AsyncIterator[Env]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=10)
    await seed_durable(admin, [WHO])
    await seed_tool_agent(admin, START)
    clock = VirtualClock(START)
    try:
        yield Env(admin, clock, submitter(admin, clock))
    finally:
        await admin.dispose()


async def test_succeed_completes_with_answer_and_usage(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("succeed"))
    worker = run_worker(env.admin, env.clock, "w1", capacity=WIDE)
    outcome = await worker.run_once()
    assert outcome is not None
    assert outcome.status == "COMPLETED"
    stored = await run_row(env.admin, run.id)
    assert stored.status is RunStatus.COMPLETED
    assert stored.usage == {"steps": 1, "model_calls": 1, "tool_calls": 0, "cost": "0.01"}
    assert stored.cost == Decimal("0.01")
    assert stored.lease_owner is None
    async with env.admin.begin() as uow:
        events = await uow.sessions.events(run.session_id, None)
    types = [e.event_type for e in events]
    assert types == [
        "message.user",
        "run.started",
        "model.called",
        "message.assistant",
        "run.completed",
    ]
    assert await worker.run_once() is None  # nothing left


async def test_fail_script_fails_with_classification(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("fail"))
    await run_worker(env.admin, env.clock, "w1", capacity=WIDE).run_once()
    stored = await run_row(env.admin, run.id)
    assert stored.status is RunStatus.FAILED
    assert stored.failure == {
        "reason": "schedule.runtime.agent_failed",
        "error_class": "ScriptedFailure",
    }


async def test_claims_interactive_first_and_respects_scheduled_for(env: Env) -> None:
    older_async = await env.submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC))
    env.clock.advance(1)
    interactive = await env.submit.submit(WHO, submission("succeed"))
    queue = PostgresRunQueue(env.admin, WIDE)
    now = env.clock.now()
    # A run scheduled one microsecond in the future is not eligible.
    # (save writes only the mutable fields: move scheduled_for directly)
    async with env.admin.engine.begin() as conn:
        await conn.execute(
            text("UPDATE runs SET scheduled_for = :t WHERE id = :i"),
            {"t": now + timedelta(microseconds=1), "i": older_async.id},
        )
    first = await queue.claim("q", now, 30)
    assert first is not None
    assert first.run.id == interactive.id
    assert first.lease.fencing_token == 1
    assert await queue.claim("q", now, 30) is None
    later = await queue.claim("q", now + timedelta(microseconds=1), 30)
    assert later is not None
    assert later.run.id == older_async.id


async def test_capacity_reserves_hold_in_both_directions(env: Env) -> None:
    capacity = QueueCapacity(3, 1, 1)
    queue = PostgresRunQueue(env.admin, capacity)
    for _ in range(4):
        await env.submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC))
    now = env.clock.now()
    got = [await queue.claim(f"w{i}", now, 60) for i in range(4)]
    # Async may use total - interactive_reserved = 2 slots, never the third.
    assert [g is not None for g in got] == [True, True, False, False]
    for _ in range(3):
        await env.submit.submit(WHO, submission("succeed"))
    inter = [await queue.claim(f"i{i}", now, 60) for i in range(2)]
    assert inter[0] is not None
    assert inter[0].run.priority == 0
    assert inter[1] is None  # the fleet is full (3 of 3)
    assert await queue.running_counts(now) == (1, 2)
    # After the async leases expire, interactive work may take at most total - async_reserved.
    later = now + timedelta(seconds=61)
    claims = [await queue.claim(f"j{i}", later, 60) for i in range(4)]
    priorities = [c.run.priority for c in claims if c is not None]
    assert priorities.count(0) == 2  # two more interactive: 2 of 3 slots, never the async one
    assert priorities.count(10) == 1  # the async reserve is taken by async work


async def test_concurrent_claimers_never_share_a_run(env: Env) -> None:
    runs = [await env.submit.submit(WHO, submission("succeed")) for _ in range(12)]
    queue = PostgresRunQueue(env.admin, QueueCapacity(20, 1, 1))
    now = env.clock.now()
    results = await asyncio.gather(*(queue.claim(f"c{i}", now, 60) for i in range(16)))
    claimed = [r.run.id for r in results if r is not None]
    assert len(claimed) == len(set(claimed)) == len(runs)


async def test_expired_lease_is_recovered_and_the_stale_holder_is_fenced(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("steps:6", limits=limits(max_steps=4)))
    settings = WorkerSettings(lease_seconds=30, heartbeat_seconds=10, poll_seconds=1)
    crash = CrashAt("run.checkpointed", 2)
    first = run_worker(env.admin, env.clock, "w1", capacity=WIDE, settings=settings, probe=crash)
    with pytest.raises(Crash):
        await first.run_once()
    crashed = await run_row(env.admin, run.id)
    assert crashed.status is RunStatus.RUNNING
    assert crashed.lease_owner == "w1"
    assert crashed.usage["steps"] == 2
    assert crashed.fencing_token == 1
    second = run_worker(env.admin, env.clock, "w2", capacity=WIDE, settings=settings)
    assert await second.run_once() is None  # the lease is still live
    env.clock.advance(31)
    outcome = await second.run_once()
    assert outcome is not None
    assert outcome.recovered
    assert outcome.fencing_token == 2
    assert outcome.resumed_cursor == 2
    assert outcome.usage["steps"] == 4
    # The persisted usage counted: four steps in total, not four more after recovery.
    assert outcome.status == "FAILED"
    assert outcome.reason_code == STEP_LIMIT


async def test_a_stale_holder_writes_nothing_after_a_takeover(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("steps:3"))
    settings = WorkerSettings(lease_seconds=30, heartbeat_seconds=10, poll_seconds=1)
    second = run_worker(env.admin, env.clock, "w2", capacity=WIDE, settings=settings)
    taken: list[object] = []

    class Stall:
        """w1 stalls after its first charge; meanwhile its lease expires and w2 recovers
        and finishes the run. Then w1 resumes and tries its next (fenced) write."""

        async def step(self, name: str) -> None:
            if name == "run.charged" and not taken:
                env.clock.advance(31)
                taken.append(await second.run_once())

    first = run_worker(env.admin, env.clock, "w1", capacity=WIDE, settings=settings, probe=Stall())
    outcome = await first.run_once()
    assert outcome is not None
    assert outcome.lease_lost
    assert outcome.reason_code == LEASE_LOST
    recovered = taken[0]
    assert recovered is not None
    final = await run_row(env.admin, run.id)
    assert final.status is RunStatus.COMPLETED
    assert final.fencing_token == 2
    async with env.admin.begin() as uow:
        checkpoints = await uow.runs.checkpoints(run.id)
        events = await uow.sessions.events(run.session_id, None)
    # Every checkpoint after w1's charge carries w2's token; no event follows the end.
    assert [c.fencing_token for c in checkpoints] == [0, 1, *([2] * (len(checkpoints) - 2))]
    assert events[-1].event_type == "run.completed"


@pytest.mark.parametrize(
    ("script", "bounds", "code", "usage_key", "expected"),
    [
        ("steps", {"max_steps": 3}, STEP_LIMIT, "steps", 3),
        ("steps", {"max_model_calls": 2}, MODEL_CALL_LIMIT, "model_calls", 2),
        ("tools", {"max_tool_calls": 2}, TOOL_CALL_LIMIT, "tool_calls", 2),
        ("spend", {"max_cost": Decimal("2.5")}, COST_LIMIT, "cost", "2"),
    ],
)
async def test_each_limit_is_enforced(
    env: Env, script: str, bounds: dict[str, object], code: str, usage_key: str, expected: object
) -> None:
    run = await env.submit.submit(
        WHO,
        submission(
            script,
            limits=limits(**bounds),
            scopes=frozenset({"memory.read"}),
            agent_version=TOOL_AGENT_VERSION,
        ),
    )
    outcome = await run_worker(env.admin, env.clock, "w", capacity=WIDE).run_once()
    assert outcome is not None
    assert outcome.reason_code == code
    stored = await run_row(env.admin, run.id)
    assert stored.status is RunStatus.FAILED
    assert stored.failure["reason"] == code
    assert stored.usage[usage_key] == expected


async def test_deadline_fails_a_long_run_also_after_recovery(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("run_long:3600", timeout_seconds=600))
    settings = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, poll_seconds=1)
    crash = CrashAt("run.heartbeat", 5)
    with pytest.raises(Crash):
        await run_worker(
            env.admin, env.clock, "w1", capacity=WIDE, settings=settings, probe=crash
        ).run_once()
    assert env.clock.now() == START + timedelta(seconds=100)
    env.clock.advance(61)
    outcome = await run_worker(
        env.admin, env.clock, "w2", capacity=WIDE, settings=settings
    ).run_once()
    assert outcome is not None
    assert outcome.recovered
    assert outcome.reason_code == DEADLINE_EXCEEDED
    assert env.clock.now() == run.deadline_at
    stored = await run_row(env.admin, run.id)
    assert stored.status is RunStatus.FAILED
    assert stored.finished_at == run.deadline_at


async def test_cancel_needs_run_cancel_and_fences_out_the_worker(env: Env) -> None:
    run = await env.submit.submit(WHO, submission("run_long:600"))
    cancel = RunCancellation(env.admin, env.clock)
    # Without run.cancel (even holding every schedule scope) nothing happens.
    no_scope = principal("runner", scopes={"schedule.cancel", "schedule.write"})
    with pytest.raises(AuthorizationError) as denied:
        await cancel.cancel(no_scope, run.id)
    assert denied.value.code == CANCEL_FORBIDDEN
    with pytest.raises(NotFoundError):
        await cancel.cancel(principal("mallory", scopes={"run.cancel"}), run.id)

    class CancelMidway:
        async def step(self, name: str) -> None:
            if name == "run.heartbeat":
                await cancel.cancel(WHO, run.id)

    crash_free = run_worker(env.admin, env.clock, "w1", capacity=WIDE, probe=CancelMidway())
    outcome = await crash_free.run_once()
    assert outcome is not None
    assert outcome.lease_lost
    assert outcome.reason_code == LEASE_LOST
    stored = await run_row(env.admin, run.id)
    assert stored.status is RunStatus.CANCELLED
    assert stored.fencing_token == 2
    assert stored.lease_owner is None
    assert (await cancel.cancel(WHO, run.id)).status is RunStatus.CANCELLED  # idempotent
    done = await env.submit.submit(WHO, submission("succeed"))
    await run_worker(env.admin, env.clock, "w2", capacity=WIDE).run_once()
    with pytest.raises(ConflictError) as terminal:
        await cancel.cancel(WHO, done.id)
    assert terminal.value.code == CANCEL_TERMINAL


async def test_tool_pipeline_denies_undeclared_and_unscoped_tools(env: Env) -> None:
    undeclared = await env.submit.submit(
        WHO, submission("undeclared_tool", scopes=frozenset({"web.search"}))
    )
    unscoped = await env.submit.submit(
        WHO,
        submission(
            "undeclared_tool", scopes=frozenset({"memory.read"}), agent_version=TOOL_AGENT_VERSION
        ),
    )
    allowed = await env.submit.submit(
        WHO,
        submission(
            "undeclared_tool", scopes=frozenset({"web.search"}), agent_version=TOOL_AGENT_VERSION
        ),
    )
    bulk = await env.submit.submit(
        WHO, submission("bulk_output:5000", agent_version=TOOL_AGENT_VERSION)
    )
    worker = run_worker(env.admin, env.clock, "w", capacity=WIDE)
    while await worker.run_once() is not None:
        pass

    async def tool_events(run_id: UUID, session_id: UUID) -> list[dict[str, object]]:
        async with env.admin.begin() as uow:
            events = await uow.sessions.events(session_id, None)
        return [
            {"type": e.event_type, **e.payload} for e in events if e.event_type.startswith("tool.")
        ]

    assert (await tool_events(undeclared.id, undeclared.session_id))[0][
        "reason_code"
    ] == TOOL_UNDECLARED
    denied = (await tool_events(unscoped.id, unscoped.session_id))[0]
    assert denied["reason_code"] == TOOL_SCOPE_DENIED
    assert denied["missing_scopes"] == ["web.search"]
    assert (await tool_events(allowed.id, allowed.session_id))[0]["type"] == "tool.result"
    out = (await tool_events(bulk.id, bulk.session_id))[0]
    assert out["truncated"] is True
    assert out["bytes"] == 5000
    assert len(str(out["text"])) == 1024


async def test_submission_requires_held_scopes(env: Env) -> None:
    with pytest.raises(AuthorizationError):
        await env.submit.submit(WHO, submission("succeed", scopes=frozenset({"browser.navigate"})))


async def test_synthesis_reserve_refuses_further_tools_then_answers(env: Env) -> None:
    bounds = limits(max_steps=6, reserve_steps=2)
    run = await env.submit.submit(
        WHO,
        submission(
            "tools:5",
            limits=bounds,
            scopes=frozenset({"memory.read"}),
            agent_version=TOOL_AGENT_VERSION,
        ),
    )
    outcome = await run_worker(env.admin, env.clock, "w", capacity=WIDE).run_once()
    assert outcome is not None
    assert outcome.status == "COMPLETED"
    async with env.admin.begin() as uow:
        events = await uow.sessions.events(run.session_id, None)
    tools = [
        (e.event_type, e.payload.get("reason_code"))
        for e in events
        if e.event_type.startswith("tool.")
    ]
    assert tools == [("tool.result", None)] * 4 + [("tool.denied", SYNTHESIS_RESERVE)]
    assert (await run_row(env.admin, run.id)).usage["tool_calls"] == 4


async def test_a_queue_restricted_to_one_class_claims_only_it(env: Env) -> None:
    await env.submit.submit(WHO, submission("succeed"))
    queued_async = await env.submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC))
    async_only = PostgresRunQueue(env.admin, WIDE, classes=frozenset({RunPriority.ASYNC}))
    claimed = await async_only.claim("a", env.clock.now(), 30)
    assert claimed is not None
    assert claimed.run.id == queued_async.id
    assert await async_only.claim("a", env.clock.now(), 30) is None
