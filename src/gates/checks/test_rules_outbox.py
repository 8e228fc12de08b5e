"""``rule.outbox.finished`` on PostgreSQL: when, and in which transaction,
``schedule_run_finished`` is written.

* Terminal outcomes: a MATERIALIZED occurrence has no outcome row while its run is
  queued, and none once the run is terminal but not yet accounted; accounting writes
  exactly one (COMPLETED, FAILED and CANCELLED alike), naming the pinned revision's
  title and the nominal instant; accounting again writes none.
* Skipped outcomes (MISSED past grace, SKIPPED_OVERLAP): the row commits with the
  materializer's decision, exactly one.
* After an update: a run fired under revision 1 and accounted after the schedule was
  renamed (revision 2) names revision 1's title.
* Same transaction: a crash after every write of one accounting (each repository
  write and the COMMIT, found by a discovery run) leaves either no accounting and no
  row, or both; the scheduler's retry then leaves exactly one of each. The skip
  decision is crashed at each of its probe steps the same way.

Tests of the test: ``scheduling-gates mutate`` (``outbox.emitted_at_materialization``,
``outbox.accounted_in_a_later_transaction``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.checks.crash_support import Crash, CrashingFactory
from scheduling.domain.cadence import format_instant
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.runtime import QueueCapacity
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.accounting import RunAccountant
from scheduling.service.materializer import MaterializeResult
from scheduling.testing import RoleOverride
from simulation.worlds.materialize import WHO as OWNER
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_worker
from simulation.worlds.service import definition

pytestmark = pytest.mark.postgres


async def rows(h: MaterializeWorld, occurrence_id: UUID) -> list[dict[str, Any]]:
    return await h.sql(
        "SELECT kind, payload FROM schedule_outbox WHERE occurrence_id = :o", o=occurrence_id
    )


async def accounted(h: MaterializeWorld, occurrence_id: UUID) -> int:
    found = await h.sql(
        "SELECT count(*) AS n FROM process_events WHERE event_type = :t"
        " AND payload->>'occurrence_id' = :o",
        t=RUN_ACCOUNTED,
        o=str(occurrence_id),
    )
    return int(found[0]["n"])


async def fire(h: MaterializeWorld, sid: UUID, *, late: float = 1.0) -> MaterializeResult:
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=late))
    result = await h.materializer().materialize(sid)
    assert result.occurrence is not None, result
    return result


async def finish(h: MaterializeWorld, run_id: UUID, status: str) -> None:
    failure = {"reason": "schedule.runtime.agent_failed"} if status == "FAILED" else None
    await h.sql(
        "UPDATE runs SET status = :s, finished_at = :t, failure = CAST(:f AS jsonb) WHERE id = :i",
        s=status,
        t=h.clock.now(),
        f=None if failure is None else json.dumps(failure),
        i=run_id,
    )


def accountant(
    h: MaterializeWorld, name: str, uow: UnitOfWorkFactory | None = None
) -> RunAccountant:
    """The scheduler role's accountant (``bootstrap.build_scheduler``), over ``uow`` in
    place of the scheduler's factory when given (the crashing one of a test)."""
    storage = h.storage if uow is None else RoleOverride(h.storage, "scheduler", uow)
    return h.scheduler_role(storage=storage, ids=h.world.ids.fork(name)).accountant


def expected_payload(title: str, result: MaterializeResult) -> dict[str, Any]:
    assert result.occurrence is not None
    return {"title": title, "nominal_fire_at": format_instant(result.occurrence.nominal_fire_at)}


@pytest.mark.rule("rule.outbox.finished")
async def test_one_row_per_accounted_terminal_run_none_before(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Pinned title", max_consecutive_failures=10)
        plain = accountant(h, "acct")
        for status in ("COMPLETED", "FAILED", "CANCELLED"):
            result = await fire(h, sid)
            occurrence, run_id = result.occurrence, result.run_id
            assert occurrence is not None
            assert run_id is not None, result
            assert await rows(h, occurrence.id) == [], "a row at materialization"
            await h.sql("UPDATE runs SET status = 'RUNNING' WHERE id = :i", i=run_id)
            assert await plain.account_run(run_id) is None  # not terminal: nothing
            assert await rows(h, occurrence.id) == [], "a row for a running run"
            await finish(h, run_id, status)
            assert await rows(h, occurrence.id) == [], "a row before accounting"
            first = await plain.account_run(run_id)
            assert first is not None
            assert not first.already_accounted
            again = await plain.account_run(run_id)
            assert again is not None
            assert again.already_accounted
            found = await rows(h, occurrence.id)
            assert [r["kind"] for r in found] == ["schedule_run_finished"], (status, found)
            assert found[0]["payload"] == expected_payload("Pinned title", result), status
    finally:
        await h.close()


@pytest.mark.rule("rule.outbox.finished")
async def test_the_run_worker_accounts_the_run_it_ends(pg_url: str) -> None:
    """The run worker production builds accounts each run it ends, completed or failed,
    as it ends it: the outcome row is there when ``run_once`` returns, with no scheduler
    sweep in between (a worker that accounted only completed runs would leave a failed
    one's notification to a later sweep)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        for script, status in (("succeed", "COMPLETED"), ("fail", "FAILED")):
            sid = await h.create(
                title=f"Worked {script}",
                key=f"worked-{script}",
                instruction=f"Do it. [script:{script}]",
                max_consecutive_failures=10,
            )
            result = await fire(h, sid)
            assert result.occurrence is not None
            worker = run_worker(h.storage, h.clock, f"w-{script}", capacity=QueueCapacity(4, 1, 1))
            outcome = await worker.run_once()
            assert outcome is not None
            assert (outcome.run_id, outcome.status) == (str(result.run_id), status), outcome
            found = await rows(h, result.occurrence.id)
            assert [r["kind"] for r in found] == ["schedule_run_finished"], (status, found)
            assert await accounted(h, result.occurrence.id) == 1, status
    finally:
        await h.close()


@pytest.mark.rule("rule.outbox.finished")
async def test_a_crash_after_every_accounting_write_keeps_decision_and_row_together(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Swept", max_consecutive_failures=50)
        role = h.scheduler_role(ids=h.world.ids.fork("sweep"), materializer=h.materializer())

        async def terminal() -> tuple[UUID, UUID]:
            result = await fire(h, sid)
            assert result.occurrence is not None
            assert result.run_id is not None
            await finish(h, result.run_id, "COMPLETED")
            return result.occurrence.id, result.run_id

        # Discovery: the writes of one accounting, COMMIT included.
        occurrence_id, run_id = await terminal()
        counting = CrashingFactory(h.scheduler, None)
        assert await accountant(h, "discover", counting).account_run(run_id) is not None
        writes = list(counting.counter.writes)
        assert "commit" in writes, writes
        assert await accounted(h, occurrence_id) == 1
        assert len(await rows(h, occurrence_id)) == 1
        swept: list[str] = []
        for after in range(1, len(writes) + 1):
            occurrence_id, run_id = await terminal()
            crashing = CrashingFactory(h.scheduler, after)
            with pytest.raises(Crash):
                await accountant(h, f"crash-{after}", crashing).account_run(run_id)
            decisions, outcome = (
                await accounted(h, occurrence_id),
                len(await rows(h, occurrence_id)),
            )
            assert (decisions, outcome) in ((0, 0), (1, 1)), (
                f"after {crashing.counter.writes[-1]} (#{after}): {decisions} accounting"
                f" event(s) but {outcome} outcome row(s)"
            )
            # The scheduler's post-run sweep retries; the outcome ends up whole, once.
            await role.worker.account()
            await accountant(h, f"retry-{after}").account_run(run_id)
            assert await accounted(h, occurrence_id) == 1, after
            assert len(await rows(h, occurrence_id)) == 1, after
            swept.append(crashing.counter.writes[-1])
        assert swept == writes
    finally:
        await h.close()


class CrashAtStep:
    """A materializer probe raising at its ``nth`` step (``None``: only records)."""

    def __init__(self, nth: int | None) -> None:
        self.nth = nth
        self.steps: list[str] = []

    async def step(self, name: str) -> None:
        self.steps.append(name)
        if self.nth is not None and len(self.steps) == self.nth:
            raise Crash(f"crash at {name}")


async def counts(h: MaterializeWorld, sid: UUID) -> tuple[int, int]:
    found = await h.sql(
        "SELECT (SELECT count(*) FROM schedule_occurrences WHERE schedule_id = :s) AS o,"
        " (SELECT count(*) FROM schedule_outbox WHERE schedule_id = :s) AS r",
        s=sid,
    )
    return int(found[0]["o"]), int(found[0]["r"])


async def skipped_sweep(
    h: MaterializeWorld, sid: UUID, arrange: Callable[[], Awaitable[None]], disposition: str
) -> list[str]:
    """Crash the skip decision of ``sid`` at each of its steps: the occurrence and its
    outcome row commit together or not at all; a retry decides it, with its one row."""
    discovery = CrashAtStep(None)
    await arrange()
    found = await h.materializer(probe=discovery).materialize(sid)
    assert found.occurrence is not None
    assert found.occurrence.disposition.value == disposition, found
    assert found.run_id is None
    assert len(await rows(h, found.occurrence.id)) == 1, "no row with the decision"
    for nth in range(1, len(discovery.steps) + 1):
        await arrange()
        occurrences, outcomes = await counts(h, sid)
        crash = CrashAtStep(nth)
        with pytest.raises(Crash):
            await h.materializer(probe=crash).materialize(sid)
        now_occurrences, now_outcomes = await counts(h, sid)
        delta = (now_occurrences - occurrences, now_outcomes - outcomes)
        assert delta in ((0, 0), (1, 1)), (crash.steps, delta)
        if delta == (0, 0):
            retry = await h.materializer().materialize(sid)
            assert retry.occurrence is not None
            assert retry.occurrence.disposition.value == disposition, retry
            assert len(await rows(h, retry.occurrence.id)) == 1, crash.steps
    return discovery.steps


@pytest.mark.rule("rule.outbox.finished")
async def test_skipped_outcomes_commit_their_row_with_the_decision(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        missed = await h.create(
            title="Late", key="late", misfire_grace_seconds=60, max_consecutive_failures=50
        )

        async def past_grace() -> None:
            h.clock.advance_to(await h.next_fire(missed) + timedelta(minutes=5))

        steps = await skipped_sweep(h, missed, past_grace, "MISSED")
        assert len(steps) >= 2, steps

        busy = await h.create(title="Busy", key="busy", max_consecutive_failures=50)
        first = await fire(h, busy)
        assert first.run_id is not None  # stays queued: the next instant overlaps it
        assert first.occurrence is not None
        assert await rows(h, first.occurrence.id) == []

        async def while_active() -> None:
            h.clock.advance_to(await h.next_fire(busy) + timedelta(seconds=1))

        await skipped_sweep(h, busy, while_active, "SKIPPED_OVERLAP")
        assert await rows(h, first.occurrence.id) == [], "a row for the still-active run"
    finally:
        await h.close()


@pytest.mark.rule("rule.outbox.finished")
async def test_a_run_accounted_after_an_update_names_the_revision_it_fired_under(
    pg_url: str,
) -> None:
    """The schedule is renamed (revision 2) while revision 1's run is in flight: the
    outcome row still carries the title the occurrence fired under."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Title at firing", max_consecutive_failures=10)
        result = await fire(h, sid)
        assert result.occurrence is not None
        assert result.run_id is not None, result
        row = await h.schedule(sid)
        await h.world.service.update(
            OWNER,
            sid,
            row["current_revision"],
            definition(title="Renamed since", max_consecutive_failures=10),
            idempotency_key="rename",
        )
        assert (await h.schedule(sid))["current_revision"] == 2
        await finish(h, result.run_id, "COMPLETED")
        accounted_now = await accountant(h, "acct").account_run(result.run_id)
        assert accounted_now is not None
        found = await rows(h, result.occurrence.id)
        assert [r["payload"] for r in found] == [expected_payload("Title at firing", result)]
    finally:
        await h.close()
