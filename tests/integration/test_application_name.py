"""Every connection the product opens names itself in ``pg_stat_activity``
(issue 25 item 3, ADR 2270): ``application_name`` is ``<role>@<instance id>`` for each
role's engine (its own login, or the trusted login it ``SET LOCAL ROLE``s over), the
readiness probe, the wake listener's LISTEN connection and the migration connection.
Each is read back by a separate admin connection from ``pg_stat_activity``; the test of
the test is a connection opened without a name, which that read tells apart."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator

import asyncpg
import pytest
from sqlalchemy import text

from scheduling import bootstrap as b
from scheduling import instance
from scheduling.adapters.postgres import release_check
from scheduling.adapters.postgres.migrations import current_revision, head_revision
from scheduling.adapters.postgres.urls import named_engine
from scheduling.adapters.system_clock import SystemClock
from scheduling.ports.runtime import RunPriority
from scheduling.storage import PostgresStorage, Role
from simulation.engine.ids import SeededIds
from simulation.worlds.service import world_settings

pytestmark = pytest.mark.postgres

INSTANCE = "node-a.7"


@pytest.fixture(autouse=True)
def undeclared() -> Iterator[None]:
    """Each test starts and ends with no declared process identity."""
    saved = instance._declared
    instance._declared = None
    try:
        yield
    finally:
        instance._declared = saved


async def seen_as(url: str, pid: int) -> str | None:
    """The backend ``pid``'s ``application_name`` as another session sees it."""
    admin = await asyncpg.connect(url)
    try:
        name: str | None = await admin.fetchval(
            "SELECT application_name FROM pg_stat_activity WHERE pid = $1", pid
        )
        return name
    finally:
        await admin.close()


async def role_connection_name(storage: PostgresStorage, role: Role) -> tuple[str, str | None]:
    """(what the role's connection says it is, what pg_stat_activity shows for it)."""
    async with storage.factory(role).engine.connect() as conn:
        own, pid = (
            await conn.execute(text("SELECT current_setting('application_name'), pg_backend_pid()"))
        ).one()
        return str(own), await seen_as(storage.url_of(role) or "", int(pid))


async def test_each_role_connection_carries_role_and_instance(pg_url: str) -> None:
    storage = PostgresStorage(
        pg_url, logins={"api": pg_url, "scheduler": pg_url}, instance_id=INSTANCE
    )
    try:
        expectations: list[tuple[Role, str]] = [
            ("api", "api@node-a.7"),
            ("scheduler", "scheduler@node-a.7"),
            # run_worker has no own login here: SET LOCAL ROLE over the trusted login.
            ("run_worker", "trusted@node-a.7"),
            ("trusted", "trusted@node-a.7"),
        ]
        for role, expected in expectations:
            assert await role_connection_name(storage, role) == (expected, expected), role
        assert await storage.readiness(head_revision(), "api").problems() == []
    finally:
        await storage.close()


async def test_the_readiness_probe_and_the_wake_listener_are_named(pg_url: str) -> None:
    storage = PostgresStorage(None, logins={"api": pg_url, "scheduler": pg_url}, instance_id="r1")
    listener = storage.wake_listener(SystemClock())
    assert listener is not None
    await listener.start()
    try:
        assert await storage.readiness(head_revision(), "api").problems() == []
        admin = await asyncpg.connect(pg_url)
        try:
            rows = await admin.fetch(
                "SELECT application_name, query FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name LIKE '%@r1'"
            )
        finally:
            await admin.close()
        named = {(r["application_name"], r["query"].split(" ")[0]) for r in rows}
        # The probe's pooled connection (idle after its read) and the LISTEN one.
        assert {name for name, _ in named} == {"api@r1", "scheduler@r1"}, named
        assert ("scheduler@r1", "LISTEN") in named, named
    finally:
        await listener.close()
        await storage.close()


async def test_the_default_instance_id_is_host_and_pid_then_the_declared_one(
    pg_url: str,
) -> None:
    host = socket.gethostname().split(".")[0]
    default = f"trusted@{instance.default_instance_id(host, os.getpid())}"
    storage = PostgresStorage(pg_url)
    try:
        assert await role_connection_name(storage, "trusted") == (default, default)
    finally:
        await storage.close()
    instance.declare("scheduler", "blue-3")
    storage = PostgresStorage(pg_url)
    try:
        assert await role_connection_name(storage, "scheduler") == (
            "trusted@blue-3",
            "trusted@blue-3",
        )
    finally:
        await storage.close()


async def test_the_migration_connection_is_named(pg_url: str) -> None:
    instance.declare("migrate", "mig-1")
    holder = await asyncpg.connect(pg_url)
    try:
        # Hold the version table so the migration's read waits where it can be seen
        # (from another session: pg_stat_activity is a snapshot per transaction).
        async with holder.transaction():
            await holder.execute("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE")
            reading = asyncio.create_task(current_revision(pg_url))
            waiting = await names_waiting_for_a_lock(pg_url)
        assert await reading is not None
    finally:
        await holder.close()
    assert waiting == ["migrate@mig-1"]


async def test_the_release_checks_connections_are_named(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The privilege read (waiting on the version table, seen from another session)
    and every connection of the pooling probe (as the server reports it to the client)
    carry ``release-check@<instance id>``."""
    instance.declare("release-check", "rc-1")
    holder = await asyncpg.connect(pg_url)
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE")
            reading = asyncio.create_task(release_check.scheduler_release_problems(pg_url))
            waiting = await names_waiting_for_a_lock(pg_url)
        await reading
    finally:
        await holder.close()
    assert waiting == ["release-check@rc-1"]

    reported: list[str] = []
    plain_connect = asyncpg.connect

    async def reporting_connect(*args: object, **kwargs: object) -> asyncpg.Connection:
        conn = await plain_connect(*args, **kwargs)
        reported.append(conn.get_settings().application_name)
        return conn

    monkeypatch.setattr(asyncpg, "connect", reporting_connect)
    assert await release_check.connection_pooling(pg_url) == "session"
    assert len(reported) == 1 + release_check.POOLING_HOLDERS
    assert set(reported) == {"release-check@rc-1"}
    # The test of the test: the same read of an unnamed connection is told apart.
    (await reporting_connect(pg_url)).terminate()
    assert reported[-1] == ""


async def test_a_named_engine_names_its_connections(pg_url: str) -> None:
    """The engine of ``logins``, the migration commands and release-check."""
    instance.declare("logins", "lg-1")
    engine = named_engine(pg_url, "logins")
    try:
        async with engine.connect() as conn:
            name = (await conn.execute(text("SELECT current_setting('application_name')"))).one()
    finally:
        await engine.dispose()
    assert name == ("logins@lg-1",)


async def names_waiting_for_a_lock(url: str) -> list[str]:
    watcher = await asyncpg.connect(url)
    try:
        for _ in range(200):
            waiting = [
                str(r["application_name"])
                for r in await watcher.fetch(
                    "SELECT application_name FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ]
            if waiting:
                return waiting
            await asyncio.sleep(0.05)
        return []
    finally:
        await watcher.close()


async def test_of_the_test_an_unnamed_connection_is_told_apart(pg_url: str) -> None:
    plain = await asyncpg.connect(pg_url)
    try:
        pid = plain.get_server_pid()
        assert await seen_as(pg_url, pid) == ""
    finally:
        await plain.close()
    named = await asyncpg.connect(pg_url, server_settings=instance.server_settings("api"))
    try:
        assert await seen_as(pg_url, named.get_server_pid()) == instance.application_name(
            "api", instance.current().instance_id
        )
    finally:
        await named.close()


def test_names_fit_postgresql_and_stay_ascii() -> None:
    assert instance.application_name("scheduler", "x" * 80) == ("scheduler@" + "x" * 80)[:63]
    assert instance.application_name("api", "héllo wörld") == "api@h-llo-w-rld"
    assert instance.default_instance_id("Build Box.example.com", 42) == "Build-Box-42"
    assert instance.default_instance_id("", 7) == "host-7"
    assert instance.valid_instance_id("pod-7f9c.a_1")
    for bad in ("", "-x", "a b", "x" * 41, "é"):
        assert not instance.valid_instance_id(bad), bad
    with pytest.raises(ValueError, match="does not match"):
        instance.declare("scheduler", "not valid")


async def test_a_run_workers_lease_owner_names_its_process(pg_url: str) -> None:
    """The default owner (written to ``runs.lease_owner`` at each claim and named in
    the worker's log lines) carries the instance id."""
    instance.declare("run-worker", "rw-9")
    storage = PostgresStorage(pg_url)
    try:
        role = b.build_run_worker(
            world_settings(),
            RunPriority.ASYNC,
            clock=SystemClock(),
            ids=SeededIds(1),
            storage=storage,
        )
        assert role.worker.owner.startswith("async@rw-9-"), role.worker.owner
    finally:
        await storage.close()
