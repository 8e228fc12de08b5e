"""Tests of the tests for gate.schedule.erasure_audited's end-to-end check
(``check_real_erasure``): erasers that do the real erasure but also break the
statement must fail it. Each is injected through the check's ``erase`` seam, as an
extra statement next to the real service call; the product is unchanged.

* ``leaking`` keeps a copy of the seed message (the instruction) in a process event:
  erased content retained;
* ``history_eating`` also deletes the schedule's process events: history not kept;
* ``unmarked`` erases a *different* way - it deletes the graph after clearing the
  links without stamping ``links_erased_at`` (the schema's CHECK refuses that, so the
  check fails at the erasure itself).
"""

from __future__ import annotations

from uuid import UUID

import pytest
from sqlalchemy.exc import DBAPIError

import gates.checks.test_persistence as persistence
from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.records import ErasureResult, ProcessEvent
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres


async def leaking(h: MaterializeWorld, session_id: UUID) -> ErasureResult:
    seed = await h.sql(
        "SELECT payload FROM session_events WHERE session_id = :s AND event_type = 'message.user'",
        s=session_id,
    )
    result = await persistence.erase_through_service(h, session_id)
    async with h.admin.begin() as uow:
        await uow.events.append(
            ProcessEvent(
                id=h.world.ids.new_uuid(),
                tenant_id=WHO.tenant_id,
                principal_id=WHO.principal_id,
                event_type="session.archived",
                actor="test",
                payload={"seed": seed[0]["payload"]},
                occurred_at=h.clock.now(),
            )
        )
        await uow.commit()
    return result


async def history_eating(h: MaterializeWorld, session_id: UUID) -> ErasureResult:
    result = await persistence.erase_through_service(h, session_id)
    await h.sql("DELETE FROM process_events WHERE event_type LIKE 'schedule.occurrence.%'")
    return result


async def unmarked(h: MaterializeWorld, session_id: UUID) -> ErasureResult:
    await h.sql(
        "UPDATE schedule_occurrences SET session_id = NULL, run_id = NULL WHERE session_id = :s",
        s=session_id,
    )
    return await persistence.erase_through_service(h, session_id)


@pytest.mark.parametrize(
    ("eraser", "failure"),
    [
        (leaking, r"instruction kept in .*process_events"),
        (history_eating, r"schedule history changed by the erasure: \['process_events'\]"),
    ],
)
async def test_a_broken_erasure_fails_the_end_to_end_check(
    pg_url: str, eraser: persistence.Eraser, failure: str
) -> None:
    with pytest.raises(AssertionError, match=failure):
        await persistence.check_real_erasure(pg_url, GateEvidence(), erase=eraser)


async def test_clearing_links_without_the_erasure_stamp_is_refused(pg_url: str) -> None:
    with pytest.raises(DBAPIError):
        await persistence.check_real_erasure(pg_url, GateEvidence(), erase=unmarked)


async def test_the_real_erasure_passes(pg_url: str) -> None:
    evidence = GateEvidence()
    await persistence.check_real_erasure(pg_url, evidence)
    assert evidence.values["materialized_executed_erased"]["instruction_tables_after"] == [
        "schedule_revisions"
    ]
