"""``Transaction.fetch`` (ADR 1740) fails exactly like ``Transaction.execute``.

The hot path sends prepared statements through asyncpg directly; a driver error must
still become the same stable domain error, and a connection the server killed must be
invalidated so the pool never hands it out again.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError, UnavailableError
from scheduling.ports.repositories import DUPLICATE

pytestmark = pytest.mark.postgres

CREATE = text("CREATE TEMP TABLE pairs (k int PRIMARY KEY, v jsonb)")
PUT_SQL = text("INSERT INTO pairs (k, v) VALUES (:k, CAST(:v AS jsonb)) RETURNING k, v")
PUT = Prepared(PUT_SQL)
PID = Prepared(text("SELECT pg_backend_pid() AS pid"))


async def test_fetch_translates_like_execute(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        for run in ("fetch", "execute"):
            async with factory.begin() as uow:
                assert isinstance(uow, PostgresUnitOfWork)
                await uow.tx.execute(CREATE)
                rows = await uow.tx.fetch(PUT, {"k": 1, "v": '{"a": 1}'})
                assert [(r["k"], r["v"]) for r in rows] == [(1, {"a": 1})]
                again = {"k": 1, "v": "{}"}
                send = (
                    uow.tx.fetch(PUT, again) if run == "fetch" else uow.tx.execute(PUT_SQL, again)
                )
                with pytest.raises(ConflictError) as caught:
                    await send
                assert caught.value.code == DUPLICATE
                assert caught.value.details["sqlstate"] == "23505"
    finally:
        await factory.dispose()


async def test_fetch_on_a_killed_backend_is_unavailable_and_discarded(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            (row,) = await uow.tx.fetch(PID)
            async with admin_connection(pg_url) as admin:
                await admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": row["pid"]})
                await admin.commit()
            with pytest.raises(UnavailableError):
                await uow.tx.fetch(PID)
        async with factory.begin() as uow:  # the pool opened a fresh connection
            assert isinstance(uow, PostgresUnitOfWork)
            (fresh,) = await uow.tx.fetch(PID)
            assert fresh["pid"] != row["pid"]
    finally:
        await factory.dispose()


SLEEP = Prepared(text("SELECT pg_sleep(30)"))


async def test_fetch_cancelled_mid_statement_discards_the_connection(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            (row,) = await uow.tx.fetch(PID)
            sleeping = asyncio.ensure_future(uow.tx.fetch(SLEEP))
            await asyncio.sleep(0.3)
            sleeping.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sleeping
        async with factory.begin() as uow:  # not the connection left mid-statement
            assert isinstance(uow, PostgresUnitOfWork)
            (fresh,) = await uow.tx.fetch(PID)
            assert fresh["pid"] != row["pid"]
    finally:
        await factory.dispose()
