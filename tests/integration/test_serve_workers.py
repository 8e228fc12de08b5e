"""``scheduling serve --workers N`` (issue 26 item 2, ADR 2320), as real processes over
a real PostgreSQL: N workers answer on one port, each its own instance (its own
``application_name`` in ``pg_stat_activity``); SIGTERM to the parent stops them all
(exit 0) and no worker outlives the parent, even one killed outright; a refusal is
reported once, by the parent, before any worker starts."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from scheduling.testing import PostgresUnitOfWorkFactory, SystemClock, issue_token
from simulation.worlds.http import OWNER
from simulation.worlds.service import seed_durable

pytestmark = pytest.mark.postgres

SCHEDULING = str(Path(sys.executable).parent / "scheduling")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SCHEDULE_")}
    env.update(
        {
            "AGENT_SCHEDULE_ENVIRONMENT": "development",
            "AGENT_SCHEDULE_API_ENABLED": "1",
            "AGENT_SCHEDULE_WORKER_ENABLED": "1",
            "AGENT_SCHEDULE_STORAGE": "postgres",
            "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "durable",
            "AGENT_SCHEDULE_DATABASE_URL": url,
            **extra,
        }
    )
    return env


@pytest.fixture
def token(pg_url: str, tmp_path: Path) -> str:
    async def seed() -> None:
        admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
        try:
            await seed_durable(admin, [OWNER], at=SystemClock().now())
        finally:
            await admin.dispose()

    asyncio.run(seed())
    _, secret = issue_token(
        tmp_path / "tokens.json", OWNER.tenant_id, OWNER.principal_id, SystemClock().now()
    )
    return secret


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry))
    return found


def workers_of(pid: int) -> list[int]:
    """The spawned workers among ``pid``'s children (multiprocessing's resource tracker
    is the other child)."""
    return [c for c in children(pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def wait_for(condition: object, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@contextmanager
def serving(
    url: str, tmp_path: Path, workers: str, **env: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    argv = [
        SCHEDULING,
        "serve",
        "--port",
        str(port),
        "--tokens-file",
        str(tmp_path / "tokens.json"),
    ]
    proc = subprocess.Popen(
        [*argv, "--workers", workers],
        env=server_env(url, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: proc.poll() is not None or _answers(base)), "no answer"
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in children(proc.pid):
            os.kill(pid, signal.SIGKILL)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


async def instance_names(url: str) -> set[str]:
    admin = await asyncpg.connect(url)
    try:
        rows = await admin.fetch(
            "SELECT DISTINCT application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'trusted@%'"
        )
        return {row[0] for row in rows}
    finally:
        await admin.close()


def names_after_requests(url: str, base: str, token: str, want: int) -> set[str]:
    """Fresh connections until ``want`` instances hold a connection (or 200 tries). The
    API role rides the trusted login here (``SET LOCAL ROLE``), so it is named ``trusted``."""
    names: set[str] = set()
    for _ in range(200):
        with httpx.Client(base_url=base, timeout=10) as client:  # a new TCP connection
            answer = client.get("/v1/schedules", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
        names = asyncio.run(instance_names(url))
        if len(names) >= want:
            break
    return names


def test_two_workers_answer_and_stop_with_the_parent(
    pg_url: str, tmp_path: Path, token: str
) -> None:
    with serving(pg_url, tmp_path, "2") as (proc, base):
        workers, every = workers_of(proc.pid), children(proc.pid)
        assert len(workers) == 2
        names = names_after_requests(pg_url, base, token, 2)
        assert len(names) == 2, names
        assert {name.rsplit("-", 1)[-1] for name in names} <= {str(pid) for pid in workers}
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "(2 workers)" in out
    assert "server stopped" in err
    assert "Traceback" not in err
    assert [pid for pid in workers if alive(pid)] == []  # reaped by the parent
    # multiprocessing's resource tracker leaves at its pipe's end, just after the parent
    assert wait_for(lambda: not any(alive(pid) for pid in every), 10), every


def test_one_worker_is_one_process(pg_url: str, tmp_path: Path, token: str) -> None:
    """The test of the test: without --workers the distinct-instance check sees one."""
    with serving(pg_url, tmp_path, "1") as (proc, base):
        assert len(names_after_requests(pg_url, base, token, 2)) == 1
        assert [pid for pid in children(proc.pid) if alive(pid)] == []
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_workers_do_not_outlive_a_killed_parent(pg_url: str, tmp_path: Path, token: str) -> None:
    with serving(pg_url, tmp_path, "2") as (proc, _):
        assert len(workers_of(proc.pid)) == 2
        every = children(proc.pid)
        proc.kill()
        proc.wait(30)
        assert wait_for(lambda: not any(alive(pid) for pid in every)), every


def test_a_configured_instance_id_is_made_distinct_per_worker(
    pg_url: str, tmp_path: Path, token: str
) -> None:
    with serving(pg_url, tmp_path, "2", AGENT_SCHEDULE_INSTANCE_ID="node-a") as (proc, base):
        names = names_after_requests(pg_url, base, token, 2)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert names == {"trusted@node-a-w0", "trusted@node-a-w1"}


@pytest.mark.parametrize(
    ("workers", "env", "code"),
    [
        (
            "2",
            {"AGENT_SCHEDULE_API_ENABLED": "0", "AGENT_SCHEDULE_WORKER_ENABLED": "0"},
            "schedule.bootstrap.feature_disabled",
        ),
        ("2", {"AGENT_SCHEDULE_STORAGE": "memory"}, "schedule.bootstrap.memory_repositories"),
        ("0", {}, "schedule.config.unparseable"),
        ("-3", {}, "schedule.config.unparseable"),
        ("two", {}, "schedule.config.unparseable"),
    ],
)
def test_a_refusal_is_reported_once_by_the_parent(
    pg_url: str, tmp_path: Path, token: str, workers: str, env: dict[str, str], code: str
) -> None:
    argv = [SCHEDULING, "serve", "--port", str(free_port()), "--workers", workers]
    done = subprocess.run(
        [*argv, "--tokens-file", str(tmp_path / "tokens.json")],
        env=server_env(pg_url, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count(code) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "workers)" not in done.stdout
