"""What a recovered run resumes with, beyond the bounds ``test_run_bounded`` crashes on.

Each case crashes the run worker production builds right after one commit (its probe
step), lets the lease expire on the virtual clock and has a second worker recover
the run from its checkpoint, on PostgreSQL.

* ``gate.schedule.run_bounded`` - a mixed script (research rounds: a model call of
  USD 1, then a ``memory.recall``) under a step bound of 5, crashed after its third
  action: every usage counter resumes as checkpointed, so over both attempts exactly 5
  actions are performed and the run fails with ``schedule.runtime.step_limit``, its
  usage 5 steps, 3 model calls, 2 tool calls. (A scripted run of model calls alone
  cannot tell the step counter from the model-call counter.)
* ``rule.lease.fencing`` (recoverable from its checkpoint) - a 60 s wait, charged with
  its absolute end, crashed at its second heartbeat (t = 20 s) and recovered after the
  lease (t = 51 s): the recovering worker waits only until the checkpointed end and
  completes at t = 60 s, the wait charged once; a recovery that starts the wait again
  (or from the crash) would end later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.revision import RunLimits
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import STEP_LIMIT, WorkerSettings
from scheduling.testing import PostgresUnitOfWorkFactory
from simulation.engine.clock import VirtualClock
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import (
    TOOL_AGENT_VERSION,
    UNACCOUNTED,
    run_row,
    run_worker,
    seed_tool_agent,
    submission,
    submitter,
)
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

CAPACITY = QueueCapacity(4, 1, 1)
SETTINGS = WorkerSettings(lease_seconds=30, heartbeat_seconds=10, poll_seconds=1)


class Crash(Exception):
    """An injected worker crash."""


class CrashAt:
    """Raise right after the ``nth`` commit named ``name`` (the work committed)."""

    def __init__(self, name: str, nth: int) -> None:
        self.name, self.nth, self.seen = name, nth, 0

    async def step(self, name: str) -> None:
        if name == self.name:
            self.seen += 1
            if self.seen == self.nth:
                raise Crash(f"{name} #{self.nth}")


async def performed(h: MaterializeWorld, run_id: UUID) -> int:
    rows = await h.sql(
        "SELECT count(*) AS n FROM session_events WHERE run_id = :i"
        " AND event_type IN ('model.called', 'tool.result', 'tool.denied')",
        i=run_id,
    )
    return int(rows[0]["n"])


@pytest.mark.gate("gate.schedule.run_bounded")
async def test_a_mixed_run_resumes_every_counter_and_stops_at_its_step_bound(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_tool_agent(h.admin, START)
        sid = await h.create(
            limits=RunLimits(
                max_steps=5, max_model_calls=50, max_tool_calls=50, max_cost=Decimal(9)
            ),
            instruction="Research until stopped. [script:research:10]",
            agent_version=TOOL_AGENT_VERSION,
            requested_scopes=frozenset({"memory.read"}),
        )
        h.clock.advance_to(await h.next_fire(sid))
        h.clock.advance(1)
        made = await h.materializer().materialize(sid)
        assert made.run_id is not None, made
        crash = CrashAt("run.checkpointed", 3)
        first = run_worker(
            h.admin, h.clock, "w1", capacity=CAPACITY, settings=SETTINGS, probe=crash
        )
        with pytest.raises(Crash):
            await first.run_once()
        at_crash = (await h.sql("SELECT usage FROM runs WHERE id = :i", i=made.run_id))[0]
        checkpointed = at_crash["usage"]
        assert (
            checkpointed["steps"],
            checkpointed["model_calls"],
            checkpointed["tool_calls"],
        ) == (3, 2, 1), checkpointed
        assert await performed(h, made.run_id) == 3
        h.clock.advance(SETTINGS.lease_seconds + 1)
        second = run_worker(h.admin, h.clock, "w2", capacity=CAPACITY, settings=SETTINGS)
        outcome = await second.run_once()
        assert outcome is not None
        assert outcome.recovered
        assert outcome.run_id == str(made.run_id)
        assert outcome.reason_code == STEP_LIMIT, outcome
        final = (await h.sql("SELECT * FROM runs WHERE id = :i", i=made.run_id))[0]
        assert final["status"] == "FAILED"
        usage = final["usage"]
        assert (usage["steps"], usage["model_calls"], usage["tool_calls"]) == (5, 3, 2), usage
        assert Decimal(usage["cost"]) == Decimal(3), usage
        # Over both attempts: exactly the bound's actions, never one more.
        assert await performed(h, made.run_id) == 5
    finally:
        await h.close()


WHO = principal("waiting", scopes={"memory.read"})


@pytest.fixture
async def admin(pg_url: str) -> AsyncIterator[PostgresUnitOfWorkFactory]:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=6)
    await seed_durable(factory, [WHO])
    try:
        yield factory
    finally:
        await factory.dispose()


@pytest.mark.rule("rule.lease.fencing")
async def test_a_recovered_wait_ends_at_its_checkpointed_instant(
    admin: PostgresUnitOfWorkFactory,
) -> None:
    clock = VirtualClock(START)
    run = await submitter(admin, clock).submit(WHO, submission("run_long:60"))
    crash = CrashAt("run.heartbeat", 2)

    def worker(owner: str, probe: Any = None) -> Any:
        return run_worker(
            admin,
            clock,
            owner,
            capacity=CAPACITY,
            settings=SETTINGS,
            probe=probe,
            on_finished=UNACCOUNTED,
        )

    with pytest.raises(Crash):
        await worker("w1", crash).run_once()
    assert clock.now() == START + timedelta(seconds=20)
    clock.advance(SETTINGS.lease_seconds + 1)
    outcome = await worker("w2").run_once()
    assert outcome is not None
    assert outcome.recovered
    assert outcome.status == RunStatus.COMPLETED.value, outcome
    final = await run_row(admin, run.id)
    assert final.status is RunStatus.COMPLETED
    # The wait ends where it was charged to end: 60 s after it began, not later.
    assert final.finished_at == START + timedelta(seconds=60), final.finished_at
    assert outcome.ended_at == START + timedelta(seconds=60)
    # One model call and the wait, each charged once.
    assert final.usage["steps"] == 2, final.usage
    assert final.usage["model_calls"] == 1, final.usage
