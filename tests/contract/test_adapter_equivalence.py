"""Differential property: the memory and PostgreSQL adapters answer the same queries
the same way (ordering, ties, keyset pages, state filters, due scans, purges).

Each example writes one generated set of schedules into both adapters (the PostgreSQL
database is truncated between examples) and compares every answer. Reproduce a
failure with the seed Hypothesis prints (``--hypothesis-seed=N``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from scheduling.adapters.memory import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.identity import Principal
from scheduling.domain.paging import PageRequest
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.unit_of_work import UnitOfWorkFactory

T0 = datetime(2026, 7, 1, tzinfo=UTC)
OWNERS = (Principal("t1", "a"), Principal("t1", "b"), Principal("t2", "a"))
STATES = list(ScheduleState)

row = st.tuples(
    st.sampled_from(OWNERS),
    st.sampled_from(STATES),
    st.integers(0, 3),  # updated_at in hours: few values, many ties
    st.integers(-3, 3),  # next_fire_at in minutes around T0
    st.integers(1, 2**128 - 1),  # uuid
)


def _values(spec: tuple[Principal, ScheduleState, int, int, int]) -> tuple[Schedule, Any]:
    owner, state, updated, fire, uid = spec
    sid = UUID(int=uid)
    schedule = Schedule(
        id=sid,
        tenant_id=owner.tenant_id,
        principal_id=owner.principal_id,
        state=state,
        pause_reason="user" if state is ScheduleState.PAUSED else None,
        current_revision=1,
        next_fire_at=T0 + timedelta(minutes=fire) if state is ScheduleState.ACTIVE else None,
        consecutive_failures=0,
        created_at=T0 - timedelta(days=1),
        updated_at=T0 + timedelta(hours=updated),
    )
    revision = ScheduleRevision(
        schedule_id=sid,
        revision=1,
        title="t",
        instruction="i",
        agent_id=UUID(int=9),
        agent_version="1",
        policy_profile="default",
        requested_scopes=frozenset(),
        limits=RunLimits(max_steps=1, max_model_calls=1, max_tool_calls=1, max_cost=Decimal(1)),
        run_timeout_seconds=60,
        cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"},
        misfire_grace_seconds=60,
        max_consecutive_failures=1,
        created_by_principal_id=owner.principal_id,
        created_at=T0 - timedelta(days=1),
    )
    return schedule, revision


async def _answers(
    factory: UnitOfWorkFactory,
    rows: list[tuple[Schedule, Any]],
    page_size: int,
    states: frozenset[ScheduleState] | None,
    now_minutes: int,
) -> dict[str, Any]:
    async with factory.begin() as uow:
        for schedule, revision in rows:
            await uow.schedules.create(schedule, revision)
        await uow.commit()
    answers: dict[str, Any] = {}
    async with factory.begin() as uow:
        for owner in OWNERS:
            pages, cursor = [], None
            while True:
                page = await uow.schedules.list(owner, PageRequest(page_size, cursor), states)
                pages.append([s.id for s in page.items])
                cursor = page.next_cursor
                if cursor is None:
                    break
            answers[f"list:{owner}"] = pages
        now = T0 + timedelta(minutes=now_minutes)
        answers["due"] = await uow.schedules.due(now, 3)
        answers["next"] = await uow.schedules.next_fire_at()
    async with factory.begin(tenant_id="t1") as uow:
        answers["purged"] = await uow.schedules.purge_terminal("t1", T0 + timedelta(hours=1), 2)
        await uow.commit()
    async with factory.begin() as uow:
        answers["after_purge"] = await uow.schedules.due(T0 + timedelta(days=1), 1000)
    return answers


@pytest.fixture
async def postgres(pg_url: str) -> Any:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    yield factory
    await factory.dispose()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specs=st.lists(row, max_size=12, unique_by=lambda r: r[4]),
    page_size=st.integers(1, 4),
    states=st.none() | st.frozensets(st.sampled_from(STATES), min_size=1),
    now_minutes=st.integers(-4, 4),
)
async def test_memory_and_postgres_adapters_agree(
    postgres: PostgresUnitOfWorkFactory,
    specs: list[Any],
    page_size: int,
    states: frozenset[ScheduleState] | None,
    now_minutes: int,
) -> None:
    async with postgres.engine.begin() as conn:
        await conn.execute(text("TRUNCATE schedules, schedule_revisions CASCADE"))
    rows = [_values(spec) for spec in specs]
    expected = await _answers(MemoryUnitOfWorkFactory(), rows, page_size, states, now_minutes)
    actual = await _answers(postgres, rows, page_size, states, now_minutes)
    assert actual == expected
