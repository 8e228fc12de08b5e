"""A committed unit of work takes two greenlet hops, not five (ADR 2341): the pool
checkout and the check-in. SQLAlchemy's logical begin and commit run without one (in
DBAPI autocommit they send nothing), and the driver connection of a valid checked-out
connection is read without one; the ``begin`` and ``commit`` events still fire once each
(the bench counts transactions with ``begin``), a rollback still reaches the server, and
an invalidated connection still takes the hop that may reconnect. A rolled-back unit of
work (a read request's) takes the same two (ADR 2540), and without begin, commit or
rollback listeners no logical transaction is begun at all.

The counter is shown able to fail: one ``get_raw_connection`` inside the unit of work
(what ``Transaction`` did before) adds a hop it sees.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import engine as async_engine

from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory

pytestmark = pytest.mark.postgres


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every greenlet hop SQLAlchemy's asyncio connection takes, by function name."""
    seen: list[str] = []
    real = getattr(async_engine, "greenlet_spawn")  # noqa: B009 - not re-exported

    async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(async_engine, "greenlet_spawn", counting)
    return seen


async def test_a_committed_unit_of_work_takes_two_hops_and_fires_its_events(
    pg_url: str, hops: list[str]
) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    events: list[str] = []
    sync = factory.engine.sync_engine
    event.listen(sync, "begin", lambda *_: events.append("begin"))
    event.listen(sync, "commit", lambda *_: events.append("commit"))
    try:
        async with factory.begin(tenant_id="t") as uow:  # warm the pool
            await uow.commit()
        hops.clear()
        events.clear()
        async with factory.begin(tenant_id="t") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.commit()
        assert events == ["begin", "commit"]
        assert hops == ["connect", "close"]  # was connect, begin, getattr, commit, close
    finally:
        await factory.dispose()


async def test_a_rolled_back_unit_of_work_takes_two_hops_and_fires_its_events(
    pg_url: str, hops: list[str]
) -> None:
    # A read request's unit of work ends rolled back (ADR 2380): its logical rollback
    # takes no hop either (ADR 2540; it was connect, rollback, close).
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    events: list[str] = []
    sync = factory.engine.sync_engine
    event.listen(sync, "rollback", lambda *_: events.append("rollback"))
    try:
        async with factory.begin(tenant_id="t"):  # warm the pool
            pass
        hops.clear()
        events.clear()
        async with factory.begin(tenant_id="t") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert uow.tx.is_open
        assert hops == ["connect", "close"]
        assert events == ["rollback"]  # a rollback listener alone still sees it, once
    finally:
        await factory.dispose()


async def test_without_listeners_no_logical_transaction_is_begun(pg_url: str) -> None:
    # Production has no begin/commit/rollback listener: SQLAlchemy's logical
    # transaction is not begun (ADR 2540), a SQLAlchemy statement autobegins one and
    # the unit of work's commit or rollback ends it.
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin(tenant_id="t") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert uow.tx._conn is not None
            assert not uow.tx._conn.in_transaction()
            assert (await uow.tx.execute(text("SELECT 1"))).scalar() == 1
            assert uow.tx._conn.in_transaction()
            conn = uow.tx._conn
            await uow.commit()
            assert not conn.in_transaction()
        async with factory.begin(tenant_id="t") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert uow.tx._conn is not None
            assert (await uow.tx.execute(text("SELECT 1"))).scalar() == 1
            conn = uow.tx._conn
            await uow.rollback()
            assert not conn.in_transaction()
    finally:
        await factory.dispose()


async def test_the_hop_counter_sees_a_driver_fetch(pg_url: str, hops: list[str]) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            before = len(hops)
            assert uow.tx._conn is not None
            await uow.tx._conn.get_raw_connection()
            assert len(hops) == before + 1
    finally:
        await factory.dispose()


async def test_writes_commit_and_roll_back_on_the_server(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    table = text("CREATE TABLE IF NOT EXISTS hop_probe (v int)")
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(table)
            await uow.tx.execute(text("INSERT INTO hop_probe VALUES (1)"))
            await uow.commit()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(text("INSERT INTO hop_probe VALUES (2)"))
            await uow.rollback()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            rows = (await uow.tx.execute(text("SELECT v FROM hop_probe ORDER BY v"))).all()
            assert [r.v for r in rows] == [1]
    finally:
        await factory.dispose()


async def test_an_invalidated_connection_is_not_reused(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert uow.tx._conn is not None
            await uow.tx._conn.invalidate()
            uow.tx.forget_driver()
        async with factory.begin() as uow:  # a fresh connection, driver read again
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await uow.tx.execute(text("SELECT 1"))).scalar() == 1
            await uow.commit()
    finally:
        await factory.dispose()


async def test_units_of_work_in_a_lane_take_two_hops_in_all(pg_url: str, hops: list[str]) -> None:
    # A lane (ADR 2640) checks out once and checks in once: the units of work inside
    # take no hop of their own, and each still fires its begin and commit events.
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    events: list[str] = []
    sync = factory.engine.sync_engine
    event.listen(sync, "begin", lambda *_: events.append("begin"))
    event.listen(sync, "commit", lambda *_: events.append("commit"))
    try:
        async with factory.begin(tenant_id="t") as uow:  # warm the pool
            await uow.commit()
        hops.clear()
        events.clear()
        async with factory.lane():
            for _ in range(3):
                async with factory.begin(tenant_id="t") as uow:
                    await uow.commit()
        assert hops == ["connect", "close"]  # without the lane: 3 x connect, close
        assert events == ["begin", "commit"] * 3
    finally:
        await factory.dispose()
