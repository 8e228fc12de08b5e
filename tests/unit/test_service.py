"""ScheduleService over the in-memory adapters: lifecycle, idempotency, reads, events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from scheduling.domain.errors import AuthorizationError, ConflictError, NotFoundError
from scheduling.domain.identity import SCOPE_REQUIRED
from scheduling.domain.lifecycle import ILLEGAL_TRANSITION, STALE_REVISION
from scheduling.domain.schedule import PauseReason, ScheduleState
from scheduling.ports.repositories import KEY_REUSED
from scheduling.service import SCHEDULE_NOT_FOUND, SchedulePatch
from scheduling.service.values import PREVIEW_CHARS
from scheduling.testing import MemoryStorage
from simulation.worlds.service import (
    ALL_SCOPES,
    START,
    ServiceWorld,
    build_world,
    definition,
    principal,
)

ALICE = principal("alice")
BOB = principal("bob")
EVE = principal("alice", tenant_id="tenant-b")  # same principal id, other tenant


@pytest.fixture
def world() -> ServiceWorld:
    return build_world(MemoryStorage(), principals=[ALICE, BOB, EVE])


def events_of(world: ServiceWorld, schedule_id: UUID) -> list[str]:
    store = world.uow.store  # type: ignore[attr-defined]
    rows = [e for e in store.tables.events.values() if e.schedule_id == schedule_id]
    return [e.event_type for e in sorted(rows, key=lambda e: (e.occurred_at, str(e.id)))]


async def test_create_sets_the_first_future_instant_and_emits_created(world: ServiceWorld) -> None:
    result = await world.service.create(ALICE, "k1", definition())
    s = result.schedule
    assert not result.replayed
    assert s.state is ScheduleState.ACTIVE
    assert s.current_revision == 1
    # 09:00 Europe/Paris on 2026-03-02 is 08:00Z, not strictly after START (08:00Z).
    assert s.next_fire_at == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert events_of(world, s.id) == ["schedule.created"]
    assert world.notified == [s.id]


async def test_create_replays_same_key_and_conflicts_on_different_content(
    world: ServiceWorld,
) -> None:
    first = await world.service.create(ALICE, "k1", definition())
    again = await world.service.create(ALICE, "k1", definition())
    assert again.replayed
    assert again.schedule.id == first.schedule.id
    with pytest.raises(ConflictError) as info:
        await world.service.create(ALICE, "k1", definition(title="Other"))
    assert info.value.code == KEY_REUSED
    # The key is per principal: Bob may use the same key for his own schedule.
    bobs = await world.service.create(BOB, "k1", definition())
    assert bobs.schedule.id != first.schedule.id
    assert not bobs.replayed
    assert events_of(world, first.schedule.id) == ["schedule.created"]


async def test_pause_resume_cancel_with_idempotence_and_conflicts(world: ServiceWorld) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    paused = await world.service.pause(ALICE, s.id, 1)
    assert paused.changed
    assert paused.schedule.state is ScheduleState.PAUSED
    assert paused.schedule.pause_reason is PauseReason.USER
    assert paused.schedule.next_fire_at is None
    assert not (await world.service.pause(ALICE, s.id, 1)).changed
    with pytest.raises(ConflictError) as stale:
        await world.service.pause(ALICE, s.id, 7)
    assert stale.value.code == STALE_REVISION
    assert stale.value.details["current_revision"] == 1
    # Paused for three days: resume fires strictly after the resume time, no backfill.
    world.clock.advance(3 * 86400 + 3600)
    resumed = await world.service.resume(ALICE, s.id, 1)
    assert resumed.schedule.next_fire_at == datetime(2026, 3, 6, 8, 0, tzinfo=UTC)
    assert not (await world.service.resume(ALICE, s.id, 1)).changed
    cancelled = await world.service.cancel(ALICE, s.id, 1)
    assert cancelled.schedule.state is ScheduleState.CANCELLED
    assert not (await world.service.cancel(ALICE, s.id, 1)).changed
    for op in (world.service.pause, world.service.resume):
        with pytest.raises(ConflictError) as illegal:
            await op(ALICE, s.id, 1)
        assert illegal.value.code == ILLEGAL_TRANSITION
    assert events_of(world, s.id) == [
        "schedule.created",
        "schedule.paused",
        "schedule.resumed",
        "schedule.cancelled",
    ]


async def test_update_writes_revision_n_plus_one_and_recomputes_next_fire(
    world: ServiceWorld,
) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    world.clock.advance(3600)
    weekly = {"kind": "WEEKLY", "local_time": "07:30", "weekdays": [5], "timezone": "UTC"}
    updated = await world.service.update(ALICE, s.id, 1, definition(cadence=weekly))
    assert updated.schedule.current_revision == 2
    assert updated.schedule.next_fire_at == datetime(2026, 3, 6, 7, 30, tzinfo=UTC)
    with pytest.raises(ConflictError):
        await world.service.update(ALICE, s.id, 1, definition())
    detail = await world.service.get(ALICE, s.id)
    assert detail.revision.revision == 2
    assert detail.revision.cadence["kind"] == "WEEKLY"


async def test_patch_preserves_hidden_fields_and_replays(world: ServiceWorld) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    await world.service.pause(ALICE, s.id, 1)
    patch = SchedulePatch(instruction="Only security news.", cadence=None, title=None)
    result = await world.service.patch(ALICE, s.id, 1, patch, "p1")
    assert result.schedule.current_revision == 2
    assert result.schedule.state is ScheduleState.PAUSED
    assert result.schedule.next_fire_at is None
    detail = await world.service.get(ALICE, s.id)
    assert detail.revision.instruction == "Only security news."
    assert detail.revision.requested_scopes == frozenset({"memory.read"})
    assert detail.revision.run_timeout_seconds == 600
    replay = await world.service.patch(ALICE, s.id, 1, patch, "p1")
    assert replay.replayed
    assert replay.schedule.current_revision == 2
    with pytest.raises(ConflictError) as info:
        await world.service.patch(ALICE, s.id, 1, SchedulePatch(title="x"), "p1")
    assert info.value.code == KEY_REUSED
    # An unchanged definition records the key and writes nothing else.
    same = await world.service.patch(ALICE, s.id, 2, SchedulePatch(title="Morning briefing"), "p2")
    assert not same.changed
    assert same.schedule.current_revision == 2
    assert events_of(world, s.id).count("schedule.updated") == 1


async def test_reads_are_scoped_and_not_found_is_uniform(world: ServiceWorld) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    errors = []
    for who, sid in ((BOB, s.id), (EVE, s.id), (ALICE, UUID(int=42))):
        with pytest.raises(NotFoundError) as info:
            await world.service.get(who, sid)
        errors.append((info.value.code, info.value.message, info.value.details))
        with pytest.raises(NotFoundError):
            await world.service.occurrences(who, sid)
        with pytest.raises(NotFoundError):
            await world.service.pause(who, sid, 1)
    assert errors == [(SCHEDULE_NOT_FOUND, "schedule not found", {})] * 3
    assert (await world.service.list(BOB)).items == []


async def test_list_filters_before_the_cursor_and_bounds_the_preview(world: ServiceWorld) -> None:
    ids = []
    for n in range(5):
        world.clock.advance(60)
        d = definition(title=f"S{n}", instruction="word " * 200)
        ids.append((await world.service.create(ALICE, f"k{n}", d)).schedule.id)
    await world.service.cancel(ALICE, ids[1], 1)
    await world.service.pause(ALICE, ids[3], 1)
    seen: list[UUID] = []
    cursor = None
    while True:
        page = await world.service.list(
            ALICE, limit=1, cursor=cursor, states=frozenset({ScheduleState.ACTIVE})
        )
        seen += [item.schedule_id for item in page.items]
        assert all(len(i.instruction_preview) <= PREVIEW_CHARS for i in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [ids[4], ids[2], ids[0]]
    everything = await world.service.list(ALICE)
    assert len(everything.items) == 5


async def test_scope_is_checked_exactly(world: ServiceWorld) -> None:
    reader = principal("alice", scopes={"schedule.read"})
    with pytest.raises(AuthorizationError) as info:
        await world.service.create(reader, "k", definition())
    assert info.value.code == SCOPE_REQUIRED
    s = (await world.service.create(ALICE, "k", definition())).schedule
    writer = principal("alice", scopes=ALL_SCOPES - {"schedule.cancel"})
    with pytest.raises(AuthorizationError):
        await world.service.cancel(writer, s.id, 1)


async def test_purge_deletes_only_old_terminal_schedules(world: ServiceWorld) -> None:
    old = (await world.service.create(ALICE, "a", definition())).schedule
    live = (await world.service.create(ALICE, "b", definition())).schedule
    await world.service.cancel(ALICE, old.id, 1)
    world.clock.advance(29 * 86400)
    recent = (await world.service.create(ALICE, "c", definition())).schedule
    await world.service.cancel(ALICE, recent.id, 1)
    assert await world.maintenance.purge_terminal("tenant-a") == 0
    world.clock.advance(2 * 86400)
    assert await world.maintenance.purge_terminal("tenant-a") == 1
    with pytest.raises(NotFoundError):
        await world.service.get(ALICE, old.id)
    assert (await world.service.get(ALICE, live.id)).schedule.state is ScheduleState.ACTIVE
    assert (await world.service.get(ALICE, recent.id)).schedule.state is ScheduleState.CANCELLED
    # Process events outlive the purged schedule.
    assert "schedule.cancelled" in events_of(world, old.id)


async def test_repair_replaces_a_wrong_cache_after_emitting_the_event(world: ServiceWorld) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    assert not (await world.maintenance.repair_next_fire(s.id)).repaired
    store = world.uow.store  # type: ignore[attr-defined]
    wrong = s.model_copy(update={"next_fire_at": START + timedelta(hours=5, minutes=7)})
    store.tables.schedules[s.id] = wrong
    repair = await world.maintenance.repair_next_fire(s.id)
    assert repair.repaired
    assert repair.current == datetime(2026, 3, 3, 8, 0, tzinfo=UTC)
    assert events_of(world, s.id)[-1] == "schedule.next_fire_repaired"
    assert (await world.service.get(ALICE, s.id)).schedule.next_fire_at == repair.current


async def test_identical_patch_committed_in_between_replays_instead_of_conflicting(
    world: ServiceWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window between the first replay look-up and the fast stale-revision check:
    an identical request that commits there must make this one a replay."""
    s = (await world.service.create(ALICE, "k", definition())).schedule
    patch = SchedulePatch(instruction="Only security news.")
    original = world.service._replay
    raced = False

    async def replay_then_race(*args: object) -> object:
        nonlocal raced
        result = await original(*args)  # type: ignore[arg-type]
        if not raced:
            raced = True
            monkeypatch.setattr(world.service, "_replay", original)
            await world.service.patch(ALICE, s.id, 1, patch, "same-key")
        return result

    monkeypatch.setattr(world.service, "_replay", replay_then_race)
    result = await world.service.patch(ALICE, s.id, 1, patch, "same-key")
    assert raced
    assert result.replayed
    assert result.schedule.current_revision == 2
    assert events_of(world, s.id).count("schedule.updated") == 1
