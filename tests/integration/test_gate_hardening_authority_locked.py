"""Tests of the test for the locked-unit-of-work check of gate.schedule.authority_fresh
(``gates.checks.test_authority_locked``): a hot-path store that reads authority in a
transaction of its own (right answer, wrong place) and one that reads it before taking
the due lock (stale answer) both turn it red; the shipped store passes."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from gates.checks.test_authority_locked import RevokeWhileLocked, locked_read_problems
from scheduling.service.materializer import ScheduleMaterializer
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


class OwnTransactionAuthority:
    """The materializer's store, except that authority comes from a transaction of its
    own (the agent and overlap reads stay in the locked one)."""

    def __init__(self, inner: Any, h: MaterializeWorld) -> None:
        self._inner = inner
        self._h = h

    async def context(self, uow: Any, schedule: Any, revision: Any) -> Any:
        # The locked transaction already holds the tenant's admission lock (the due lock
        # takes it, ADR 2250): the side read must not ask for it again, or the two
        # transactions of this one task wait on each other forever.
        side = copy.copy(self._inner)
        side.lock_admission = False
        async with self._h.scheduler.begin() as own:
            authority = (await side.context(own, schedule, revision)).authority
        return replace(await self._inner.context(uow, schedule, revision), authority=authority)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class AuthorityBeforeLock(OwnTransactionAuthority):
    """Reads authority in its own transaction *before* locking the schedule."""

    async def lock_due(self, uow: Any, schedule_id: Any, now: Any) -> Any:
        async with self._h.scheduler.begin() as own:
            schedule = await own.schedules.get(schedule_id, None)
            revision = await own.schedules.get_revision(
                schedule_id, schedule.current_revision, None
            )
            self._early = (await self._inner.context(own, schedule, revision)).authority
        return await self._inner.lock_due(uow, schedule_id, now)

    async def context(self, uow: Any, schedule: Any, revision: Any) -> Any:
        fresh = await self._inner.context(uow, schedule, revision)
        return replace(fresh, authority=self._early)


def wrapped(store: type[OwnTransactionAuthority]) -> Any:
    def build(h: MaterializeWorld, probe: RevokeWhileLocked) -> ScheduleMaterializer:
        materializer = h.materializer(probe=probe)
        materializer._store = store(materializer._store, h)
        return materializer

    return build


async def test_the_shipped_store_reads_authority_under_the_lock(pg_url: str) -> None:
    problems, evidence = await locked_read_problems(pg_url)
    assert problems == []
    lock = evidence["lock_backend_xid"]
    assert lock[1] is not None  # the lock assigned a transaction id
    assert evidence["authority_reads_backend_xid"] == [lock]


async def test_authority_read_in_its_own_transaction_is_caught(pg_url: str) -> None:
    problems, evidence = await locked_read_problems(pg_url, wrapped(OwnTransactionAuthority))
    # Same answer (read committed sees the revocation), wrong transaction.
    assert evidence["decision"][0] == "AUTHORIZATION_FAILED"
    assert any(p.startswith("authority read by backend/xid") for p in problems), problems


async def test_authority_read_before_the_lock_is_caught(pg_url: str) -> None:
    problems, _ = await locked_read_problems(pg_url, wrapped(AuthorityBeforeLock))
    assert any("was not seen" in p for p in problems), problems
