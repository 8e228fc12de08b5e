"""``rule.lease.fencing``: a live holder keeps its lease, and a finished run holds none.

The run worker production builds (lease 30 s, heartbeat 10 s) runs a scripted run on a
virtual clock over PostgreSQL: a model call, then a 60 s wait. After every commit of
the worker (its probe step) the check reads the run row: each non-terminal write -
the start, each charge, each checkpoint and each of the six heartbeats - renews the
lease to that write's instant plus the full ``lease_seconds``, for this owner (a
renewal shorter than the lease, say one heartbeat period, lets the lease lapse at the
next heartbeat's instant, when another worker may take a live run); and at that
instant minus a microsecond another claimer gets nothing. The terminal write clears
the lease and stamps ``finished_at`` with its instant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduling.bootstrap import RunWorkerRole, build_run_worker
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings
from scheduling.testing import PostgresUnitOfWorkFactory, storage_over
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.runtime import UNACCOUNTED, run_row, submission, submitter
from simulation.worlds.service import START, principal, seed_durable, world_settings

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.lease.fencing")]

WHO = principal("renewed", scopes={"memory.read"})
SETTINGS = WorkerSettings(lease_seconds=30, heartbeat_seconds=10, poll_seconds=1)
TICK = timedelta(microseconds=1)


@dataclass
class Recorder:
    """After each commit: the row as committed, and whether a rival could claim."""

    admin: PostgresUnitOfWorkFactory
    clock: VirtualClock
    rival: RunWorkerRole | None = None
    run_id: Any = None
    seen: list[tuple[str, datetime, Any]] = field(default_factory=list)

    async def step(self, name: str) -> None:
        if self.run_id is None:
            return
        now = self.clock.now()
        row = await run_row(self.admin, self.run_id)
        self.seen.append((name, now, row))
        if row.status is RunStatus.RUNNING and self.rival is not None:
            # Just before the renewed expiry the lease still holds the run.
            early = row.lease_expires_at - TICK
            taken = await self.rival.queue.claim("rival", early, SETTINGS.lease_seconds)
            assert taken is None, (name, now, row.lease_expires_at)


def role(
    admin: PostgresUnitOfWorkFactory, clock: VirtualClock, owner: str, probe: Any = None
) -> RunWorkerRole:
    return build_run_worker(
        world_settings(),
        None,
        clock=clock,
        ids=SeededIds(0).fork(owner),
        probe=probe,
        storage=storage_over(admin),
        capacity=QueueCapacity(8, 1, 1),
        owner=owner,
        worker_settings=SETTINGS,
        on_finished=UNACCOUNTED,
    )


@pytest.fixture
async def admin(pg_url: str) -> AsyncIterator[PostgresUnitOfWorkFactory]:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=6)
    await seed_durable(factory, [WHO])
    try:
        yield factory
    finally:
        await factory.dispose()


async def test_every_write_renews_the_full_lease_and_the_end_clears_it(
    admin: PostgresUnitOfWorkFactory,
) -> None:
    clock = VirtualClock(START)
    run = await submitter(admin, clock).submit(WHO, submission("run_long:60"))
    recorder = Recorder(admin, clock)
    recorder.rival = role(admin, clock, "rival")
    recorder.run_id = run.id
    worker = role(admin, clock, "holder", recorder).worker
    outcome = await worker.run_once()
    assert outcome is not None
    assert outcome.status == RunStatus.COMPLETED.value, outcome
    names = [name for name, _, _ in recorder.seen]
    assert names.count("run.heartbeat") == 6, names
    assert names[-1] == "run.finished", names
    for name, now, row in recorder.seen[:-1]:
        assert row.status is RunStatus.RUNNING, (name, row.status)
        assert row.lease_owner == "holder", (name, row.lease_owner)
        assert row.lease_expires_at == now + timedelta(seconds=SETTINGS.lease_seconds), (
            name,
            now,
            row.lease_expires_at,
        )
        assert row.finished_at is None, name
    _, ended, final = recorder.seen[-1]
    assert final.status is RunStatus.COMPLETED
    assert (final.lease_owner, final.lease_expires_at) == (None, None)
    assert final.finished_at == ended
    assert ended == START + timedelta(seconds=60)
