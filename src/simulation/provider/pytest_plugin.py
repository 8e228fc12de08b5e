"""Pytest fixtures that hand each test a real PostgreSQL database.

Fixtures:

- ``pg_server`` (session): the :class:`DatabaseServer`;
- ``pg_template`` (session): the name of the template database migrated to head;
- ``pg_empty_url`` (function): a fresh empty database URL, dropped after the test;
- ``pg_url`` (function): a fresh clone of the migrated template, dropped after the test.

One server serves the whole run. Under xdist the controller spawns the watchdog (a
cheap process that starts nothing yet) before the workers start and hands them its
socket in ``SCHEDULING_DATABASE_BROKER``; the first fixture that needs a database
asks it to start the server, every other worker gets the same one. Without xdist the
first such fixture starts it. A run whose tests never use these fixtures starts no
server. Tests using them get the ``postgres`` marker. When no provider is available
the fixtures ERROR with the provider's message; other tests still run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from simulation.provider._broker import BROKER_ENV, Broker, BrokerError, request
from simulation.provider._database_server import DatabaseServer
from simulation.provider._info import ProviderUnavailable, ServerInfo
from simulation.provider._provider import INFO_ENV, URL_ENV, acquire_server, forced_provider
from simulation.provider.templates import migrated_template

DATABASE_FIXTURES = frozenset({"pg_server", "pg_template", "pg_empty_url", "pg_url"})
_BROKER = pytest.StashKey[Broker]()
_SERVER = pytest.StashKey[DatabaseServer]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("database", "scheduling PostgreSQL provider")
    group.addoption(
        "--database-info",
        metavar="FILE",
        help="write the ServerInfo JSON of the PostgreSQL server this run used (null if none)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server from the provider")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _uses_url(environ: Mapping[str, str]) -> bool:
    try:
        forced = forced_provider(environ)
    except ProviderUnavailable:
        return True  # nothing to spawn: the fixtures will report the bad setting
    return forced == "url" or (forced is None and bool(environ.get(URL_ENV, "").strip()))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """In an xdist controller, spawn the shared watchdog before the workers start."""
    config = session.config
    if _is_worker(config) or not config.pluginmanager.has_plugin("dsession"):
        return
    if _uses_url(os.environ) or os.environ.get(BROKER_ENV):
        return
    broker = Broker(os.environ)
    config.stash[_BROKER] = broker
    os.environ[BROKER_ENV] = broker.socket_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


def _used_info(config: pytest.Config) -> ServerInfo | None:
    server = config.stash.get(_SERVER, None)
    if server is not None:
        return server.info
    broker = config.stash.get(_BROKER, None)
    if broker is None:
        return None
    try:
        answer = request(broker.socket_path, "status", timeout=10)
    except BrokerError:
        return None
    info = answer.get("info")
    return ServerInfo.from_dict(info) if info else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    if _is_worker(config):
        return
    info = _used_info(config)
    target = config.getoption("--database-info", None)
    if target:
        Path(target).write_text(json.dumps(info.to_dict() if info else None, indent=2) + "\n")
    if info is not None:
        settings = ", ".join(f"{k}={v}" for k, v in info.durability.items())
        terminalreporter.write_line(
            f"PostgreSQL: {info.source} {info.version}"
            + (f" from {info.binaries}" if info.binaries else "")
            + (f" ({settings})" if settings else "")
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    broker = config.stash.get(_BROKER, None)
    if broker is not None:
        del config.stash[_BROKER]
        os.environ.pop(BROKER_ENV, None)
        broker.close()


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Iterator[DatabaseServer]:
    """The run's one PostgreSQL server (started on first use)."""
    server = acquire_server()
    request.config.stash[_SERVER] = server
    # Subprocesses a test starts (a CLI, a runner) reuse this server and report its
    # real source; the previous values come back at teardown.
    saved = {key: os.environ.get(key) for key in (URL_ENV, INFO_ENV)}
    os.environ[URL_ENV] = server.info.dsn
    os.environ[INFO_ENV] = json.dumps(server.info.to_dict())
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.close()


@pytest.fixture(scope="session")
def pg_template(pg_server: DatabaseServer) -> str:
    """Name of the template database migrated to head (built once per server)."""
    return migrated_template(pg_server)


@pytest.fixture
def pg_empty_url(pg_server: DatabaseServer) -> Iterator[str]:
    """A fresh, empty database (libpq URL), dropped after the test."""
    url = pg_server.create_database()
    try:
        yield url
    finally:
        pg_server.drop_database(url)


@pytest.fixture
def pg_url(pg_server: DatabaseServer, pg_template: str) -> Iterator[str]:
    """A fresh clone of the migrated template (libpq URL), dropped after the test."""
    url = pg_server.create_database(template=pg_template)
    try:
        yield url
    finally:
        pg_server.drop_database(url)
