"""``rule.lease.fencing`` on PostgreSQL: a reclaimed lease fences out its stale holder;
``rule.queue.eligibility``: what the queue may claim, and in which order.

The real run worker (``bootstrap.build_run_worker``) runs a scripted run on a virtual
clock. At a chosen commit of that worker (its probe step), the clock passes the lease
and a second claimer takes the expired run through the real queue (fencing token + 1).
The stale worker then makes its next write: a heartbeat during a wait, a checkpoint
after a charge, or the completion. Each must write nothing: the worker ends with
``schedule.runtime.lease_lost``, no commit of it follows the takeover (no probe step),
the run row is the one the claim left, and no checkpoint or session event was added.
The new holder then finishes the run once.

The new holder's takeover is audited: after the first holder's ``run.started``, one
``run.recovered`` event naming the new fencing token and the checkpoint it resumed from.

Recoverable at full capacity: when every slot is held by a worker that died, their
leases expire and a fresh worker must reclaim them (an expired lease holds no slot),
one by one, each with a new fencing token, however full the fleet looked - at the very
instant the leases expire.

``rule.queue.eligibility``, the queue's own rules a scheduled run inherits: a run is
not claimed before its ``scheduled_for`` (the process that queued it reads a clock 1 us
ahead of the claimer's); with both priority classes admitted the claim takes
priority 0 before older priority-10 runs, then those oldest first; a worker
configured for one class never claims the other's runs; and a run whose row a cancel
in flight holds locked is skipped (the claim takes the next run at once), not waited
for.

Tests of the test: ``scheduling-gates mutate`` (``fencing.save_ignores_token``,
``fencing.stale_write_ignored``, ``queue.expired_leases_hold_slots``,
``worker.recovery_audited_as_start``, ``queue.expiry_instant_unclaimable``;
``queue.claims_before_scheduled_for``, ``queue.order_ignores_priority``,
``queue.order_ignores_age``, ``queue.ignores_configured_classes``,
``queue.waits_on_locked_rows``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.checks.crash_support import CrashingFactory, Hold
from scheduling.bootstrap import RunWorkerRole, build_run_worker
from scheduling.domain.identity import Principal
from scheduling.ports.probe import Probe
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import ClaimedRun, QueueCapacity, RunPriority
from scheduling.runtime import LEASE_LOST, WorkerSettings
from scheduling.service.cancellation import RunCancellation
from scheduling.testing import PostgresUnitOfWorkFactory, storage_over
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.runtime import UNACCOUNTED, run_row, submission, submitter
from simulation.worlds.service import START, principal, seed_durable, world_settings

pytestmark = pytest.mark.postgres

WHO = principal("fenced", scopes={"memory.read"})
WIDE = QueueCapacity(8, 1, 1)
SETTINGS = WorkerSettings(lease_seconds=30, heartbeat_seconds=10, poll_seconds=1)


@dataclass
class Takeover:
    """A probe: at the ``nth`` commit named ``step`` the lease expires and another
    claimer takes the run; every later commit of the stale worker is recorded."""

    holder: RunWorkerRole
    admin: PostgresUnitOfWorkFactory
    clock: VirtualClock
    step_name: str
    nth: int
    seen: int = 0
    claimed: ClaimedRun | None = None
    row_after: Any = None
    stale_commits: list[str] = field(default_factory=list)

    async def step(self, name: str) -> None:
        if self.claimed is not None:
            self.stale_commits.append(name)
            return
        if name != self.step_name:
            return
        self.seen += 1
        if self.seen < self.nth:
            return
        self.clock.advance(SETTINGS.lease_seconds + 1)
        queue = self.holder.queue
        self.claimed = await queue.claim("w2", self.clock.now(), SETTINGS.lease_seconds)
        assert self.claimed is not None, "the expired lease was not reclaimable"
        self.row_after = await run_row(self.admin, self.claimed.run.id)


async def trail(admin: PostgresUnitOfWorkFactory, run_id: UUID) -> tuple[list[Any], list[Any]]:
    async with admin.begin() as uow:
        run = await uow.runs.get(run_id, None)
        return list(await uow.runs.checkpoints(run_id)), list(
            await uow.sessions.events(run.session_id, None)
        )


def role(
    admin: PostgresUnitOfWorkFactory,
    clock: VirtualClock,
    owner: str,
    probe: Probe | None = None,
    capacity: QueueCapacity = WIDE,
    priority: RunPriority | None = None,
) -> RunWorkerRole:
    """The run worker production builds (claiming ``priority``'s class only, or both),
    with the test's lease settings and no post-run accounting (these runs have no
    schedule)."""
    return build_run_worker(
        world_settings(),
        priority,
        clock=clock,
        ids=SeededIds(0).fork(owner),
        probe=probe,
        storage=storage_over(admin),
        capacity=capacity,
        owner=owner,
        worker_settings=SETTINGS,
        on_finished=UNACCOUNTED,
    )


@dataclass
class Env:
    admin: PostgresUnitOfWorkFactory
    clock: VirtualClock


@pytest.fixture
async def env(pg_url: str) -> AsyncIterator[Env]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=6)
    await seed_durable(admin, [WHO])
    try:
        yield Env(admin, VirtualClock(START))
    finally:
        await admin.dispose()


async def fenced_out(env: Env, script: str, step: str, nth: int, refused: str) -> dict[str, Any]:
    """The stale worker's next write after the takeover (``refused``) writes nothing."""
    run = await submitter(env.admin, env.clock).submit(WHO, submission(script))
    holder = role(env.admin, env.clock, "w2")
    probe = Takeover(holder, env.admin, env.clock, step, nth)
    stale = role(env.admin, env.clock, "w1", probe).worker
    outcome = await stale.run_once()
    assert probe.claimed is not None, f"{script}: no takeover at {step} #{nth}"
    claimed = probe.claimed
    assert outcome is not None
    assert claimed.lease.fencing_token == outcome.fencing_token + 1
    assert outcome.lease_lost, f"{refused}: the stale worker went on ({outcome})"
    assert outcome.reason_code == LEASE_LOST
    assert probe.stale_commits == [], f"{refused}: the stale worker committed"
    assert await run_row(env.admin, run.id) == probe.row_after, f"{refused}: the row moved"
    checkpoints, events = await trail(env.admin, run.id)
    assert all(c.fencing_token < claimed.lease.fencing_token for c in checkpoints), refused
    assert all(e.occurred_at <= claimed.claimed_at for e in events), refused

    # The new holder finishes the run, once.
    done = await holder.worker.execute(claimed)
    assert done.status == RunStatus.COMPLETED.value, done
    final = await run_row(env.admin, run.id)
    assert final.status is RunStatus.COMPLETED
    assert final.fencing_token == claimed.lease.fencing_token
    checkpoints, events = await trail(env.admin, run.id)
    types = [e.event_type for e in events]
    assert types.count("run.completed") == 1, types
    assert types.count("message.assistant") == 1, types
    tokens = [c.fencing_token for c in checkpoints]
    assert tokens == sorted(tokens), tokens  # no stale token after the new holder's
    assert tokens[-1] == claimed.lease.fencing_token, tokens
    # Audited: the first holder's start, then the takeover as a recovery naming the new
    # token and the checkpoint it resumed from (not a second fresh start).
    starts = [e for e in events if e.event_type in ("run.started", "run.recovered")]
    assert [e.event_type for e in starts] == ["run.started", "run.recovered"], types
    recovered = starts[1].payload
    assert recovered["fencing_token"] == claimed.lease.fencing_token, recovered
    assert claimed.checkpoint is not None
    assert recovered["resumed_from_seq"] == claimed.checkpoint.seq, recovered
    return {"refused": refused, "stale_token": outcome.fencing_token}


@pytest.mark.rule("rule.lease.fencing")
async def test_a_stale_heartbeat_writes_nothing(env: Env) -> None:
    # run_long: a model call, then a wait (charged) whose next write is a heartbeat.
    await fenced_out(env, "run_long:120", "run.charged", 2, "heartbeat")


@pytest.mark.rule("rule.lease.fencing")
async def test_a_stale_checkpoint_writes_nothing(env: Env) -> None:
    # After the first charge, the next write is the action's checkpoint.
    await fenced_out(env, "steps:3", "run.charged", 1, "checkpoint")


@pytest.mark.rule("rule.lease.fencing")
async def test_a_stale_completion_writes_nothing(env: Env) -> None:
    # succeed: after the model call's checkpoint, the next write is the completion.
    await fenced_out(env, "succeed", "run.checkpointed", 1, "completion")


FULL = QueueCapacity(2, 1, 1)
"""Two slots: one interactive run and one async run fill the fleet."""


@pytest.mark.rule("rule.lease.fencing")
async def test_dead_workers_leases_free_their_slots(env: Env) -> None:
    """Both slots held by workers that then die: after the leases expire, a fresh
    worker reclaims both runs (recovered, token + 1) through the real queue."""
    submit = submitter(env.admin, env.clock)
    queued = [
        await submit.submit(WHO, submission("succeed", priority=RunPriority.INTERACTIVE)),
        await submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC)),
    ]
    queue = role(env.admin, env.clock, "dead", capacity=FULL).queue
    dead = [await queue.claim("dead", env.clock.now(), SETTINGS.lease_seconds) for _ in queued]
    assert all(c is not None for c in dead)
    assert await queue.claim("dead", env.clock.now(), SETTINGS.lease_seconds) is None, (
        "two live leases must fill two slots"
    )
    # At the instant the leases expire they hold no slot and are claimable at once
    # (an expiry that frees the slot a moment before the run may be claimed would
    # leave it unclaimable in between).
    expiry = {c.lease.expires_at for c in dead if c is not None}
    assert len(expiry) == 1, expiry
    env.clock.advance_to(expiry.pop())
    fresh = role(env.admin, env.clock, "fresh", capacity=FULL).queue
    reclaimed = [await fresh.claim("fresh", env.clock.now(), SETTINGS.lease_seconds) for _ in dead]
    assert all(c is not None for c in reclaimed), "an expired lease still held its slot"
    assert {c.run.id for c in reclaimed if c is not None} == {r.id for r in queued}
    for before in dead:
        assert before is not None
        after = next(c for c in reclaimed if c is not None and c.run.id == before.run.id)
        assert after.recovered
        assert after.lease.fencing_token == before.lease.fencing_token + 1


@pytest.mark.rule("rule.queue.eligibility")
async def test_a_run_is_not_claimed_before_its_scheduled_for(env: Env) -> None:
    """The process that queued the run reads a clock 1 us ahead of the claimer's: the
    run is not claimable until the claimer's clock reaches its ``scheduled_for``."""
    ahead = VirtualClock(env.clock.now() + timedelta(microseconds=1))
    queued = await submitter(env.admin, ahead).submit(
        WHO, submission("succeed", priority=RunPriority.ASYNC)
    )
    queue = role(env.admin, env.clock, "behind").queue
    early = await queue.claim("behind", env.clock.now(), SETTINGS.lease_seconds)
    assert early is None, f"claimed 1 us before its scheduled_for: {early}"
    assert (await run_row(env.admin, queued.id)).status is RunStatus.QUEUED
    env.clock.advance_to(env.clock.now() + timedelta(microseconds=1))
    due = await queue.claim("behind", env.clock.now(), SETTINGS.lease_seconds)
    assert due is not None, "not claimed at its scheduled_for"
    assert due.run.id == queued.id


@pytest.mark.rule("rule.queue.eligibility")
async def test_with_both_classes_admitted_priority_orders_the_claim(env: Env) -> None:
    """An interactive run (priority 0) queued after four async ones (priority 10) is
    claimed first by a worker admitting both classes; the async ones follow, oldest
    first. Their random ids are in neither age order nor its reverse (asserted), so a
    queue that breaks ties by id instead of by ``scheduled_for`` claims them out of
    order."""
    submit = submitter(env.admin, env.clock, seed=1)
    older = []
    for _ in range(4):
        older.append(await submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC)))
        env.clock.advance(1)
    by_age = [run.id for run in older]
    assert sorted(by_age) != by_age != sorted(by_age, reverse=True), (
        "the submitter's seed gave ids in age order: choose one that does not"
    )
    interactive = await submit.submit(WHO, submission("succeed"))
    queue = role(env.admin, env.clock, "both").queue
    claimed = [await queue.claim("both", env.clock.now(), SETTINGS.lease_seconds) for _ in range(5)]
    order = [None if c is None else c.run.id for c in claimed]
    assert order == [interactive.id, *by_age], order


@pytest.mark.rule("rule.queue.eligibility")
async def test_a_worker_of_one_class_claims_only_that_class(env: Env) -> None:
    """Interactive and async workers claim disjoint configured priority classes (spec
    "Configuration and deployment"): with two async runs and one interactive run queued,
    the interactive worker claims the interactive run and then nothing, the async worker
    the two async runs and then nothing, though each class has free slots."""
    submit = submitter(env.admin, env.clock, seed=2)
    queued = {
        RunPriority.ASYNC: [
            (await submit.submit(WHO, submission("succeed", priority=RunPriority.ASYNC))).id
            for _ in range(2)
        ],
        RunPriority.INTERACTIVE: [(await submit.submit(WHO, submission("succeed"))).id],
    }
    env.clock.advance(1)
    for cls in (RunPriority.INTERACTIVE, RunPriority.ASYNC):
        owner = cls.name.lower()
        queue = role(env.admin, env.clock, owner, priority=cls).queue
        claims = [
            await queue.claim(owner, env.clock.now(), SETTINGS.lease_seconds)
            for _ in range(len(queued[cls]) + 1)
        ]
        claimed = [None if c is None else c.run.id for c in claims]
        assert sorted(map(str, claimed[:-1])) == sorted(map(str, queued[cls])), (cls, claimed)
        assert claimed[-1] is None, (cls, "claimed a run of the other class", claimed)


CANCELLER = Principal(WHO.tenant_id, WHO.principal_id, frozenset({"run.cancel"}))


@pytest.mark.rule("rule.queue.eligibility")
async def test_a_run_locked_by_a_cancel_in_flight_is_skipped_not_waited_for(env: Env) -> None:
    """The oldest queued run's row is held by a cancel caught between its fenced write and
    its COMMIT: a claim meanwhile takes the next queued run at once (SKIP LOCKED), it
    does not wait for the cancel to end. Once the cancel commits, the oldest run is
    CANCELLED and was never claimed."""
    submit = submitter(env.admin, env.clock, seed=3)
    oldest = await submit.submit(WHO, submission("succeed"))
    env.clock.advance(1)
    next_one = await submit.submit(WHO, submission("succeed"))
    hold = Hold("runs.save")
    cancels = RunCancellation(CrashingFactory(env.admin, None, hold), env.clock)
    cancelling = asyncio.ensure_future(cancels.cancel(CANCELLER, oldest.id))
    claiming: asyncio.Future[ClaimedRun | None] | None = None
    try:
        await asyncio.wait_for(hold.reached.wait(), timeout=30)
        queue = role(env.admin, env.clock, "skipper").queue
        claiming = asyncio.ensure_future(
            queue.claim("skipper", env.clock.now(), SETTINGS.lease_seconds)
        )
        # Generous for a loaded machine: the claim needs no lock the cancel holds.
        done, _ = await asyncio.wait({claiming}, timeout=10)
        in_time = claiming in done
    finally:
        hold.release.set()
        await cancelling
    claimed = await claiming
    assert in_time, "the claim waited for the cancel holding the oldest run's row"
    assert claimed is not None
    assert claimed.run.id == next_one.id, claimed
    assert (await run_row(env.admin, oldest.id)).status is RunStatus.CANCELLED
