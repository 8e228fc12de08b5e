"""The driver transaction the product owns (ADR 2160).

A unit of work's connection comes from SQLAlchemy's pool and runs SQLAlchemy Core
statements, but SQLAlchemy does not begin, commit or roll back its transaction: the
connection is put into DBAPI autocommit (the public ``isolation_level="AUTOCOMMIT"``
execution option), so SQLAlchemy's asyncpg adapter never issues a ``BEGIN`` of its
own, and ``Transaction`` sends ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` itself on the
asyncpg connection (the public ``driver_connection``). Every statement, SQLAlchemy's
and the prepared hot path's (ADR 1740), runs inside that one server transaction.

That keeps the one-round-trip begin of ADR 1750 - ``BEGIN`` and one
``SELECT set_config(...)`` sent together by the simple query protocol - without
touching any private attribute of SQLAlchemy or asyncpg. An isolation level, read
only or deferrable is part of that ``BEGIN`` (``Characteristics``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy import Executable
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.util import greenlet_spawn

from scheduling.adapters.postgres.errors import broken_connection, translate
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.domain.admission import TenantUsage
from scheduling.domain.errors import UnavailableError, ValidationError
from scheduling.ports.repositories import CLOSED, INVALID_COMMAND

ISOLATION_LEVELS = ("READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE")

# What asyncpg raises for a statement that failed (SQLAlchemy's adapter wraps the same
# three families as its DB-API errors); a socket error is a broken connection.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
)


@dataclass(frozen=True)
class Characteristics:
    """How the transaction begins: ``None`` is the server's default isolation level."""

    isolation: str | None = None
    read_only: bool = False
    deferrable: bool = False

    def __post_init__(self) -> None:
        if self.isolation is not None and self.isolation not in ISOLATION_LEVELS:
            raise ValidationError(INVALID_COMMAND, f"bad isolation level {self.isolation!r}")

    def begin(self) -> str:
        """The ``BEGIN`` statement (only fixed words: nothing here is quoted)."""
        words = ["BEGIN"]
        if self.isolation is not None:
            words.append(f"ISOLATION LEVEL {self.isolation}")
        if self.read_only:
            words.append("READ ONLY")
        if self.deferrable:
            words.append("DEFERRABLE")
        return " ".join(words)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Characteristics:
        """From SQLAlchemy execution options (``isolation_level``,
        ``postgresql_readonly``, ``postgresql_deferrable``); ``AUTOCOMMIT`` is the
        default level, since a unit of work is one transaction whatever the engine."""
        level = options.get("isolation_level")
        return cls(
            isolation=None if level in (None, "AUTOCOMMIT") else str(level),
            read_only=bool(options.get("postgresql_readonly", False)),
            deferrable=bool(options.get("postgresql_deferrable", False)),
        )


DEFAULT = Characteristics()


class Transaction:
    """The open transaction shared by the repositories of one unit of work."""

    def __init__(self) -> None:
        self._conn: AsyncConnection | None = None
        self._driver: Any = None
        self._open = False
        self.advisory_locks: set[int] = set()
        """Transaction-scoped advisory-lock keys taken so far (held until it ends)."""
        self._usage: tuple[str, datetime, TenantUsage] | None = None
        self._at_commit: list[str] = []

    @property
    def is_open(self) -> bool:
        """True between ``open`` and the ``commit``/``rollback`` that ends it."""
        return self._open

    def attach(self, conn: AsyncConnection | None) -> None:
        self._conn = conn
        self._driver = None
        self._open = False
        self.advisory_locks = set()
        self._usage = None
        self._at_commit = []

    def at_commit(self, sql: str) -> None:
        """Send ``sql`` (fixed text, values quoted) in the ``COMMIT``'s own round trip,
        just before it: it takes effect iff the transaction commits, and a rollback never
        sends it (the in-transaction wake-up, ADR 2310)."""
        self._at_commit.append(sql)

    def carry_usage(self, tenant_id: str, now: datetime, usage: TenantUsage) -> None:
        """Keep a tenant's usage that a statement read after the tenant's admission lock
        was granted (the materialization context read, ADR 2250) for ``take_usage``."""
        self._usage = (tenant_id, now, usage)

    def take_usage(self, tenant_id: str, now: datetime) -> TenantUsage | None:
        """The carried usage of ``tenant_id`` at ``now``, once; ``None`` otherwise."""
        carried, self._usage = self._usage, None
        if carried is not None and carried[0] == tenant_id and carried[1] == now:
            return carried[2]
        return None

    def forget_driver(self) -> None:
        self._driver = None

    async def _driver_of(self, conn: AsyncConnection) -> Any:
        """asyncpg's connection, fetched once per unit of work; forgotten after any
        error. A valid checked-out connection hands its pooled connection over
        without I/O (``Connection.connection``), so only an invalidated one takes
        ``get_raw_connection``'s greenlet hop (which may reconnect or raise)."""
        if self._driver is None:
            sync = conn.sync_connection
            if sync is not None and not conn.invalidated:
                self._driver = sync.connection.driver_connection
            else:
                fairy = await conn.get_raw_connection()
                self._driver = fairy.driver_connection
        return self._driver

    def _connection(self) -> AsyncConnection:
        if self._conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        return self._conn

    async def execute(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> CursorResult[Any]:
        """Run ``statement``; a driver error becomes a domain error."""
        conn = self._connection()
        try:
            return await conn.execute(statement, dict(params) if params else None)
        except DBAPIError as exc:
            self._driver = None
            await discard_if_broken(conn, exc)
            raise translate(exc) from exc

    async def open(
        self, scope: Mapping[str, str], characteristics: Characteristics = DEFAULT
    ) -> None:
        """Begin the transaction and write its transaction-local settings in one round
        trip (ADR 1750): ``BEGIN`` and one ``SELECT set_config(...)`` sent together by
        the simple query protocol, the values quoted as escape-string literals. The
        connection must be in DBAPI autocommit (SQLAlchemy then sends no ``BEGIN``)."""
        conn = self._connection()
        if self._open:
            raise UnavailableError(CLOSED, "the unit of work began twice")
        driver = await self._driver_of(conn)
        calls = ", ".join(f"set_config({literal(k)}, {literal(v)}, true)" for k, v in scope.items())
        sql = f"{characteristics.begin()}; SELECT {calls}" if calls else characteristics.begin()
        # Open from here: if the settings fail after BEGIN, ``close`` rolls back.
        self._open = True
        # An inline try, not an async context manager: that costs a generator
        # and two awaits per statement on the hottest path (ADR 2540).
        try:
            await driver.execute(sql)
        except BaseException as exit_:
            await _driver_failed(conn, sql, (), self, exit_)
            raise

    async def commit(self) -> None:
        """``COMMIT``; a failure raises SQLAlchemy's ``DBAPIError`` (the caller decides
        whether the outcome is unknown). The transaction is over either way."""
        await self._end("COMMIT")

    async def rollback(self) -> None:
        """``ROLLBACK`` (a failure raises ``DBAPIError``, as ``commit``)."""
        await self._end("ROLLBACK")

    async def _end(self, sql: str) -> None:
        conn = self._connection()
        if not self._open:
            return
        self._open = False
        before, self._at_commit = self._at_commit, []
        if conn.invalidated:  # discarded after an error: the server ended it already
            return
        prefixed = bool(before) and sql == "COMMIT"
        if prefixed:
            sql = "; ".join([*before, sql])
        driver = await self._driver_of(conn)
        try:
            await driver.execute(sql)
        except DRIVER_ERRORS as error:
            self._driver = None
            if prefixed:
                # A statement before the COMMIT failed: the transaction is still open
                # (aborted) on the server, so the connection never returns to the pool.
                await _invalidate(conn)
            raise DBAPIError(sql, (), error) from error
        except BaseException:
            self._driver = None
            await _invalidate(conn)
            raise

    async def close(self) -> None:
        """Before the connection returns to the pool: roll back a transaction still
        open (an error left it so), or discard the connection if that fails - the pool
        rolls back only what SQLAlchemy began, and it began nothing."""
        conn = self._conn
        if conn is None or not self._open or conn.invalidated:
            return
        try:
            await self.rollback()
        except BaseException:
            await _invalidate(conn)
            raise

    async def fetch(
        self, prepared: Prepared, params: Mapping[str, Any] | None = None
    ) -> list[asyncpg.Record]:
        """Run a hot-path statement on the driver connection (ADR 1740); a driver error
        becomes the same domain error ``execute`` would raise."""
        conn = self._connection()
        sql = prepared.compile(conn.dialect)
        args = prepared.args(params or {})
        # The engine's cursor events fire for these statements too, so every statement
        # observer (the gates' EXPLAIN and lock instruments) sees the hot path; with no
        # listener (production) this costs one truth test.
        sync = conn.sync_connection
        dispatch: Any = sync.dispatch if sync is not None else None
        observed = dispatch is not None and bool(
            dispatch.before_cursor_execute or dispatch.after_cursor_execute
        )
        if observed:
            await greenlet_spawn(
                dispatch.before_cursor_execute, sync, None, sql, tuple(args), None, False
            )
        driver = await self._driver_of(conn)
        try:
            rows: list[asyncpg.Record] = await driver.fetch(sql, *args)
        except BaseException as exit_:
            await _driver_failed(conn, sql, args, self, exit_)
            raise
        if observed:
            await greenlet_spawn(
                dispatch.after_cursor_execute, sync, None, sql, tuple(args), None, False
            )
        return rows


def _sync(conn: AsyncConnection) -> Connection:
    sync = conn.sync_connection
    if sync is None:
        raise UnavailableError(CLOSED, "the unit of work is not open")
    return sync


def begin_logical(conn: AsyncConnection) -> None:
    """SQLAlchemy's logical ``begin`` on a connection in DBAPI autocommit, without the
    greenlet hop ``await conn.begin()`` takes: there it sends nothing (the dialect's
    ``do_begin`` is a no-op and the asyncpg adapter starts no transaction), so only
    its ``begin`` event runs (ADR 2341). A ``begin`` listener must not do I/O.

    With no ``begin``, ``commit`` or ``rollback`` listener (production) nothing needs
    that logical transaction, so none is begun (ADR 2540): a SQLAlchemy statement
    autobegins one, sending nothing, and ``commit_logical``/``rollback_logical`` or the
    check-in end it. With a listener (the benches' and tests' transaction counts) the
    events fire once per unit of work, as before."""
    sync = _sync(conn)
    dispatch = sync.dispatch
    if dispatch.begin or dispatch.commit or dispatch.rollback:
        sync.begin()


def commit_logical(conn: AsyncConnection) -> None:
    """SQLAlchemy's logical ``commit`` after ``Transaction.commit`` sent the server's
    COMMIT: in DBAPI autocommit the adapter has nothing to commit, so this runs the
    ``commit`` event without ``await conn.commit()``'s greenlet hop (ADR 2341); without
    a logical transaction (``begin_logical`` began none and no statement autobegan
    one) it does nothing, as SQLAlchemy documents."""
    _sync(conn).commit()


def rollback_logical(conn: AsyncConnection) -> None:
    """SQLAlchemy's logical ``rollback`` after ``Transaction.rollback`` sent the
    server's ROLLBACK, without ``await conn.rollback()``'s greenlet hop: in DBAPI
    autocommit the asyncpg adapter started no transaction, so its ``rollback`` sends
    nothing (ADR 2540; a read request ends this way, ADR 2380). Only the ``rollback``
    event runs; a ``rollback`` listener must not do I/O."""
    _sync(conn).rollback()


def literal(value: str) -> str:
    """``value`` as a PostgreSQL escape-string literal (``E'...'``), whose meaning does
    not depend on ``standard_conforming_strings``; NUL cannot be stored in text."""
    if "\x00" in value:
        raise ValidationError(INVALID_COMMAND, "a setting value cannot contain NUL")
    return "E'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


async def _invalidate(conn: AsyncConnection) -> None:
    if not conn.invalidated:
        with contextlib.suppress(Exception):  # it is being thrown away either way
            await conn.invalidate()


async def _driver_failed(
    conn: AsyncConnection, sql: str, args: Any, tx: Transaction, exit_: BaseException
) -> None:
    """After a driver call raised ``exit_``: a driver error is raised as the domain
    error ``Transaction.execute`` raises; a broken or cancelled connection never
    returns to the pool (nor stays cached). Anything else the caller re-raises."""
    tx.forget_driver()
    if isinstance(exit_, DRIVER_ERRORS):
        wrapped = DBAPIError(sql, args, exit_)
        await discard_if_broken(conn, wrapped)
        raise translate(wrapped) from wrapped
    # Cancelled (or exiting) mid-statement: the protocol state is unknown, so the
    # connection never returns to the pool (what SQLAlchemy does for execute).
    if not isinstance(exit_, Exception):
        await _invalidate(conn)


async def discard_if_broken(conn: AsyncConnection, exc: BaseException) -> None:
    """Invalidate ``conn`` after a connection-level or protocol error, so the pool
    never hands it out again (asyncpg reports "another operation is in progress" on a
    connection whose backend was terminated mid-statement, without closing it)."""
    if broken_connection(exc):
        await _invalidate(conn)
