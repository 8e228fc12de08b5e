"""Database URLs and the pool-less engine a command's few statements use: what every
process that connects needs, kept apart from the migration runner so that connecting
does not import Alembic (``scheduling tokens add`` and the roles start without it;
issue 26 item 4)."""

from __future__ import annotations

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.instance import server_settings

DEFAULT_PORT = 5432


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
    pairs = [h if ":" in h else f"{h}:{DEFAULT_PORT}" for h in hosts.split(",")]
    path, _, query = tail.partition("?")
    params = "&".join(f"host={pair}" for pair in pairs)
    query = f"{params}&{query}" if query else params
    return f"{scheme}://{userinfo}{at}/{path}?{query}"


def to_asyncpg_url(url: str) -> str:
    """Turn a libpq ``postgresql://`` URL into SQLAlchemy's ``postgresql+asyncpg://`` form.

    Multi-host URLs (failover, docs/operations/failover.md) work in both spellings,
    libpq's ``h1:p1,h2:p2`` and SQLAlchemy's repeated ``host=`` parameter; with
    ``target_session_attrs=read-write`` asyncpg connects to the read-write server."""
    parsed = make_url(_host_list_as_query(url))
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
