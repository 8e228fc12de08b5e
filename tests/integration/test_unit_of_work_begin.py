"""The unit of work begins in one round trip (ADR 1750): ``BEGIN`` and the
transaction-local settings travel together by the simple query protocol, with the
values quoted as literals; the product's ``Transaction`` commits and rolls that
transaction back on the driver, SQLAlchemy's connection in DBAPI autocommit (ADR 2160).

What would go wrong with a careless version, and which test here shows it does not:
a quoting slip lets a tenant id change the statement (the hostile values round-trip
byte for byte and nothing else runs); a settings failure after BEGIN leaves the pooled
connection inside an aborted transaction (the next unit of work on the same single
connection works); the settings leak past the transaction (they are gone after
commit); commit or rollback stop reaching the server (the rows say otherwise).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling.adapters.postgres.notify import to_libpq_url
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.roles import PRINCIPAL_SETTING, TENANT_SETTING, role_names
from scheduling.adapters.postgres.transaction import Characteristics
from scheduling.adapters.postgres.uow import (
    PostgresUnitOfWork,
    PostgresUnitOfWorkFactory,
    literal,
)
from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.domain.errors import SchedulingError, ValidationError

pytestmark = pytest.mark.postgres

HOSTILE = [
    "",
    "tenant-1",
    "o'brien",
    "''",
    "\\",
    "\\'",
    "a\\'); SELECT pg_sleep(10); --",
    "E'x'",
    "$$; DROP TABLE schedules; $$",
    "naïve ☃ 日本",
    "tab\tnew\nline",
]
READ = text(
    "SELECT current_setting(:t, true) AS tenant, current_setting(:p, true) AS principal,"
    " current_user AS who, txid_current_if_assigned() IS NULL AS fresh"
)


async def _settings(uow: PostgresUnitOfWork) -> Any:
    return (await uow.tx.execute(READ, {"t": TENANT_SETTING, "p": PRINCIPAL_SETTING})).one()


async def test_hostile_setting_values_round_trip_exactly(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        for value in HOSTILE:
            async with factory.begin(tenant_id=value) as uow:
                assert isinstance(uow, PostgresUnitOfWork)
                row = await _settings(uow)
                assert row.tenant == value
                assert row.principal == ""
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await uow.tx.execute(text("SELECT count(*) FROM schedules"))).scalar() == 0
    finally:
        await factory.dispose()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=1)))
def test_literal_reads_back_as_the_value_on_postgres(value: str, pg_url: str) -> None:
    """Any text without NUL, quoted by ``literal``, is read back unchanged by the server
    (so nothing in it ends the literal)."""

    async def check() -> None:
        conn = await asyncpg.connect(to_libpq_url(pg_url))
        try:
            # The simple protocol, as the begin sends it (no bind-parameter parsing).
            await conn.execute(f"SELECT set_config('scheduling.probe', {literal(value)}, false)")
            assert await conn.fetchval("SELECT current_setting('scheduling.probe')") == value
        finally:
            await conn.close()

    asyncio.run(check())


def test_literal_refuses_nul() -> None:
    with pytest.raises(ValidationError):
        literal("a\x00b")


async def test_settings_end_with_the_transaction_and_role_is_assumed(pg_url: str) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    role = role_names().scheduler
    scheduler = PostgresUnitOfWorkFactory(admin.engine, assume_role=role)
    try:
        async with scheduler.begin(tenant_id="t-1") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            row = await _settings(uow)
            assert (row.tenant, row.who) == ("t-1", role)
            await uow.commit()
        async with admin.engine.connect() as conn:  # the same (only) pooled connection
            row = (await conn.execute(READ, {"t": TENANT_SETTING, "p": PRINCIPAL_SETTING})).one()
            assert row.tenant in (None, "")
            assert row.who != role
    finally:
        await admin.dispose()


async def test_a_failed_begin_leaves_the_pooled_connection_usable(pg_url: str) -> None:
    """``SET LOCAL ROLE`` to a role the login is not a member of fails after BEGIN
    succeeded in the same round trip; the aborted transaction is rolled back when the
    connection returns, so the next unit of work on it begins cleanly."""
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    stranger = PostgresUnitOfWorkFactory(admin.engine, assume_role="pg_no_such_role")
    try:
        with pytest.raises(SchedulingError):
            async with stranger.begin(tenant_id="t-1"):
                pass
        async with admin.begin(tenant_id="t-2") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await _settings(uow)).tenant == "t-2"
    finally:
        await admin.dispose()


async def test_commit_and_rollback_reach_the_server(pg_url: str) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    create = text("CREATE TABLE IF NOT EXISTS begin_probe (k int PRIMARY KEY)")
    put = text("INSERT INTO begin_probe VALUES (:k)")
    try:
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(create)
            await uow.tx.execute(put, {"k": 1})
            await uow.commit()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(put, {"k": 2})
            await uow.rollback()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(put, {"k": 3})  # never committed: rolled back at exit
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            keys = (await uow.tx.execute(text("SELECT k FROM begin_probe ORDER BY k"))).all()
            assert [k for (k,) in keys] == [1]
    finally:
        await factory.dispose()


async def test_an_engine_with_its_own_isolation_level_keeps_it_and_its_settings(
    pg_url: str,
) -> None:
    """An engine's isolation-level execution option becomes part of the product's
    BEGIN (still one round trip, ADR 2160)."""
    engine = create_async_engine(to_asyncpg_url(pg_url)).execution_options(
        isolation_level="SERIALIZABLE"
    )
    factory = PostgresUnitOfWorkFactory(engine)
    try:
        async with factory.begin(tenant_id="o'brien") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await _settings(uow)).tenant == "o'brien"
            level = (await uow.tx.execute(text("SHOW transaction_isolation"))).scalar()
            assert level == "serializable"
    finally:
        await factory.dispose()


async def test_factory_characteristics_begin_the_transaction(pg_url: str) -> None:
    """Isolation level, read only and deferrable are part of the product's own BEGIN."""
    engine = create_async_engine(to_asyncpg_url(pg_url), pool_size=1)
    chosen = Characteristics(isolation="REPEATABLE READ", read_only=True, deferrable=True)
    factory = PostgresUnitOfWorkFactory(engine, characteristics=chosen)
    try:
        async with factory.begin(tenant_id="t-1") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await _settings(uow)).tenant == "t-1"
            row = (
                await uow.tx.execute(
                    text(
                        "SELECT current_setting('transaction_isolation') AS level,"
                        " current_setting('transaction_read_only') AS ro,"
                        " current_setting('transaction_deferrable') AS deferrable"
                    )
                )
            ).one()
            assert (row.level, row.ro, row.deferrable) == ("repeatable read", "on", "on")
    finally:
        await factory.dispose()
    with pytest.raises(ValidationError):
        Characteristics(isolation="SERIALIZABLE; DROP TABLE runs")


TXID = Prepared(text("SELECT txid_current() AS txid"))


async def test_one_server_transaction_and_the_round_trips_of_adr_1750(pg_url: str) -> None:
    """The begin, SQLAlchemy's statements and the prepared hot path share one server
    transaction; the driver sees exactly: one simple query holding BEGIN and the
    settings, the statements, one COMMIT - SQLAlchemy sends no BEGIN of its own."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    queries: list[str] = []
    try:
        async with factory.engine.connect() as conn:  # the only pooled connection
            driver: Any = (await conn.get_raw_connection()).driver_connection
            driver.add_query_logger(lambda record: queries.append(record.query))
        async with factory.begin(tenant_id="t-1") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            (fetched,) = await uow.tx.fetch(TXID)
            executed = (await uow.tx.execute(text("SELECT txid_current()"))).scalar()
            assert fetched["txid"] == executed
            await uow.commit()
    finally:
        await factory.dispose()
    # asyncpg logs its simple queries and ``fetch``, not SQLAlchemy's prepared statements
    # (the bench counts those with SQLAlchemy's ``before_execute``).
    assert len(queries) == 3, queries
    assert queries[0].startswith("BEGIN; SELECT set_config(E'scheduling.tenant_id', E't-1'")
    assert queries[1] == "SELECT txid_current() AS txid"
    assert queries[2] == "COMMIT"


async def test_the_pooled_connection_returns_to_sqlalchemys_own_transactions(
    pg_url: str,
) -> None:
    """The unit of work's autocommit is per connection use: a plain connection from the
    same pool afterwards begins (and rolls back) as SQLAlchemy always did, after a unit
    of work that committed, one rolled back (a read's) and one whose statement failed
    (the unit of work sets and undoes DBAPI autocommit itself, ADR 2540)."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)

    async def rolls_back_as_sqlalchemy_does() -> None:
        async with factory.engine.connect() as conn:
            await conn.execute(text("INSERT INTO pool_probe VALUES (1)"))
            await conn.rollback()
        async with factory.engine.connect() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM pool_probe"))).scalar() == 0

    try:
        async with factory.begin() as uow:
            await uow.tx.execute(text("CREATE TABLE IF NOT EXISTS pool_probe (k int)"))
            await uow.commit()
        await rolls_back_as_sqlalchemy_does()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(text("SELECT 1"))
        await rolls_back_as_sqlalchemy_does()
        async with factory.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            with pytest.raises(SchedulingError):
                await uow.tx.execute(text("SELECT 1/0"))
        await rolls_back_as_sqlalchemy_does()
    finally:
        await factory.dispose()


async def test_a_statement_error_rolls_the_owned_transaction_back(pg_url: str) -> None:
    """A failed statement aborts the server transaction; leaving the unit of work rolls
    it back on the driver, so the next one on the same connection works."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        with pytest.raises(SchedulingError):
            async with factory.begin(tenant_id="t-1") as uow:
                await uow.tx.execute(text("SELECT 1 FROM no_such_table"))
        async with factory.begin(tenant_id="t-2") as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            assert (await _settings(uow)).tenant == "t-2"
            assert uow.tx.is_open
        assert not uow.tx.is_open
    finally:
        await factory.dispose()
