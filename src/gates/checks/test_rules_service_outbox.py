"""``rule.outbox.finished`` on PostgreSQL, beyond ``test_rules_outbox``:

* A run still QUEUED has not finished: accounting it writes no outcome row and no
  accounting event (the existing check holds a RUNNING run).
* The outcome row names the schedule as it fired: its tenant, principal, schedule and
  occurrence are the schedule's and the occurrence's, its id the one derived from the
  occurrence.
* The outbox reader (``OutboxReader.drain``) emits each row at least once: a delivery
  that fails leaves its row pending (never marked delivered before it was handed
  over), the next drain delivers it, and a delivered row is not delivered again.

Tests of the test: ``scheduling-gates mutate`` (``svc.accounting_queued_run_accounted``,
``svc.outbox_principal_is_tenant``, ``svc.outbox_marked_before_delivery``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.ports.outbox import OutboxMessage
from scheduling.service.outbox import OutboxReader, run_finished_id
from simulation.worlds.materialize import WHO as OWNER
from simulation.worlds.materialize import MaterializeWorld

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.outbox.finished")]


async def outcome_rows(
    h: MaterializeWorld, occurrence_id: UUID | None = None
) -> list[dict[str, Any]]:
    where = "" if occurrence_id is None else " WHERE occurrence_id = :o"
    return await h.sql(
        "SELECT id, tenant_id, principal_id, schedule_id, occurrence_id, kind, delivered_at"
        f" FROM schedule_outbox{where} ORDER BY created_at, id",
        o=occurrence_id,
    )


async def fire(h: MaterializeWorld, sid: UUID) -> tuple[UUID, UUID]:
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    result = await h.materializer().materialize(sid)
    assert result.occurrence is not None, result
    assert result.run_id is not None, result
    return result.occurrence.id, result.run_id


async def test_a_queued_run_is_not_accounted(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Queued", max_consecutive_failures=10)
        occurrence_id, run_id = await fire(h, sid)
        (run,) = await h.sql("SELECT status FROM runs WHERE id = :i", i=run_id)
        assert run["status"] == "QUEUED", run
        accountant = h.scheduler_role(ids=h.world.ids.fork("queued")).accountant
        assert await accountant.account_run(run_id) is None, "a QUEUED run was accounted"
        assert await outcome_rows(h, occurrence_id) == [], "an outcome for a queued run"
        accounted = await h.sql(
            "SELECT id FROM process_events WHERE event_type = 'schedule.run_accounted'"
        )
        assert accounted == [], "an accounting event for a queued run"
        assert (await h.schedule(sid))["consecutive_failures"] == 0
    finally:
        await h.close()


async def test_the_outcome_row_names_the_schedule_and_is_delivered_at_least_once(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Delivered", max_consecutive_failures=10)
        accountant = h.scheduler_role(ids=h.world.ids.fork("delivered")).accountant
        fired = []
        for _ in range(2):
            occurrence_id, run_id = await fire(h, sid)
            await h.sql(
                "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :i",
                t=h.clock.now(),
                i=run_id,
            )
            assert await accountant.account_run(run_id) is not None
            fired.append(occurrence_id)
        found = await outcome_rows(h)
        assert [
            (r["id"], r["tenant_id"], r["principal_id"], r["schedule_id"], r["occurrence_id"])
            for r in found
        ] == [(run_finished_id(o), OWNER.tenant_id, OWNER.principal_id, sid, o) for o in fired], (
            found
        )

        class FlakyDelivery:
            """Fails the first hand-over of each row, then accepts it."""

            def __init__(self) -> None:
                self.failed: set[UUID] = set()
                self.delivered: list[UUID] = []

            async def deliver(self, message: OutboxMessage) -> None:
                if message.id not in self.failed:
                    self.failed.add(message.id)
                    raise ConnectionError("the channel is down")
                self.delivered.append(message.id)

        delivery = FlakyDelivery()
        reader = OutboxReader(uow=h.admin, delivery=delivery, clock=h.clock)
        wanted = [run_finished_id(o) for o in fired]
        for i, message_id in enumerate(wanted):
            with pytest.raises(ConnectionError):
                await reader.drain(limit=1)
            pending = [r["id"] for r in await outcome_rows(h) if r["delivered_at"] is None]
            assert pending == wanted[i:], "a row was marked delivered but never handed over"
            assert await reader.drain(limit=1) == 1
            assert delivery.delivered[-1] == message_id
        assert delivery.delivered == wanted
        assert all(r["delivered_at"] is not None for r in await outcome_rows(h))
        assert await reader.drain() == 0
        assert delivery.delivered == wanted, "a delivered row was delivered again"
    finally:
        await h.close()
