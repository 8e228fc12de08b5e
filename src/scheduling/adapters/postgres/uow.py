"""The PostgreSQL unit of work: one connection, one transaction, every repository joined.

The scope is written into transaction-local settings with ``set_config(..., true)``
before any repository runs, so row-level security sees the same tenant and principal
as the repository predicates. ``assume_role`` makes the transaction ``SET LOCAL ROLE``
to a group role (the login must be a member): tests use it to act as the API,
scheduler or maintenance role through one admin login.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Self

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import QueuePool

from scheduling.adapters.postgres.accounting import PostgresPendingAccountsRepository
from scheduling.adapters.postgres.admission import PostgresAdmissionRepository
from scheduling.adapters.postgres.errors import CONNECT_ERRORS, broken_connection, translate
from scheduling.adapters.postgres.materialization import PostgresMaterializationRepository
from scheduling.adapters.postgres.notify import PostgresWakeups
from scheduling.adapters.postgres.repositories import bind_repositories
from scheduling.adapters.postgres.roles import PRINCIPAL_SETTING, TENANT_SETTING
from scheduling.adapters.postgres.transaction import (
    Characteristics,
    Transaction,
    begin_logical,
    commit_logical,
    discard_if_broken,
    literal,
    rollback_logical,
)
from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.domain.errors import SchedulingError, UnavailableError, ValidationError
from scheduling.domain.identity import Principal
from scheduling.ports.repositories import CLOSED, COMMIT_OUTCOME_UNKNOWN, INVALID_COMMAND
from scheduling.ports.retry import FAULT_DETAIL
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory

__all__ = [
    "PostgresUnitOfWork",
    "PostgresUnitOfWorkFactory",
    "Transaction",
    "discard_if_broken",
    "literal",
]

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
OPEN_ERRORS: tuple[type[BaseException], ...] = (*CONNECT_ERRORS, DBAPIError)
"""What a checkout (connect, pool, SQLAlchemy's begin) can raise about the server."""


class _Lane:
    """A connection a sequence of units of work passes on (``PostgresUnitOfWorkFactory
    .lane``): checked out of ``engine``'s pool once, in DBAPI autocommit while held."""

    __slots__ = ("conn", "dbapi", "engine")

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.conn: AsyncConnection | None = None
        self.dbapi: Any = None


_LANE: ContextVar[_Lane | None] = ContextVar("scheduling_uow_lane", default=None)
"""The current task's lane, if any. A context variable, not an argument, so the
service's units of work keep their port (``begin``) and a lane reaches every unit of
work its task begins on that engine, the materializer's included."""


class PostgresUnitOfWork:
    """See ``scheduling.ports.unit_of_work.UnitOfWork``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant_id: str | None,
        principal_id: str | None,
        assume_role: str | None,
        characteristics: Characteristics | None = None,
    ) -> None:
        """The checked-out connection is put in DBAPI autocommit for its time in the
        unit of work (``_connect``), whatever ``engine``'s options; ``characteristics``
        default to the engine's execution options."""
        options = engine.get_execution_options()
        self._engine = engine
        self._tenant_id = tenant_id
        self._principal_id = principal_id
        self._assume_role = assume_role
        self._characteristics = characteristics or Characteristics.of(options)
        self._conn: AsyncConnection | None = None
        self._dbapi: Any = None
        self._committed = False
        self._used = False
        self._clean = False
        """Ended without an error: only then may a lane keep the connection."""
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
        self.admission = PostgresAdmissionRepository(self.tx)
        self.pending_accounts = PostgresPendingAccountsRepository(self.tx)
        self.materialization = PostgresMaterializationRepository(self.tx, repos.schedules)
        self.wakeups = PostgresWakeups(self.tx)

    async def __aenter__(self) -> Self:
        if self._used:
            raise UnavailableError(CLOSED, "a unit of work is single-use")
        self._used = True
        # A pooled connection whose backend died since its last use (a restart, a
        # terminated backend) fails its first round trip, the BEGIN, before anything of
        # this unit of work was sent: it is discarded and the next one tried, at most
        # once per connection the pool can hold, so after a restart one request goes
        # through the dead ones instead of one 503 per dead connection (no ping per
        # checkout: the BEGIN is the ping, ADR 1750's one round trip stays; ADR 2220).
        tries = 1 + _pool_capacity(self._engine)
        for attempt in range(1, tries + 1):
            await self._connect()
            try:
                await self._open()
            except SchedulingError as exc:
                await self._close()
                if attempt < tries and exc.details.get(FAULT_DETAIL) is not None:
                    continue
                raise
            except BaseException:
                await self._close()
                raise
            break
        return self

    async def _connect(self) -> None:
        """Take the lane's connection, or check one out of the pool (or open one); a
        refused connect, raw asyncpg error or socket error alike, is translated
        (``DATABASE_UNAVAILABLE``)."""
        lane = _LANE.get()
        if lane is not None and lane.engine is self._engine and lane.conn is not None:
            # Taken, not shared: a sibling unit of work begun while this one runs
            # (another task of the same context) finds the lane empty and checks out.
            conn, self._dbapi = lane.conn, lane.dbapi
            lane.conn = lane.dbapi = None
            self._conn = conn
            try:
                begin_logical(conn)  # its ``begin`` event fires per unit of work, as before
            except OPEN_ERRORS as exc:
                await self._close()
                raise translate(exc, connecting=True) from exc
            self.tx.attach(conn)
            return
        try:
            self._conn = conn = await self._engine.connect()
            # DBAPI autocommit, so SQLAlchemy's asyncpg adapter begins nothing and the
            # unit of work's ``Transaction`` owns the server transaction (ADR 2160). Set
            # on the DBAPI connection (its public ``autocommit``) and undone before the
            # check-in (``_close``), not through the ``isolation_level="AUTOCOMMIT"``
            # execution option, whose set and reset per checkout cost about 20 us of
            # CPU (ADR 2540); the pool is shared with ``engine.begin()`` users, so the
            # connection must return to it as it came.
            self._dbapi = _dbapi_of(conn)
            self._dbapi.autocommit = True
            # SQLAlchemy's logical transaction (its ``begin`` event); the server
            # transaction is ``Transaction.open``'s.
            begin_logical(conn)
        except OPEN_ERRORS as exc:
            await self._close()
            raise translate(exc, connecting=True) from exc
        self.tx.attach(self._conn)

    async def _open(self) -> None:
        # ``set_config('role', r, true)`` is ``SET LOCAL ROLE r`` (membership is
        # checked the same way); then the scope settings row-level security reads.
        scope: dict[str, str] = {}
        if self._assume_role is not None:
            scope["role"] = self._assume_role
        scope[TENANT_SETTING] = self._tenant_id or ""
        scope[PRINCIPAL_SETTING] = self._principal_id or ""
        await self.tx.open(scope, self._characteristics)

    async def commit(self) -> None:
        conn = self._conn
        if conn is None:
            raise UnavailableError(CLOSED, "the unit of work is not open")
        try:
            await self.tx.commit()
            commit_logical(conn)
        except DBAPIError as exc:
            await discard_if_broken(conn, exc)
            await self._close()
            error = translate(exc)
            if broken_connection(exc):
                # The COMMIT was sent; whether it landed is unknown to us.
                error.details[COMMIT_OUTCOME_UNKNOWN] = True
            raise error from exc
        self._committed = self._clean = True
        await self._close()

    async def rollback(self) -> None:
        # Clean only on the way out of a block left without an error (``__aexit__``
        # says so) and if the ROLLBACK went through on a valid connection; a caller's
        # own rollback returns the connection to the pool.
        clean, self._clean = self._clean, False
        try:
            self._clean = await self._roll_back() and clean
        finally:
            await self._close()

    async def _roll_back(self) -> bool:
        """Roll back (the connection stays attached); True when the ROLLBACK went
        through on a connection still valid, the only end after which a lane keeps it."""
        conn = self._conn
        if conn is None:
            return False
        try:
            await self.tx.rollback()
            if conn.invalidated:
                await conn.rollback()  # may take the reconnecting path: keep the hop
                return False
            rollback_logical(conn)
        except (DBAPIError, OSError) as exc:
            # A dead connection cannot roll back: the server already did. Discard it
            # and let the error that brought us here (if any) stand.
            await discard_if_broken(conn, exc)
            if not broken_connection(exc):
                raise translate(exc) from exc
            return False
        return True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Left without an error (a decision that wrote nothing, a read): a lane may
        # keep the connection if the rollback goes through on it (``rollback``).
        self._clean = exc is None
        if not self._committed:
            await self.rollback()
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            dbapi, self._dbapi = self._dbapi, None
            if self._clean and _kept(self._engine, conn, dbapi, self.tx):
                self.tx.attach(None)
                return
            try:
                await _check_in(conn, dbapi, self.tx)
            finally:
                self.tx.attach(None)
        self.tx.attach(None)


def _kept(engine: AsyncEngine, conn: AsyncConnection, dbapi: Any, tx: Transaction) -> bool:
    """Leave ``conn`` to the current task's lane instead of checking it in: only after
    a clean end (the caller's ``_clean``), on a valid connection with no transaction
    open, server's or SQLAlchemy's, and if the lane is on this engine and empty.
    Anything else goes back to the pool (or is discarded) as without a lane, so a
    connection that failed is never reused (ADR 2160, 2220)."""
    lane = _LANE.get()
    if lane is None or lane.engine is not engine or lane.conn is not None:
        return False
    if conn.invalidated or tx.is_open or conn.in_transaction() or dbapi is None:
        return False
    lane.conn, lane.dbapi = conn, dbapi
    return True


async def _check_in(conn: AsyncConnection, dbapi: Any, tx: Transaction | None) -> None:
    """Return ``conn`` to its pool (``tx``: a transaction still open is rolled back
    first), or discard it if that fails."""
    try:
        try:
            if tx is not None:
                await tx.close()
        finally:
            if dbapi is not None and not conn.invalidated:
                dbapi.autocommit = False  # as it came out of the pool
            await conn.close()
    except (DBAPIError, OSError) as exc:
        # Returning a broken connection to the pool failed: discard it instead.
        await discard_if_broken(conn, exc)
        if not broken_connection(exc):
            raise translate(exc) from exc


def _dbapi_of(conn: AsyncConnection) -> Any:
    """The DBAPI connection (SQLAlchemy's asyncpg adapter) of a connection just checked
    out: no I/O (``Connection.connection`` of a valid connection)."""
    sync = conn.sync_connection
    if sync is None:
        raise UnavailableError(CLOSED, "the unit of work is not open")
    return sync.connection.dbapi_connection


def _pool_capacity(engine: AsyncEngine) -> int:
    """How many idle connections ``engine``'s pool may keep (0 without a pool): a queue
    pool keeps at most ``size()`` (``from_url``'s pools have no overflow to close)."""
    pool = engine.pool
    return max(pool.size(), 0) if isinstance(pool, QueuePool) else 0


BURST_HEADROOM = 10
"""Connections a ``from_url`` pool may open beyond its ``pool_size`` under a burst: the
capacity SQLAlchemy's default overflow gave. Unlike an overflow connection, which the
pool closes at check-in whenever ``pool_size`` are idle, one opened here is kept: a
steady load above ``pool_size`` otherwise forked a server backend (and prepared every
statement anew) about once per 27 requests at 32 concurrent reads (ADR 2720). A pool
opens connections only as units of work need them, so an idle process holds few."""


class PostgresUnitOfWorkFactory:
    """Begins PostgreSQL units of work on one engine.

    ``engine`` stays the caller's (events, ``dispose``); units of work connect through
    it and put each connection in DBAPI autocommit while they hold it. The transaction's isolation
    level, read only and deferrable are ``characteristics``, by default the engine's
    execution options (``engine.execution_options(isolation_level=...)``; a level
    given to ``create_async_engine`` itself is not visible through SQLAlchemy's public
    API and is not applied, ADR 2160)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        assume_role: str | None = None,
        characteristics: Characteristics | None = None,
    ) -> None:
        if assume_role is not None and not _ROLE.match(assume_role):
            raise ValidationError(INVALID_COMMAND, f"bad role name {assume_role!r}")
        self.engine = engine
        self.assume_role = assume_role
        self.characteristics = characteristics or Characteristics.of(engine.get_execution_options())

    @classmethod
    def from_url(
        cls, url: str, *, assume_role: str | None = None, pool_size: int = 5
    ) -> PostgresUnitOfWorkFactory:
        """A factory with its own engine for a libpq or SQLAlchemy URL: a pool that opens
        connections as the load needs them, up to ``pool_size`` plus ``BURST_HEADROOM``,
        and keeps every one it opened; a unit of work beyond that waits for one."""
        engine = create_async_engine(
            to_asyncpg_url(url), pool_size=pool_size + BURST_HEADROOM, max_overflow=0
        )
        return cls(engine, assume_role=assume_role)

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        if principal is not None:
            tenant_id = principal.tenant_id
        return PostgresUnitOfWork(
            self.engine,
            tenant_id=tenant_id,
            principal_id=principal.principal_id if principal is not None else None,
            assume_role=self.assume_role,
            characteristics=self.characteristics,
        )

    @asynccontextmanager
    async def lane(self) -> AsyncIterator[None]:
        """Units of work this task begins on this factory's engine inside the block pass
        one pooled connection on (ADR 2640): each is still its own transaction (BEGIN
        with its scope, COMMIT or ROLLBACK), but the checkout and check-in happen once
        per lane, not per unit of work. A unit of work that ends with an error, or on an
        invalidated connection, returns or discards it as without a lane, and the next
        one checks a fresh connection out. The connection goes back to the pool when the
        block ends. Lanes do not nest: an inner block would hide the outer one's
        connection until it ends."""
        lane = _Lane(self.engine)
        token = _LANE.set(lane)
        try:
            yield
        finally:
            _LANE.reset(token)
            conn, dbapi = lane.conn, lane.dbapi
            lane.conn = lane.dbapi = None
            if conn is not None:
                await _check_in(conn, dbapi, None)

    async def dispose(self) -> None:
        await self.engine.dispose()


def _conforms(factory: PostgresUnitOfWorkFactory, uow: PostgresUnitOfWork) -> tuple[object, object]:
    """Static proof (mypy) that the adapter implements the ports."""
    checked_factory: UnitOfWorkFactory = factory
    checked_uow: UnitOfWork = uow
    return checked_factory, checked_uow
