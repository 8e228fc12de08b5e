"""A PostgreSQL server handed out by the provider, and the admin work tests need."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import itertools
import os
import re
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

import asyncpg

from simulation.provider._info import ServerInfo, database_of, with_database

T = TypeVar("T")
Build = Callable[[str], Awaitable[Any] | Any]

CONNECT_TIMEOUT = 30.0
_counter = itertools.count(1)


def _run(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run admin coroutines on a private event loop in a short-lived thread.

    The callers are synchronous (fixtures, scripts) and may themselves sit inside a
    running loop (an async test), where ``asyncio.run`` is not allowed and must not
    disturb that loop; a thread of our own avoids both problems.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="pg-admin", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def template_name(key: str) -> str:
    """A valid, stable database name for a template key (63-byte identifier limit)."""
    slug = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")[:40]
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"tpl_{slug}_{digest}"


def _lock_id(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _call_build(build: Build, url: str) -> None:
    """Call a sync or async builder from a thread with no running loop."""
    result = build(url)
    if inspect.isawaitable(result):

        async def wait() -> None:
            await result

        asyncio.run(wait())


class DatabaseServer:
    """A running server: make, clone and drop databases on it.

    Every method is synchronous and safe to call from any thread or process. A server
    from ``SCHEDULING_DATABASE_URL`` (or a parent harness) is never stopped by
    ``close()``; an ephemeral one is stopped and its directory removed.
    """

    def __init__(self, info: ServerInfo, closer: Callable[[], None] | None = None) -> None:
        self.info = info
        self._closer = closer
        self._closed = False
        # FILE_COPY checkpoints: cheap with fsync off (measured faster than WAL_LOG on
        # tmpfs and on disk), but a flush of the whole server where fsync is on.
        self.clone_strategy = "FILE_COPY" if info.durability.get("fsync") == "off" else "WAL_LOG"

    async def _connect(self, url: str | None = None) -> Any:
        return await asyncpg.connect(url or self.info.dsn, timeout=CONNECT_TIMEOUT)

    def url_for(self, name: str) -> str:
        """The libpq URL of database ``name`` on this server."""
        return with_database(self.info.dsn, name)

    def create_database(self, template: str | None = None) -> str:
        """Create a new, uniquely named database (optionally cloned); return its URL."""
        name = f"t_{os.getpid()}_{next(_counter)}_{secrets.token_hex(3)}"
        sql = f"CREATE DATABASE {_quote(name)}"
        if template is not None:
            sql += f" TEMPLATE {_quote(template)}"
            if self.info.version_num >= 150000:
                sql += f" STRATEGY {self.clone_strategy}"

        async def create() -> None:
            conn = await self._connect()
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        _run(create)
        return self.url_for(name)

    def drop_database(self, url: str) -> None:
        """Drop the database ``url`` names, terminating its connections first."""
        name = database_of(url)

        async def drop() -> None:
            conn = await self._connect()
            try:
                await self._drop(conn, name)
            finally:
                await conn.close()

        _run(drop)

    async def _drop(self, conn: Any, name: str) -> None:
        if self.info.version_num >= 130000:
            await conn.execute(f"DROP DATABASE IF EXISTS {_quote(name)} WITH (FORCE)")
            return
        await self._terminate(conn, name)
        await conn.execute(f"DROP DATABASE IF EXISTS {_quote(name)}")

    @staticmethod
    async def _terminate(conn: Any, name: str) -> None:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )

    def ensure_template(self, key: str, build: Build) -> str:
        """The name of a template database built once per ``key`` by ``build(url)``.

        Safe across processes and test workers: builders serialize on an advisory
        lock, and a template counts as built only once it is marked ``IS_TEMPLATE``
        (a build that crashed half-way is dropped and redone). ``build`` may be sync
        or async. The finished template refuses connections, so nothing can hold it
        open and block a clone.
        """
        name = template_name(key)

        async def ensure() -> str:
            conn = await self._connect()
            try:
                await conn.execute("SELECT pg_advisory_lock($1)", _lock_id(name))
                done = await conn.fetchval(
                    "SELECT datistemplate FROM pg_database WHERE datname = $1", name
                )
                if done:
                    return name
                if done is not None:
                    await self._drop(conn, name)
                await conn.execute(f"CREATE DATABASE {_quote(name)}")
                try:
                    loop = asyncio.get_running_loop()
                    await loop.run_in_executor(None, _call_build, build, self.url_for(name))
                    await self._terminate(conn, name)
                    await conn.execute(
                        f"ALTER DATABASE {_quote(name)}"
                        " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
                    )
                except BaseException:
                    await self._drop(conn, name)
                    raise
                return name
            finally:
                await conn.close()  # also releases the session advisory lock

        return _run(ensure)

    def close(self) -> None:
        """Stop an ephemeral server (a no-op for a server this harness did not start)."""
        if self._closed:
            return
        self._closed = True
        if self._closer is not None:
            self._closer()

    def __enter__(self) -> DatabaseServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DatabaseServer(source={self.info.source!r}, version={self.info.version!r})"
