"""gate.schedule.authority_fresh: the authority read belongs to the schedule's locked unit
of work.

``test_authority_fresh`` proves a long-lived worker sees changed authority. This proves
*where* it is read. The materializer runs over the scheduler role with a statement
hook on its engine: right after the due lock (``FOR UPDATE ... SKIP LOCKED`` on the
schedule) the hook records the locking backend and its transaction id; before every
SELECT that reads ``principals`` during the decision it records the reading backend
and transaction id (``pg_backend_pid()``, ``pg_current_xact_id_if_assigned()``, on
that very connection). Every authority read must come from the locking backend in the
locking transaction, and at least one must happen. A read in a transaction of its own
has another backend and no transaction id (it wrote nothing); a read on another engine
is not seen at all: both fail.

Second, a concurrent transaction revokes a requested scope and commits while the
decision holds the lock (at the materializer's ``materialize.locked`` step, before the
read). The decision must see it: AUTHORIZATION_FAILED ``scope_revoked``, no run, the
occurrence stamped with the revoked authority version - an authority read taken
before the lock (or cached) would materialize.

Test of the test: tests/integration/test_gate_hardening_authority_locked.py (a hot-path
store that reads authority in its own transaction; a store that reads it before the
lock).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.directories import authority_version
from scheduling.service.materializer import (
    SCOPE_REVOKED,
    STEP_COMMITTED,
    STEP_LOCKED,
    ScheduleMaterializer,
)
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres

READS_PRINCIPALS = re.compile(r"^\s*(SELECT|WITH)\b.*\b(FROM|JOIN)\s+principals\b", re.I | re.S)
LOCKS_DUE = re.compile(r"\bFOR UPDATE OF schedules SKIP LOCKED\b", re.I)
WHERE = "SELECT pg_backend_pid(), pg_current_xact_id_if_assigned()::text"
REVOKED = WHO.scopes - {"memory.read"}


@dataclass
class Observed:
    lock: tuple[int, str | None] | None = None
    reads: list[tuple[int, str | None]] = field(default_factory=list)
    open: bool = False
    """Between the due lock and COMMIT (the probe closes it)."""
    paused: bool = False
    """The concurrent revocation is running: its statements are not the decision's."""


@contextmanager
def observed(engine: AsyncEngine) -> Iterator[Observed]:
    seen = Observed()

    def where(conn: Any) -> tuple[int, str | None]:
        row = conn.exec_driver_sql(WHERE).one()
        return int(row[0]), row[1]

    def before(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if seen.open and not seen.paused and READS_PRINCIPALS.search(statement):
            seen.reads.append(where(conn))

    def after(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if not seen.paused and LOCKS_DUE.search(statement):
            seen.lock = where(conn)
            seen.open = True

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    event.listen(engine.sync_engine, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", before)
        event.remove(engine.sync_engine, "after_cursor_execute", after)


class RevokeWhileLocked:
    """Probe: at the locked step a concurrent transaction revokes a scope and commits."""

    def __init__(self, h: MaterializeWorld, seen: Observed) -> None:
        self._h = h
        self._seen = seen
        self.revoked = False

    async def step(self, name: str) -> None:
        if name == STEP_LOCKED and not self.revoked:
            self._seen.paused = True
            try:
                await self._h.set_principal(scopes=REVOKED)
            finally:
                self._seen.paused = False
            self.revoked = True
        if name == STEP_COMMITTED:
            self._seen.open = False


MaterializerFor = Callable[[MaterializeWorld, RevokeWhileLocked], ScheduleMaterializer]


def default_materializer(h: MaterializeWorld, probe: RevokeWhileLocked) -> ScheduleMaterializer:
    return h.materializer(probe=probe)


async def locked_read_problems(
    pg_url: str, materializer_for: MaterializerFor = default_materializer
) -> tuple[list[str], dict[str, Any]]:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=3))
        with observed(h.admin.engine) as seen:
            probe = RevokeWhileLocked(h, seen)
            result = await materializer_for(h, probe).materialize(sid)
        problems: list[str] = []
        if seen.lock is None:
            problems.append("the due lock was never observed")
        if not probe.revoked:
            problems.append("the materializer never reached the locked step")
        if not seen.reads:
            problems.append("no authority read inside the locked unit of work")
        for read in seen.reads:
            if read != seen.lock:
                problems.append(
                    f"authority read by backend/xid {read}, the lock is held by {seen.lock}"
                )
        occurrence = result.occurrence
        revoked_version = authority_version(
            WHO.tenant_id, WHO.principal_id, True, REVOKED, {"roles": ["member"]}
        )
        outcome = (
            None
            if occurrence is None
            else (occurrence.disposition.value, occurrence.reason_code, occurrence.run_id)
        )
        if outcome != ("AUTHORIZATION_FAILED", SCOPE_REVOKED, None):
            problems.append(f"a revocation committed under the lock was not seen: {outcome}")
        elif occurrence is not None and occurrence.authority_version != revoked_version:
            problems.append(f"stamped authority {occurrence.authority_version}, not the revoked")
        evidence = {
            "lock_backend_xid": seen.lock,
            "authority_reads_backend_xid": seen.reads,
            "decision": outcome,
            "revoked_after_lock_before_read": probe.revoked,
        }
        return problems, evidence
    finally:
        await h.close()


@pytest.mark.gate("gate.schedule.authority_fresh")
async def test_authority_is_read_in_the_locked_unit_of_work(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    problems, evidence = await locked_read_problems(pg_url)
    gate_evidence.record("locked_unit_of_work", evidence)
    assert problems == [], problems
