"""The PostgreSQL unit of work: one connection, one transaction, every repository joined.

The scope is written into transaction-local settings with ``set_config(..., true)``
before any repository runs, so row-level security sees the same tenant and principal
as the repository predicates. ``assume_role`` makes the transaction ``SET LOCAL ROLE``
to a group role (the login must be a member): tests use it to act as the API,
scheduler or maintenance role through one admin login.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

import asyncpg
from sqlalchemy import Executable, text
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import greenlet_spawn

from scheduling.adapters.postgres.errors import broken_connection, translate
from scheduling.adapters.postgres.migrations import to_asyncpg_url
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.repositories import bind_repositories
from scheduling.adapters.postgres.roles import PRINCIPAL_SETTING, TENANT_SETTING
from scheduling.domain.errors import UnavailableError, ValidationError
from scheduling.domain.identity import Principal
from scheduling.ports.repositories import CLOSED, COMMIT_OUTCOME_UNKNOWN, INVALID_COMMAND
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class Transaction:
    """The open transaction shared by the repositories of one unit of work."""

    def __init__(self) -> None:
        self._conn: AsyncConnection | None = None
        self._raw: tuple[Any, Any] | None = None
        self.advisory_locks: set[int] = set()
        """Transaction-scoped advisory-lock keys taken so far (held until it ends)."""

    def attach(self, conn: AsyncConnection | None) -> None:
        self._conn = conn
        self._raw = None
        self.advisory_locks = set()

    def forget_driver(self) -> None:
        self._raw = None

    async def _driver(self, conn: AsyncConnection) -> tuple[Any, Any]:
        """SQLAlchemy's adapted connection and asyncpg's, fetched once per unit of work
        (each ``get_raw_connection`` is a greenlet hop); forgotten after any error."""
        if self._raw is None:
            fairy = await conn.get_raw_connection()
            self._raw = (fairy.dbapi_connection, fairy.driver_connection)
        return self._raw

    async def execute(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> CursorResult[Any]:
        """Run ``statement``; a driver error becomes a domain error."""
        if self._conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        try:
            return await self._conn.execute(statement, dict(params) if params else None)
        except DBAPIError as exc:
            self._raw = None
            await discard_if_broken(self._conn, exc)
            raise translate(exc) from exc

    async def open(self, scope: Mapping[str, str]) -> None:
        """Begin the transaction and write its transaction-local settings in one round
        trip (ADR 1750): ``BEGIN`` and one ``SELECT set_config(...)`` sent together by
        the simple query protocol, the values quoted as escape-string literals. The
        driver-level transaction is handed to SQLAlchemy's adapter, which commits and
        rolls it back as its own. An engine with a non-default isolation level, read
        only or deferrable, begins as before: SQLAlchemy's BEGIN, then the settings
        as a prepared statement."""
        conn = self._conn
        if conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        adapted, driver = await self._driver(conn)
        if adapted.isolation_level is not None or adapted.readonly or adapted.deferrable:
            names = {f"n{i}": name for i, name in enumerate(scope)}
            values = {f"v{i}": value for i, value in enumerate(scope.values())}
            await self.fetch(_scope_statement(len(scope)), {**names, **values})
            return
        calls = ", ".join(f"set_config({literal(k)}, {literal(v)}, true)" for k, v in scope.items())
        sql = f"BEGIN; SELECT {calls}"
        async with _translated(conn, sql, (), self), adapted._execute_mutex:
            if adapted._started:
                raise UnavailableError(CLOSED, "the unit of work began twice")
            # Owned from here: if the settings fail after BEGIN, closing the
            # connection rolls the aborted transaction back through the adapter.
            adapted._transaction = DriverTransaction(driver)
            adapted._started = True
            try:
                await driver.execute(sql)
            except Exception as error:
                adapted._handle_exception(error)  # raises the dialect's DB-API error
                raise  # pragma: no cover - _handle_exception always raises

    async def fetch(
        self, prepared: Prepared, params: Mapping[str, Any] | None = None
    ) -> list[asyncpg.Record]:
        """Run a hot-path statement on the driver connection (ADR 1740); a driver error
        becomes the same domain error ``execute`` would raise."""
        conn = self._conn
        if conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        sql = prepared.compile(conn.dialect)
        args = prepared.args(params or {})
        # The engine's cursor events fire for these statements too, so every statement
        # observer (the gates' EXPLAIN and lock instruments) sees the hot path; with no
        # listener (production) this costs one truth test.
        dispatch: Any = conn.sync_connection.dispatch if conn.sync_connection else None
        observed = dispatch is not None and bool(
            dispatch.before_cursor_execute or dispatch.after_cursor_execute
        )
        if observed:
            await greenlet_spawn(
                dispatch.before_cursor_execute,
                conn.sync_connection,
                None,
                sql,
                tuple(args),
                None,
                False,
            )
        adapted, driver = await self._driver(conn)
        rows: list[asyncpg.Record] = []
        async with _translated(conn, sql, args, self), adapted._execute_mutex:
            if not adapted._started:  # SQLAlchemy begins lazily, at the first statement
                await adapted._start_transaction()
            try:
                rows = await driver.fetch(sql, *args)
            except Exception as error:
                adapted._handle_exception(error)  # raises the dialect's DB-API error
                raise  # pragma: no cover - _handle_exception always raises
        if observed:
            await greenlet_spawn(
                dispatch.after_cursor_execute,
                conn.sync_connection,
                None,
                sql,
                tuple(args),
                None,
                False,
            )
        return rows


class DriverTransaction:
    """The transaction ``Transaction.open`` began on the driver, as SQLAlchemy's asyncpg
    adapter holds it (``_transaction``): it commits and rolls back through it."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver

    async def commit(self) -> None:
        await self._driver.execute("COMMIT")

    async def rollback(self) -> None:
        await self._driver.execute("ROLLBACK")


def literal(value: str) -> str:
    """``value`` as a PostgreSQL escape-string literal (``E'...'``), whose meaning does
    not depend on ``standard_conforming_strings``; NUL cannot be stored in text."""
    if "\x00" in value:
        raise ValidationError(INVALID_COMMAND, "a setting value cannot contain NUL")
    return "E'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _scope_statement(count: int) -> Prepared:
    prepared = _SCOPE_STATEMENTS.get(count)
    if prepared is None:
        calls = ", ".join(f"set_config(:n{i}, :v{i}, true)" for i in range(count))
        prepared = _SCOPE_STATEMENTS.setdefault(count, Prepared(text(f"SELECT {calls}")))
    return prepared


_SCOPE_STATEMENTS: dict[int, Prepared] = {}


@contextlib.asynccontextmanager
async def _translated(
    conn: AsyncConnection, sql: str, args: Any, tx: Transaction
) -> AsyncIterator[None]:
    """A driver error inside becomes the domain error ``Transaction.execute`` raises; a
    broken or cancelled connection never returns to the pool (nor stays cached)."""
    try:
        yield
    except conn.dialect.loaded_dbapi.Error as error:
        tx.forget_driver()
        wrapped = DBAPIError.instance(
            sql, args, error, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
        )
        await discard_if_broken(conn, wrapped)
        raise translate(wrapped) from wrapped
    except BaseException as exit_:
        tx.forget_driver()
        # Cancelled (or exiting) mid-statement: the protocol state is unknown, so the
        # connection never returns to the pool (what SQLAlchemy does for execute).
        if not isinstance(exit_, Exception) and not conn.invalidated:
            with contextlib.suppress(Exception):
                await conn.invalidate()
        raise


async def discard_if_broken(conn: AsyncConnection, exc: BaseException) -> None:
    """Invalidate ``conn`` after a connection-level or protocol error, so the pool
    never hands it out again (asyncpg reports "another operation is in progress" on a
    connection whose backend was terminated mid-statement, without closing it)."""
    if broken_connection(exc) and not conn.invalidated:
        with contextlib.suppress(Exception):  # it is being thrown away either way
            await conn.invalidate()


class PostgresUnitOfWork:
    """See ``scheduling.ports.unit_of_work.UnitOfWork``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant_id: str | None,
        principal_id: str | None,
        assume_role: str | None,
    ) -> None:
        self._engine = engine
        self._tenant_id = tenant_id
        self._principal_id = principal_id
        self._assume_role = assume_role
        self._conn: AsyncConnection | None = None
        self._committed = False
        self._used = False
        self.tx = Transaction()
        repos = bind_repositories(self.tx)
        self.schedules = repos.schedules
        self.occurrences = repos.occurrences
        self.idempotency = repos.idempotency
        self.principals = repos.principals
        self.agents = repos.agents
        self.sessions = repos.sessions
        self.runs = repos.runs
        self.events = repos.events
        self.outbox = repos.outbox

    async def __aenter__(self) -> Self:
        if self._used:
            raise UnavailableError(CLOSED, "a unit of work is single-use")
        self._used = True
        try:
            self._conn = await self._engine.connect()
            await self._conn.begin()
        except (DBAPIError, OSError) as exc:
            await self._close()
            raise translate(exc) from exc
        self.tx.attach(self._conn)
        try:
            # ``set_config('role', r, true)`` is ``SET LOCAL ROLE r`` (membership is
            # checked the same way); then the scope settings row-level security reads.
            scope: dict[str, str] = {}
            if self._assume_role is not None:
                scope["role"] = self._assume_role
            scope[TENANT_SETTING] = self._tenant_id or ""
            scope[PRINCIPAL_SETTING] = self._principal_id or ""
            await self.tx.open(scope)
        except BaseException:
            await self._close()
            raise
        return self

    async def commit(self) -> None:
        if self._conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        try:
            await self._conn.commit()
        except DBAPIError as exc:
            await discard_if_broken(self._conn, exc)
            await self._close()
            error = translate(exc)
            if broken_connection(exc):
                # The COMMIT was sent; whether it landed is unknown to us.
                error.details[COMMIT_OUTCOME_UNKNOWN] = True
            raise error from exc
        self._committed = True
        await self._close()

    async def rollback(self) -> None:
        if self._conn is not None:
            try:
                await self._conn.rollback()
            except (DBAPIError, OSError) as exc:
                # A dead connection cannot roll back: the server already did. Discard it
                # and let the error that brought us here (if any) stand.
                await discard_if_broken(self._conn, exc)
                if not broken_connection(exc):
                    raise translate(exc) from exc
            finally:
                await self._close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._committed:
            await self.rollback()
        await self._close()

    async def _close(self) -> None:
        self.tx.attach(None)
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except (DBAPIError, OSError) as exc:
                # Returning a broken connection to the pool failed: discard it instead.
                await discard_if_broken(conn, exc)
                if not broken_connection(exc):
                    raise translate(exc) from exc


class PostgresUnitOfWorkFactory:
    """Begins PostgreSQL units of work on one engine."""

    def __init__(self, engine: AsyncEngine, *, assume_role: str | None = None) -> None:
        if assume_role is not None and not _ROLE.match(assume_role):
            raise ValidationError(INVALID_COMMAND, f"bad role name {assume_role!r}")
        self.engine = engine
        self.assume_role = assume_role

    @classmethod
    def from_url(
        cls, url: str, *, assume_role: str | None = None, pool_size: int = 5
    ) -> PostgresUnitOfWorkFactory:
        """A factory with its own engine for a libpq or SQLAlchemy URL."""
        engine = create_async_engine(to_asyncpg_url(url), pool_size=pool_size)
        return cls(engine, assume_role=assume_role)

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        if principal is not None:
            return PostgresUnitOfWork(
                self.engine,
                tenant_id=principal.tenant_id,
                principal_id=principal.principal_id,
                assume_role=self.assume_role,
            )
        return PostgresUnitOfWork(
            self.engine, tenant_id=tenant_id, principal_id=None, assume_role=self.assume_role
        )

    async def dispose(self) -> None:
        await self.engine.dispose()


def _conforms(factory: PostgresUnitOfWorkFactory, uow: PostgresUnitOfWork) -> tuple[object, object]:
    """Static proof (mypy) that the adapter implements the ports."""
    checked_factory: UnitOfWorkFactory = factory
    checked_uow: UnitOfWork = uow
    return checked_factory, checked_uow
