"""``MaterializationStore.advance``: the schedule's compare-and-swap and the decision's
audit events, in one write (ADR 1750), and the same behaviour from both stores; and
``decide`` (ADR 2330) from both: a decided instant writes nothing.

The wrong implementations these tests reject:
* events that commit although the CAS matched nothing: the store must raise, and the
  stale ``expected`` must leave no event behind;
* an advance that drops or duplicates events (exactly the given ids land);
* a PostgreSQL store that disagrees with the port store (both run the same cases on
  the same database).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.adapters.memory.directories import StaticAgentRegistry, StaticPrincipalDirectory
from scheduling.adapters.postgres.materialization import PostgresMaterializationStore
from scheduling.domain.errors import ConflictError
from scheduling.domain.events import next_fire_repaired
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.schedule import Schedule
from scheduling.ports.materialization import Decision, MaterializationStore
from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage
from scheduling.ports.records import ProcessEvent
from scheduling.ports.repositories import STALE, ScheduleCommand
from scheduling.service.firing import PortMaterializationStore
from scheduling.service.outbox import run_finished_id
from scheduling.service.schedules import to_record
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


def store_of(kind: str) -> MaterializationStore:
    if kind == "postgres":
        return PostgresMaterializationStore()
    return PortMaterializationStore(StaticPrincipalDirectory(), StaticAgentRegistry())


def moved_a_day(
    h: MaterializeWorld, schedule: Schedule, events: int
) -> tuple[ScheduleCommand, list[ProcessEvent]]:
    """The CAS that moves ``next_fire_at`` a day on, and ``events`` audit records of it."""
    moved = schedule.next_fire_at + timedelta(days=1)
    updated = schedule.model_copy(update={"next_fire_at": moved})
    records = [
        to_record(
            next_fire_repaired(
                h.world.ids.new_uuid(),
                schedule,
                previous=schedule.next_fire_at,
                repaired=moved,
                actor="scheduler",
                at=h.clock.now(),
            )
        )
        for _ in range(events)
    ]
    return ScheduleCommand(expected=schedule, updated=updated), records


async def _event_ids(h: MaterializeWorld, sid: object) -> set[str]:
    rows = await h.sql("SELECT id FROM process_events WHERE schedule_id = :s", s=sid)
    return {str(r["id"]) for r in rows}


@pytest.mark.parametrize("kind", ["postgres", "port"])
async def test_advance_writes_the_schedule_and_exactly_its_events(pg_url: str, kind: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        store = store_of(kind)
        sid = await h.create()
        before = await _event_ids(h, sid)
        async with h.scheduler.begin() as uow:
            schedule = await uow.schedules.get(sid, None)
            command, events = moved_a_day(h, schedule, 3)
            await store.advance(uow, command, events)
            await uow.commit()
        moved = command.updated.next_fire_at
        assert (await h.schedule(sid))["next_fire_at"] == moved
        assert await _event_ids(h, sid) - before == {str(e.id) for e in events}
    finally:
        await h.close()


@pytest.mark.parametrize("kind", ["postgres", "port"])
async def test_a_stale_advance_raises_and_leaves_no_event(pg_url: str, kind: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        store = store_of(kind)
        sid = await h.create()
        before = await _event_ids(h, sid)
        async with h.scheduler.begin() as uow:
            schedule = await uow.schedules.get(sid, None)
        # Someone else advanced it since it was read.
        await h.sql(
            "UPDATE schedules SET consecutive_failures = consecutive_failures + 1 WHERE id = :i",
            i=sid,
        )
        command, events = moved_a_day(h, schedule, 1)
        async with h.scheduler.begin() as uow:
            with pytest.raises(ConflictError) as caught:
                await store.advance(uow, command, events)
        assert caught.value.code == STALE
        assert await _event_ids(h, sid) == before
        assert (await h.schedule(sid))["next_fire_at"] == schedule.next_fire_at
    finally:
        await h.close()


def _missed(h: MaterializeWorld, schedule: Schedule, command: ScheduleCommand) -> Decision:
    """A MISSED decision of the schedule's due instant with its event and outcome row."""
    assert schedule.next_fire_at is not None
    occurrence = ScheduleOccurrence(
        id=h.world.ids.new_uuid(),
        schedule_id=schedule.id,
        schedule_revision=schedule.current_revision,
        nominal_fire_at=schedule.next_fire_at,
        disposition=OccurrenceDisposition.MISSED,
        session_id=None,
        run_id=None,
        reason_code="schedule.materialize.grace_expired",
        authority_version=None,
        materialized_at=None,
        links_erased_at=None,
        created_at=h.clock.now(),
    )
    events = moved_a_day(h, schedule, 1)[1]
    outcome = OutboxMessage(
        run_finished_id(occurrence.id), schedule.tenant_id, schedule.principal_id,
        schedule.id, occurrence.id, RUN_FINISHED, {"title": "t"}, h.clock.now(),
    )  # fmt: skip
    return Decision(occurrence, None, command, events, outcome)


@pytest.mark.parametrize("kind", ["postgres", "port"])
async def test_decide_writes_a_new_instant_once_and_a_decided_one_not_at_all(
    pg_url: str, kind: str
) -> None:
    """``decide`` (ADR 2330) from both stores on the same database."""
    h = await MaterializeWorld.open(pg_url)
    try:
        store = store_of(kind)
        sid = await h.create()
        async with h.scheduler.begin() as uow:
            schedule = await uow.schedules.get(sid, None)
            first = _missed(h, schedule, moved_a_day(h, schedule, 0)[0])
            assert await store.decide(uow, first) == first.occurrence
            await uow.commit()
        events, outbox = await _event_ids(h, sid), await h.sql("SELECT id FROM schedule_outbox")
        advanced = await h.schedule(sid)
        assert advanced["next_fire_at"] == first.advance.updated.next_fire_at
        assert str(first.events[0].id) in events
        assert [r["id"] for r in outbox] == [first.outbox.id if first.outbox else None]
        async with h.scheduler.begin() as uow:
            now = await uow.schedules.get(sid, None)
            # The same instant again: a new occurrence id, event and outcome row.
            again = _missed(h, schedule, moved_a_day(h, now, 0)[0])
            assert await store.decide(uow, again) == first.occurrence
            await uow.commit()
        assert await _event_ids(h, sid) == events
        assert len(await h.sql("SELECT id FROM schedule_outbox")) == 1
        assert await h.schedule(sid) == advanced
    finally:
        await h.close()
