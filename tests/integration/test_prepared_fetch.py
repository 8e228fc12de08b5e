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
from scheduling.domain.errors import ConflictError, UnavailableError, ValidationError
from scheduling.http.errors import status_of
from scheduling.ports.repositories import DUPLICATE, INVALID_VALUE
from scheduling.ports.retry import is_transient

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


@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [
        # Each value reaches the server as text and fails there, not in the driver.
        ("SELECT CAST(CAST(:v AS text) AS smallint) AS v", "22003"),  # out of range
        ("SELECT CAST(CAST(:v AS text) AS numeric) AS v", "22P02"),  # malformed
        ("SELECT CAST(CAST(:v AS text) AS timestamptz) - interval '1 day' AS v", "22008"),
    ],
)
async def test_a_value_the_database_cannot_hold_is_invalid_not_unavailable(
    pg_url: str, sql: str, sqlstate: str
) -> None:
    """SQLSTATE class 22 fails the same way every time: a 422 ``invalid_value``, never
    the 503 with ``Retry-After`` of a database that cannot serve now."""
    values = {"22003": "70000", "22P02": "12x", "22008": "4714-11-24 00:00:00+00 BC"}
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        for run in ("fetch", "execute"):
            async with factory.begin() as uow:
                assert isinstance(uow, PostgresUnitOfWork)
                params = {"v": values[sqlstate]}
                send = (
                    uow.tx.fetch(Prepared(text(sql)), params)
                    if run == "fetch"
                    else uow.tx.execute(text(sql), params)
                )
                with pytest.raises(ValidationError) as caught:
                    await send
                assert caught.value.code == INVALID_VALUE, (run, caught.value)
                assert caught.value.details["sqlstate"] == sqlstate
                assert not is_transient(caught.value)
                assert status_of(caught.value) == 422
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
