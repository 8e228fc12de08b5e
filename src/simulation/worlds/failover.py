"""Failover under load: kill the primary mid-materialization, promote its standby, and
read what the promoted server holds.

On a ``ReplicaPair`` (durable primary, streaming standby): a migrated database, a
batch of due schedules, and one real schedule worker (the least-privilege scheduler
role, built through the composition root) whose engine uses the pair's multi-host
URL (``target_session_attrs=read-write``). After ``kill_after`` committed
materializations, in the middle of the next transaction (after its decision
statement), the probe SIGKILLs the primary's postmaster and promotes the standby. The
same worker object keeps running passes: the transient retry reconnects, and the
pool's new connections land on the promoted server, the only read-write host left.

Afterwards, read on the promoted server: every occurrence the worker reported
committed must be there (none lost), one occurrence per schedule and nominal instant
(none duplicated), each MATERIALIZED one with its session, run, checkpoint, session
event and process event (none partial), and every seeded schedule decided (the worker
continued). ``stop_streaming=True`` (for an asynchronous standby: a synchronous one
would block every COMMIT) detaches the standby before the load, the forced
replication delay under which the check must find lost occurrences.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import UUID

import asyncpg

from scheduling.ports.retry import RetrySettings
from scheduling.service import materializer as m
from scheduling.service.materializer import MaterializeStatus
from scheduling.testing import ConfiguredTenantConfiguration, upgrade_to_head
from simulation.provider._info import database_of
from simulation.provider._replica import ReplicaPair
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import CEILINGS

# Prompt retries that outlast a kill and promotion the probe has already completed.
RETRY = RetrySettings(attempts=8, base_delay_seconds=0.05, max_delay_seconds=0.5)
CATCH_UP_SECONDS = 30.0
MAX_PASSES = 12


@dataclass
class FailoverOutcome:
    problems: list[str] = field(default_factory=list)
    reported: dict[UUID, UUID] = field(default_factory=dict)
    """Occurrence id -> schedule id of every decision the worker reported committed."""
    committed_before_kill: int = 0
    """Commits the workers had seen when the primary was killed."""
    in_doubt_at_kill: int = 0
    """Other transactions past their decision, not yet seen committed, at the kill: with
    concurrency a COMMIT the old primary made just before the kill can be seen by its
    client only after it (the response was already in the socket)."""
    decided_after_kill: int = 0
    killed: bool = False
    transient_retries: int = 0
    """The workers' prompt retries (the reconnections that rode out the failover)."""
    promoted_url: str = ""
    """The database on the promoted server (the standby), for a re-check."""
    seeded: list[UUID] = field(default_factory=list)
    workers: int = 1
    workers_continued: int = 0
    """Workers (the same objects) that made a pass without an error after the kill."""


class FailOverAt:
    """A probe that, after ``after`` commits, kills the primary in the middle of the
    next materialization (its decision written, not committed) and promotes
    the standby."""

    def __init__(self, pair: ReplicaPair, after: int) -> None:
        self.pair, self.after = pair, after
        self.commits, self.killed = 0, False
        self.open = 0
        """Transactions past their decision and not yet seen committed."""
        self.commits_at_kill = self.open_at_kill = 0

    async def step(self, name: str) -> None:
        if name == m.STEP_COMMITTED:
            self.commits += 1
            self.open = max(0, self.open - 1)
        elif name == m.STEP_DECIDED and self.commits >= self.after and not self.killed:
            # Counted at the kill: another worker's commit can land between the
            # ``after``-th and this decision.
            self.killed = True
            self.commits_at_kill, self.open_at_kill = self.commits, self.open
            self.pair.kill_primary()
            self.pair.promote()
        elif name == m.STEP_DECIDED:
            self.open += 1


async def _wait_replayed(pair: ReplicaPair) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    primary = await asyncpg.connect(pair.primary.url_for("postgres"))
    standby = await asyncpg.connect(pair.standby.url_for("postgres"))
    try:
        target = await primary.fetchval("SELECT pg_current_wal_lsn()")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        while not await standby.fetchval("SELECT pg_last_wal_replay_lsn() >= $1", target):
            if loop.time() > deadline:
                raise TimeoutError("the standby did not catch up with the primary")
            await asyncio.sleep(0.02)
    finally:
        await primary.close()
        await standby.close()


async def _stop_streaming(pair: ReplicaPair) -> None:
    """Detach the standby's WAL receiver (an empty ``primary_conninfo``) and wait until
    the primary has no WAL sender left: later commits stay on the primary only."""
    standby = await asyncpg.connect(pair.standby.url_for("postgres"))
    primary = await asyncpg.connect(pair.primary.url_for("postgres"))
    try:
        await standby.execute("ALTER SYSTEM SET primary_conninfo = ''")
        await standby.execute("SELECT pg_reload_conf()")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        while await primary.fetchval("SELECT count(*) FROM pg_stat_replication"):
            if loop.time() > deadline:
                raise TimeoutError("the standby kept streaming")
            await asyncio.sleep(0.02)
    finally:
        await standby.close()
        await primary.close()


async def failover_under_load(
    pair: ReplicaPair,
    *,
    schedules: int = 24,
    kill_after: int = 8,
    stop_streaming: bool = False,
    workers: int = 1,
) -> FailoverOutcome:
    """Run the load on ``workers`` schedule workers at once, fail over mid-way, and
    check the promoted server's ledger."""
    url = pair.primary.create_database()
    await upgrade_to_head(url)
    h = await MaterializeWorld.open(pair.multi_host_url(url))
    # Room for every seeded run at once: admission must not be what limits the load.
    h.tenants = ConfiguredTenantConfiguration(
        default=CEILINGS.model_copy(update={"max_active_runs": schedules})
    )
    outcome = FailoverOutcome()
    try:
        seeded = [await h.create() for _ in range(schedules)]
        latest = max([await h.next_fire(sid) for sid in seeded])
        h.clock.advance_to(latest + timedelta(seconds=1))
        await _wait_replayed(pair)
        if stop_streaming:
            await _stop_streaming(pair)
        probe = FailOverAt(pair, kill_after)
        loads = [
            h.worker(
                h.materializer(probe=probe),
                expect_errors=True,
                transient_retry=RETRY,
                concurrency=2,
            )
            for _ in range(workers)
        ]
        clean_after_kill: set[int] = set()
        for _ in range(MAX_PASSES):
            killed_before_pass = probe.killed
            reports = await asyncio.gather(*(worker.run_once() for worker in loads))
            for index, report in enumerate(reports):
                for result in report.results:
                    if result.status is MaterializeStatus.DECIDED and result.occurrence is not None:
                        outcome.reported[result.occurrence.id] = result.schedule_id
                if killed_before_pass and not report.errors:
                    clean_after_kill.add(index)
            if probe.killed and not any(r.scanned or r.errors for r in reports):
                break
            # A schedule set aside by the failure backoff becomes due again.
            h.clock.advance(loads[0].settings.failure_backoff_seconds + 1)
        outcome.killed = probe.killed
        outcome.transient_retries = sum(w.metrics.transient_retries for w in loads)
        outcome.committed_before_kill = probe.commits_at_kill
        outcome.in_doubt_at_kill = probe.open_at_kill
        outcome.decided_after_kill = probe.commits - outcome.committed_before_kill
        outcome.workers = workers
        outcome.workers_continued = len(clean_after_kill)
        if not probe.killed:
            outcome.problems.append("the primary was never killed")
            return outcome
        outcome.promoted_url = pair.standby.url_for(database_of(url))
        outcome.seeded = seeded
        outcome.problems += await ledger_problems(outcome.promoted_url, outcome.reported, seeded)
        if outcome.workers_continued != workers:
            outcome.problems.append(
                f"only {outcome.workers_continued} of {workers} workers made a clean pass"
                " after the failover"
            )
        return outcome
    finally:
        await h.close()


async def ledger_problems(url: str, reported: dict[UUID, UUID], seeded: list[UUID]) -> list[str]:
    """Lost, duplicated and partial occurrences on the server at ``url``."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT o.id, o.schedule_id, o.disposition,"
            " EXISTS (SELECT 1 FROM sessions s WHERE s.id = o.session_id) AS has_session,"
            " EXISTS (SELECT 1 FROM runs r WHERE r.id = o.run_id) AS has_run,"
            " EXISTS (SELECT 1 FROM run_checkpoints c WHERE c.run_id = o.run_id) AS has_checkpoint,"
            " EXISTS (SELECT 1 FROM session_events e WHERE e.session_id = o.session_id)"
            "   AS has_session_event,"
            " EXISTS (SELECT 1 FROM process_events p WHERE p.schedule_id = o.schedule_id"
            "   AND p.payload->>'occurrence_id' = o.id::text) AS has_process_event"
            " FROM schedule_occurrences o"
        )
        duplicates = await conn.fetch(
            "SELECT schedule_id, nominal_fire_at, count(*) AS n FROM schedule_occurrences"
            " GROUP BY schedule_id, nominal_fire_at HAVING count(*) > 1"
        )
    finally:
        await conn.close()
    present = {row["id"] for row in rows}
    problems = [
        f"occurrence {oid} of schedule {sid} was reported committed but is not on the"
        " promoted server (lost)"
        for oid, sid in reported.items()
        if oid not in present
    ]
    problems += [
        f"schedule {d['schedule_id']} has {d['n']} occurrences at {d['nominal_fire_at']}"
        for d in duplicates
    ]
    parts = ("has_session", "has_run", "has_checkpoint", "has_session_event", "has_process_event")
    for row in rows:
        if row["disposition"] == "MATERIALIZED":
            missing = [p.removeprefix("has_") for p in parts if not row[p]]
            if missing:
                problems.append(f"occurrence {row['id']} is partial: no {', '.join(missing)}")
    decided = {row["schedule_id"] for row in rows}
    problems += [
        f"schedule {sid} was never decided after the failover"
        for sid in seeded
        if sid not in decided
    ]
    return problems
