"""ScheduleService against real PostgreSQL through the API role (RLS on), with the
durable principal directory and agent registry reading the database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from uuid import UUID

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError, NotFoundError, SchedulingError
from scheduling.domain.lifecycle import STALE_REVISION
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.repositories import KEY_REUSED
from scheduling.service import MaintenanceService, SchedulePatch
from scheduling.testing import open_storage, storage_over
from simulation.worlds.service import ServiceWorld, build_world, definition, principal, seed_durable

pytestmark = pytest.mark.postgres

ALICE = principal("alice")
BOB = principal("bob")


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[tuple[ServiceWorld, PostgresUnitOfWorkFactory]]:
    storage = open_storage(pg_url, pool_size=5)
    admin = storage.factory("trusted")
    await seed_durable(admin, [ALICE, BOB])
    try:
        yield build_world(storage), admin
    finally:
        await storage.close()


async def count(admin: PostgresUnitOfWorkFactory, sql: str) -> int:
    async with admin.engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())


async def test_lifecycle_round_trip_on_postgres(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    world, admin = pg
    created = await world.service.create(ALICE, "k1", definition())
    s = created.schedule
    assert (await world.service.create(ALICE, "k1", definition())).replayed
    with pytest.raises(ConflictError) as reused:
        await world.service.create(ALICE, "k1", definition(title="Other"))
    assert reused.value.code == KEY_REUSED
    await world.service.pause(ALICE, s.id, 1)
    world.clock.advance(5 * 86400)
    resumed = await world.service.resume(ALICE, s.id, 1)
    assert resumed.schedule.next_fire_at == datetime(2026, 3, 8, 8, 0, tzinfo=UTC)
    patched = await world.service.patch(ALICE, s.id, 1, SchedulePatch(title="Renamed"), "p1")
    assert patched.schedule.current_revision == 2
    assert (
        await world.service.patch(ALICE, s.id, 1, SchedulePatch(title="Renamed"), "p1")
    ).replayed
    await world.service.cancel(ALICE, s.id, 2)
    with pytest.raises(ConflictError):
        await world.service.resume(ALICE, s.id, 2)
    detail = await world.service.get(ALICE, s.id)
    assert detail.revision.title == "Renamed"
    assert detail.schedule.state is ScheduleState.CANCELLED
    types = await count(admin, f"SELECT count(*) FROM process_events WHERE schedule_id = '{s.id}'")
    assert types == 5  # created, paused, resumed, updated, cancelled
    assert await count(admin, "SELECT count(*) FROM schedule_revisions") == 2
    assert await count(admin, "SELECT count(*) FROM schedule_idempotency_keys") == 2


async def test_cross_principal_reads_are_not_found(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    world, _ = pg
    s = (await world.service.create(ALICE, "k", definition())).schedule
    for sid in (s.id, UUID(int=5)):
        with pytest.raises(NotFoundError):
            await world.service.get(BOB, sid)
    assert (await world.service.list(BOB)).items == []


async def test_a_list_page_builds_no_schedule_per_row(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 2420: a page's rows are the SELECT's values; neither the validating
    constructor nor the trusted one (``model_construct``) runs while listing."""
    world, _ = pg
    made = [(await world.service.create(ALICE, f"k{i}", definition())).schedule for i in range(3)]
    world.clock.advance(60)
    await world.service.pause(ALICE, made[0].id, 1)

    def built(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Schedule was built for a list row")

    monkeypatch.setattr(Schedule, "__init__", built)
    monkeypatch.setattr(Schedule, "model_construct", built)
    for states in (None, frozenset({ScheduleState.PAUSED})):
        page = await world.service.list(ALICE, limit=2, states=states)
        rest = await world.service.list(ALICE, cursor=page.next_cursor, states=states)
        seen = page.items + rest.items if page.next_cursor else page.items
        expected = 3 if states is None else 1
        assert len({item.schedule_id for item in seen}) == expected
    paused = (await world.service.list(ALICE, states=frozenset({ScheduleState.PAUSED}))).items
    assert [(p.schedule_id, p.state, p.pause_reason) for p in paused] == [
        (made[0].id, "PAUSED", "user")
    ]


async def test_validation_failure_stores_nothing(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    world, admin = pg
    with pytest.raises(SchedulingError):
        await world.service.create(ALICE, "k", definition(agent_version="nope"))
    assert await count(admin, "SELECT count(*) FROM schedules") == 0


async def test_purge_and_repair_in_their_roles(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    world, admin = pg
    maint = MaintenanceService(
        uow=storage_over(admin).factory("maintenance"),
        clock=world.clock,
        ids=world.ids.fork("m"),
    )
    # The repair runs on the trusted path, in the scheduler role.
    sched = MaintenanceService(
        uow=storage_over(admin).factory("scheduler"),
        clock=world.clock,
        ids=world.ids.fork("s"),
    )
    old = (await world.service.create(ALICE, "a", definition())).schedule
    live = (await world.service.create(ALICE, "b", definition())).schedule
    await world.service.cancel(ALICE, old.id, 1)
    world.clock.advance(31 * 86400)
    assert await maint.purge_terminal("tenant-a") == 1
    assert await count(admin, "SELECT count(*) FROM schedules") == 1
    assert (
        await count(admin, f"SELECT count(*) FROM process_events WHERE schedule_id = '{old.id}'")
        == 2
    )
    async with admin.engine.begin() as conn:
        await conn.execute(
            text("UPDATE schedules SET next_fire_at = :t WHERE id = :id"),
            {"t": datetime(2026, 3, 2, 13, 7, tzinfo=UTC), "id": live.id},
        )
    repair = await sched.repair_next_fire(live.id)
    assert repair.repaired
    # Now is 2026-04-02 08:00Z; 09:00 Paris (CEST) is 07:00Z, so the next is tomorrow's.
    assert repair.current == datetime(2026, 4, 3, 7, 0, tzinfo=UTC)
    last = await count(
        admin,
        "SELECT count(*) FROM process_events WHERE event_type = 'schedule.next_fire_repaired'",
    )
    assert last == 1


async def test_concurrent_identical_creates_make_one_schedule(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    import asyncio

    world, admin = pg
    results = await asyncio.gather(
        *(world.service.create(ALICE, "same-key", definition()) for _ in range(4))
    )
    assert len({r.schedule.id for r in results}) == 1
    assert sum(not r.replayed for r in results) == 1
    assert await count(admin, "SELECT count(*) FROM schedules") == 1
    assert await count(admin, "SELECT count(*) FROM schedule_revisions") == 1
    assert await count(admin, "SELECT count(*) FROM process_events") == 1


async def test_concurrent_pauses_make_one_transition(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    import asyncio

    world, admin = pg
    s = (await world.service.create(ALICE, "k", definition())).schedule
    results = await asyncio.gather(*(world.service.pause(ALICE, s.id, 1) for _ in range(4)))
    assert sum(r.changed for r in results) == 1
    assert {r.schedule.state for r in results} == {ScheduleState.PAUSED}
    paused = "SELECT count(*) FROM process_events WHERE event_type = 'schedule.paused'"
    assert await count(admin, paused) == 1


async def test_occurrences_page_with_run_views(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    from datetime import timedelta

    from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
    from scheduling.ports.records import RunRecord, RunStatus, SessionRecord
    from simulation.worlds.service import AGENT_ID, AGENT_VERSION, LIMITS, POLICY

    world, admin = pg
    s = (await world.service.create(ALICE, "k", definition())).schedule
    first = s.next_fire_at
    assert first is not None
    second = first + timedelta(days=1)
    at = second + timedelta(seconds=5)
    ids = world.ids.fork("occ")
    session_id, run_id = ids.new_uuid(), ids.new_uuid()
    async with admin.begin() as uow:
        await uow.occurrences.insert(
            ScheduleOccurrence(
                id=ids.new_uuid(),
                schedule_id=s.id,
                schedule_revision=1,
                nominal_fire_at=first,
                disposition=OccurrenceDisposition.MISSED,
                session_id=None,
                run_id=None,
                reason_code="schedule.test.missed",
                authority_version="sha256:x",
                materialized_at=None,
                links_erased_at=None,
                created_at=at,
            )
        )
        await uow.occurrences.insert(
            ScheduleOccurrence(
                id=ids.new_uuid(),
                schedule_id=s.id,
                schedule_revision=1,
                nominal_fire_at=second,
                disposition=OccurrenceDisposition.MATERIALIZED,
                session_id=session_id,
                run_id=run_id,
                reason_code=None,
                authority_version="sha256:x",
                materialized_at=at,
                links_erased_at=None,
                created_at=at,
            )
        )
        await uow.sessions.create(
            SessionRecord(
                id=session_id,
                tenant_id=ALICE.tenant_id,
                principal_id=ALICE.principal_id,
                agent_id=AGENT_ID,
                agent_version=AGENT_VERSION,
                metadata={"schedule_id": str(s.id)},
                created_at=at,
                updated_at=at,
            )
        )
        await uow.runs.create(
            RunRecord(
                id=run_id,
                tenant_id=ALICE.tenant_id,
                principal_id=ALICE.principal_id,
                session_id=session_id,
                agent_id=AGENT_ID,
                agent_version=AGENT_VERSION,
                policy_profile=POLICY,
                status=RunStatus.QUEUED,
                priority=10,
                scheduled_for=at,
                requested_scopes=frozenset({"memory.read"}),
                limits=LIMITS.to_json(),
                created_at=at,
                updated_at=at,
            )
        )
        await uow.commit()
    page = await world.service.occurrences(ALICE, s.id, limit=1)
    assert [v.occurrence.nominal_fire_at for v in page.items] == [second]
    assert page.items[0].run is not None
    assert page.items[0].run.run_id == run_id
    assert page.items[0].run.status == "QUEUED"
    assert page.next_cursor is not None
    rest = await world.service.occurrences(ALICE, s.id, limit=1, cursor=page.next_cursor)
    assert [v.occurrence.disposition for v in rest.items] == [OccurrenceDisposition.MISSED]
    assert rest.items[0].run is None
    assert rest.next_cursor is None
    with pytest.raises(NotFoundError):
        await world.service.occurrences(BOB, s.id)
    # Cancelling the schedule never cancels the materialized run.
    await world.service.cancel(ALICE, s.id, 1)
    after = await world.service.occurrences(ALICE, s.id, limit=1)
    assert after.items[0].run is not None
    assert after.items[0].run.status == "QUEUED"
    assert await count(admin, "SELECT count(*) FROM runs WHERE status = 'QUEUED'") == 1


async def test_durable_directories_are_content_derived_and_pinned(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    from dataclasses import replace

    from scheduling.adapters.postgres.directories import (
        DurableAgentRegistry,
        DurablePrincipalDirectory,
    )
    from scheduling.ports.records import AgentVersionRecord
    from simulation.worlds.service import AGENT_ID, LIMITS

    _, admin = pg
    directory = DurablePrincipalDirectory(admin)
    first = await directory.current("tenant-a", "alice")
    assert first is not None
    assert first.enabled
    assert first.authority_version.startswith("sha256:")
    assert await directory.current("tenant-a", "nobody") is None
    async with admin.begin() as uow:
        record = await uow.principals.get("tenant-a", "alice")
        assert record is not None
        later = record.updated_at.replace(year=2027)
        await uow.principals.put(replace(record, updated_at=later))
        await uow.commit()
    same = await directory.current("tenant-a", "alice")
    assert same is not None
    assert same.authority_version == first.authority_version
    versions = {first.authority_version}
    for change in ({"scopes": record.scopes - {"memory.read"}}, {"enabled": False}):
        async with admin.begin() as uow:
            await uow.principals.put(replace(record, **change))
            await uow.commit()
        changed = await directory.current("tenant-a", "alice")
        assert changed is not None
        versions.add(changed.authority_version)
    assert len(versions) == 3
    # The pinned version stays; the floating pointer moves.
    agents = DurableAgentRegistry(admin)
    async with admin.begin() as uow:
        v1 = await uow.agents.get_version(AGENT_ID, "v1")
        assert v1 is not None
        await uow.agents.put_version(
            AgentVersionRecord(
                agent_id=AGENT_ID,
                version="v2",
                policy_profile="strict",
                spec={"model": "x"},
                limits=LIMITS.to_json(),
                content_hash="sha256:v2",
                created_at=v1.created_at,
            )
        )
        await uow.agents.set_active(AGENT_ID, "v2", v1.created_at)
        await uow.commit()
    active = await agents.active(AGENT_ID)
    pinned = await agents.get(AGENT_ID, "v1")
    assert active is not None
    assert pinned is not None
    assert (active.version, active.policy_profile) == ("v2", "strict")
    assert (pinned.version, pinned.policy_profile) == ("v1", "default")
    assert await agents.get(AGENT_ID, "v9") is None


async def test_concurrent_identical_patches_apply_once_and_replay(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    import asyncio

    world, admin = pg
    s = (await world.service.create(ALICE, "k", definition())).schedule
    patch = SchedulePatch(instruction="Only the security news, please.")
    results = await asyncio.gather(
        *(world.service.patch(ALICE, s.id, 1, patch, "same-patch") for _ in range(3))
    )
    assert sum(r.changed for r in results) == 1
    assert sum(r.replayed for r in results) == 2
    assert {r.schedule.current_revision for r in results} == {2}
    updated = "SELECT count(*) FROM process_events WHERE event_type = 'schedule.updated'"
    assert await count(admin, updated) == 1


async def test_purge_keeps_materialized_sessions_and_runs(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
    from scheduling.adapters.postgres.directories import (
        DurableAgentRegistry,
        DurablePrincipalDirectory,
    )
    from scheduling.domain.occurrence import OccurrenceDisposition
    from scheduling.service.admission import AllowAllAdmission
    from scheduling.service.materializer import ScheduleMaterializer
    from simulation.worlds.service import CEILINGS

    world, admin = pg
    scheduler = storage_over(admin).factory("scheduler")
    materializer = ScheduleMaterializer(
        uow=scheduler,
        clock=world.clock,
        ids=world.ids.fork("mat"),
        principals=DurablePrincipalDirectory(scheduler),
        agents=DurableAgentRegistry(scheduler),
        tenants=ConfiguredTenantConfiguration(default=CEILINGS),
        admission=AllowAllAdmission(),
    )
    s = (await world.service.create(ALICE, "k", definition())).schedule
    assert s.next_fire_at is not None
    world.clock.advance_to(s.next_fire_at)
    decided = await materializer.materialize(s.id)
    assert decided.occurrence is not None
    assert decided.occurrence.disposition is OccurrenceDisposition.MATERIALIZED
    await world.service.cancel(ALICE, s.id, 1)
    world.clock.advance(31 * 86400)
    maint = MaintenanceService(
        uow=storage_over(admin).factory("maintenance"),
        clock=world.clock,
        ids=world.ids.fork("m"),
    )
    assert await maint.purge_terminal("tenant-a") == 1
    for table, left in (
        ("schedules", 0),
        ("schedule_revisions", 0),
        ("schedule_occurrences", 0),
        ("schedule_idempotency_keys", 0),
        ("sessions", 1),
        ("runs", 1),
    ):
        assert await count(admin, f"SELECT count(*) FROM {table}") == left, table
    assert await count(admin, "SELECT count(*) FROM process_events") >= 3


async def test_a_stale_update_fails_without_waiting_on_the_row_lock(
    pg: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
) -> None:
    """The lifecycle scenarios' premise: a stale unkeyed update never queues on the row
    lock (two waiters behind an UPDATE: PostgreSQL picks the next holder, and a replay
    diverges). Checked with the row held FOR UPDATE by another session: an update that
    took the lock first would wait until the bound and fail with TimeoutError."""
    world, admin = pg
    s = (await world.service.create(ALICE, "k", definition())).schedule
    await world.service.update(ALICE, s.id, 1, definition(title="Second"))
    async with admin.engine.connect() as holder:
        await holder.begin()
        await holder.execute(text(f"SELECT 1 FROM schedules WHERE id = '{s.id}' FOR UPDATE"))
        with pytest.raises(ConflictError) as stale:
            await asyncio.wait_for(
                world.service.update(ALICE, s.id, 1, definition(title="Stale")), timeout=10
            )
        await holder.rollback()
    assert stale.value.code == STALE_REVISION
