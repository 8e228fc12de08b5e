"""Database URLs and the pool-less engine a command's few statements use: what every
process that connects needs, kept apart from the migration runner so that connecting
does not import Alembic (``scheduling tokens add`` and the roles start without it;
issue 26 item 4)."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.config import UNPARSEABLE, ConfigurationError
from scheduling.instance import server_settings

DEFAULT_PORT = 5432
_SHAPE = "scheme://user[:password]@host[:port][,host[:port]...]/database[?parameters]"


def _unparseable(why: str) -> ConfigurationError:
    # The URL itself is never quoted: it may hold a password.
    return ConfigurationError(
        UNPARSEABLE,
        "a database URL does not parse",
        {"problems": [f"{UNPARSEABLE}: a database URL {why} (expected {_SHAPE})"]},
    )


def _port_ok(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5 and 1 <= int(text) <= 65535


def _host_list_as_query(url: str) -> str:
    """libpq's multi-host form ``scheme://user@h1:p1,h2:p2/db?...`` as SQLAlchemy's
    ``scheme://user@/db?host=h1:p1&host=h2:p2&...`` (a missing port is 5432), which the
    asyncpg dialect hands to ``asyncpg.connect`` as its host and port lists. A URL
    naming one host is returned unchanged."""
    scheme, sep, rest = url.partition("://")
    authority, _, tail = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if not sep or "," not in hosts:
        return url
    # A port follows the last colon, except in a bracketed IPv6 address without one.
    pairs = [
        h if ":" in h and not h.endswith("]") else f"{h}:{DEFAULT_PORT}" for h in hosts.split(",")
    ]
    if not all(_port_ok(pair.rpartition(":")[2]) for pair in pairs):
        raise _unparseable("names a port outside 1..65535")
    path, _, query = tail.partition("?")
    params = "&".join(f"host={pair}" for pair in pairs)
    query = f"{params}&{query}" if query else params
    return f"{scheme}://{userinfo}{at}/{path}?{query}"


def to_asyncpg_url(url: str) -> str:
    """Turn a libpq ``postgresql://`` URL into SQLAlchemy's ``postgresql+asyncpg://`` form.

    Multi-host URLs (failover, docs/operations/failover.md) work in both spellings,
    libpq's ``h1:p1,h2:p2`` and SQLAlchemy's repeated ``host=`` parameter; with
    ``target_session_attrs=read-write`` asyncpg connects to the read-write server.

    A URL that does not parse, cannot be encoded or names a port outside 1..65535 is
    ``ConfigurationError`` (``schedule.config.unparseable``) that never quotes it, so a
    command given one prints one line instead of a driver's traceback."""
    try:
        url.encode("utf-8")
        parsed = make_url(_host_list_as_query(url))
        port = parsed.port
    except (ArgumentError, ValueError):  # UnicodeEncodeError is a ValueError
        raise _unparseable("does not parse") from None
    if port is not None and not 1 <= port <= 65535:
        raise _unparseable("names a port outside 1..65535")
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    query = dict(parsed.query)
    sslmode = query.pop("sslmode", None)
    if sslmode is not None and "ssl" not in query:
        query["ssl"] = sslmode
    return parsed.set(query=query).render_as_string(hide_password=False)


def named_engine(url: str, role: str) -> AsyncEngine:
    """An engine without a pool for a command's few statements, each connection named
    ``<role>@<instance id>`` in pg_stat_activity (ADR 2270)."""
    return create_async_engine(
        to_asyncpg_url(url),
        poolclass=NullPool,
        connect_args={"server_settings": server_settings(role)},
    )
