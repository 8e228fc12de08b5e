"""Post-run accounting races leave no ERROR line in the server log (issue 13 item 4).

The check runs on a private cluster, so the log it reads is its own: concurrent
accountants of one occurrence, each in its own transaction, must produce exactly one
``schedule.run_accounted`` event, one failure count, and no ERROR-level line (the
idempotent append is ``INSERT ... ON CONFLICT DO NOTHING`` under the schedule lock,
not a caught unique violation). The test of the test runs the plausible wrong
implementation - append and let the primary key refuse the second one - and finds
the ERROR lines."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.adapters.postgres.migrations import upgrade_to_head
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.records import ProcessEvent
from scheduling.service.accounting import RUN_ACCOUNTED, RunAccountant
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

ACCOUNTANTS = 8
ERROR_LINE = re.compile(r"^\S+ \S+ \S+ \[\d+\] (ERROR|FATAL|PANIC):", re.MULTILINE)


@pytest.fixture(scope="module")
def private() -> Iterator[PrivateCluster]:
    with private_cluster() as cluster:
        yield cluster


class _CaughtViolationEvents:
    """The wrong implementation: a plain append, the primary key refusing the second."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def append_once(self, event: ProcessEvent) -> bool:
        await self._inner.append(event)
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CaughtViolationFactory(PostgresUnitOfWorkFactory):
    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        uow = super().begin(principal, tenant_id=tenant_id)
        uow.events = _CaughtViolationEvents(uow.events)  # type: ignore[assignment]
        return uow


async def _finished_run(h: MaterializeWorld) -> tuple[UUID, UUID]:
    sid = await h.create(max_consecutive_failures=5)
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    result = await h.materializer().materialize(sid)
    assert result.run_id is not None
    await h.sql(
        "UPDATE runs SET status = 'FAILED', finished_at = :t, failure = CAST(:f AS jsonb)"
        " WHERE id = :i",
        t=h.clock.now(),
        f=json.dumps({"reason": "schedule.runtime.agent_failed", "error_class": "X"}),
        i=result.run_id,
    )
    return sid, result.run_id


async def _race(private: PrivateCluster, *, wrong: bool) -> tuple[str, int, int, int]:
    """Race the accountants; return (new log text, accounted events, failure count,
    accountants that raised)."""
    url = private.server.create_database()
    await upgrade_to_head(url)
    h = await MaterializeWorld.open(url)
    try:
        sid, run_id = await _finished_run(h)
        factory = (
            CaughtViolationFactory(h.admin.engine, assume_role=h.scheduler.assume_role)
            if wrong
            else h.scheduler
        )
        accountants = [
            RunAccountant(uow=factory, clock=h.clock, ids=h.world.ids.fork(f"acct-{n}"))
            for n in range(ACCOUNTANTS)
        ]
        start = private.log_path.stat().st_size
        results = await asyncio.gather(
            *(a.account_run(run_id) for a in accountants), return_exceptions=True
        )
        with private.log_path.open("rb") as log:
            log.seek(start)
            new_log = log.read().decode("utf-8", "replace")
        raised = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(r, ConflictError) for r in raised), raised
        events = [e for e in (await h.ledger()).of(sid).events if e["event_type"] == RUN_ACCOUNTED]
        failures = int((await h.schedule(sid))["consecutive_failures"])
        return new_log, len(events), failures, len(raised)
    finally:
        await h.close()
        private.server.drop_database(url)


async def test_concurrent_accountants_leave_no_error_in_the_server_log(
    private: PrivateCluster,
) -> None:
    log, events, failures, raised = await _race(private, wrong=False)
    assert (events, failures, raised) == (1, 1, 0)
    assert ERROR_LINE.findall(log) == [], log


async def test_of_the_test_a_caught_unique_violation_is_logged_as_error(
    private: PrivateCluster,
) -> None:
    log, events, failures, raised = await _race(private, wrong=True)
    assert (events, failures) == (1, 1)  # the outcome is right ...
    assert raised == ACCOUNTANTS - 1
    assert ERROR_LINE.findall(log), (
        "the wrong implementation left no ERROR line"
    )  # ... the log is not
    assert "duplicate key value violates unique constraint" in log
