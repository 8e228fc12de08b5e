"""The simulator behind pgbouncer in session mode (ADR 2370): the materialization
scenarios reach every declared step, a lock wait is seen, the deadlock victim is the
first task by name, and closed pooled backends count as released, not gone; and
(directly) a role that may not set ``deadlock_timeout`` still connects.

Workers reach the database through a real pgbouncer (1.18) in front of a private
cluster; the provider's server is not involved. Skipped, saying so, where pgbouncer
is not installed (``.ci/run`` installs it). Each test of a test puts back the wiring
before ADR 2370 (``deadlock_timeout`` as a startup parameter, the driver's pid) and
shows the check failing on it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from simulation.engine import pg_observer
from simulation.engine import scenario as engine_scenario
from simulation.engine.errors import SimulationStuck
from simulation.engine.evidence import failure_report
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import Scenario, WorkerContext
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.engine.targets import FreshDatabases, SharedDatabase
from simulation.provider._pgbouncer import Pgbouncer, find_pgbouncer, pgbouncer_in_front
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.scenarios.demo import UNIQUE
from simulation.scenarios.ledger_demo import ATOMIC as LEDGER_ATOMIC
from simulation.scenarios.ledger_demo import SPLIT as LEDGER_SPLIT
from simulation.scenarios.materialize import ATOMIC, ONCE
from simulation.scenarios.materialize_paths import PATH_SCENARIOS

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        find_pgbouncer() is None,
        reason="pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)",
    ),
]

MATERIALIZATION: dict[str, Scenario] = {
    s.name: s for s in (ONCE, ATOMIC, *(PATH_SCENARIOS[p] for p in sorted(PATH_SCENARIOS)))
}


@dataclass
class Behind:
    private: PrivateCluster
    pooled: Pgbouncer
    template: str

    def url(self, direct: str) -> str:
        return self.pooled.url_for(direct)

    def databases(self, template: str | None) -> FreshDatabases:
        """Created and dropped on the server directly; the workers get the pooler's URL."""
        made: dict[str, str] = {}
        server = self.private.server

        async def create() -> str:
            direct = server.create_database(template)
            made[self.url(direct)] = direct
            return self.url(direct)

        async def drop(url: str) -> None:
            server.drop_database(made.pop(url))

        return FreshDatabases(create, drop)


@pytest.fixture(scope="module")
def behind() -> Iterator[Behind]:
    with (
        private_cluster() as private,
        pgbouncer_in_front("127.0.0.1", private.cluster.port) as pooled,
    ):
        yield Behind(private, pooled, migrated_template(private.server))


@pytest.fixture
def pooled_empty(behind: Behind) -> Iterator[str]:
    direct = behind.private.server.create_database()
    try:
        yield behind.url(direct)
    finally:
        behind.private.server.drop_database(direct)


def _simulator(databases: Any, tmp: Path, **kwargs: Any) -> Simulator:
    return Simulator(databases, store=FailureStore(tmp / "failures"), **kwargs)


async def _driver_pid_connect(self: WorkerContext) -> Any:
    """WorkerContext.connect before ADR 2370: ``deadlock_timeout`` as a startup
    parameter and the driver's pid (behind a pooler: the pooler's cancel key)."""
    settings = {"application_name": f"sim:{self.name}", "deadlock_timeout": "100ms"}
    conn = await asyncpg.connect(self.url, server_settings=settings)
    self.register_backend(conn.get_server_pid(), conn.close, conn.terminate)
    return conn


async def _driver_pid_only(self: WorkerContext) -> Any:
    """As ``_driver_pid_connect`` without the startup parameter pgbouncer refuses."""
    conn = await asyncpg.connect(self.url, server_settings={"application_name": "sim"})
    self.register_backend(conn.get_server_pid(), conn.close, conn.terminate)
    return conn


@pytest.mark.parametrize("name", sorted(MATERIALIZATION))
async def test_materialization_scenarios_reach_every_step_behind_the_pooler(
    behind: Behind, tmp_path: Path, name: str
) -> None:
    scenario = MATERIALIZATION[name]
    sim = _simulator(behind.databases(behind.template), tmp_path)
    result = await sim.explore(scenario, mode="random", seed=7, executions=2, replay_saved=False)
    assert result.failures == [], failure_report(result)
    assert result.not_covered() == []


async def test_materialization_crash_sweep_behind_the_pooler(
    behind: Behind, tmp_path: Path
) -> None:
    # One kind per step (4 steps, 4 kinds): dropped, terminated and acknowledged-lost
    # connections of the product behind the pooler, each released before the next move.
    sim = _simulator(behind.databases(behind.template), tmp_path)
    result = await sim.explore(
        ATOMIC, mode="crash", seed=7, kinds=CLIENT_FAULT_KINDS, rotate_kinds=True
    )
    assert result.failures == [], failure_report(result)
    assert result.not_covered() == []
    assert {label.split("@")[0] for label in result.faults_fired} == {
        kind.value for kind in CLIENT_FAULT_KINDS
    }


async def test_of_the_test_the_former_connect_reaches_no_step_behind_the_pooler(
    behind: Behind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The closing note's symptom: pgbouncer refuses the startup parameter, every
    # worker raises before its first step, and coverage says so.
    monkeypatch.setattr(WorkerContext, "connect", _driver_pid_connect)
    sim = _simulator(behind.databases(behind.template), tmp_path)
    result = await sim.explore(ONCE, mode="random", seed=7, executions=1, replay_saved=False)
    assert result.not_covered() == [f"step {s} never reached" for s in ONCE.steps]


UNIQUE_B_BLOCKS = {
    "events": [
        {"chosen": c, "fault": None, "options": o}
        for c, o in [
            ("a", [["a", "sim.start", 1], ["b", "sim.start", 1]]),
            ("a", [["a", "demo.read", 1], ["b", "sim.start", 1]]),
            ("b", [["a", "demo.inserted", 1], ["b", "sim.start", 1]]),
            ("b", [["a", "demo.inserted", 1], ["b", "demo.read", 1]]),
            ("a", [["a", "demo.inserted", 1]]),
        ]
    ],
    "key": {"seed": 0, "mode": "random"},
    "execution": 0,
}


async def test_a_lock_wait_is_seen_behind_the_pooler(pooled_empty: str, tmp_path: Path) -> None:
    # a inserts (uncommitted); b reads 0 and inserts: it waits on a's transaction.
    sim = _simulator(SharedDatabase(pooled_empty), tmp_path)
    execution = await sim.replay(UNIQUE, UNIQUE_B_BLOCKS)
    assert execution.status == "pass"
    assert execution.decisions[-1].blocked == ("b",)


async def test_of_the_test_with_the_drivers_pid_the_wait_is_never_seen(
    pooled_empty: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WorkerContext, "connect", _driver_pid_only)
    sim = _simulator(SharedDatabase(pooled_empty), tmp_path, stuck_timeout=1.0)
    with pytest.raises(SimulationStuck, match="still running"):
        await sim.replay(UNIQUE, UNIQUE_B_BLOCKS)


async def test_the_deadlock_victim_is_the_first_by_name_behind_the_pooler(
    pooled_empty: str, tmp_path: Path
) -> None:
    # Seed 12 at a 20% fault rate ends in a lock-order deadlock of the split toy; the
    # staggered deadlock_timeout (set after connecting) makes 'a' the victim.
    sim = _simulator(SharedDatabase(pooled_empty), tmp_path)
    one = await sim.run_random(LEDGER_SPLIT, 12, fault_rate=0.2)
    assert one.trace["tasks"]["a"] == "raised:DeadlockDetectedError"
    again = await sim.replay(LEDGER_SPLIT, one.trace)
    assert again.text == one.text


async def test_every_fault_after_every_write_is_released_behind_the_pooler(
    pooled_empty: str, tmp_path: Path
) -> None:
    sim = _simulator(SharedDatabase(pooled_empty), tmp_path)
    result = await sim.explore(LEDGER_ATOMIC, mode="crash", seed=3, replay_saved=False)
    assert result.failures == [], failure_report(result)
    assert result.not_covered() == []


async def test_a_closed_pooled_backend_is_released_not_gone(behind: Behind) -> None:
    url = behind.url(behind.private.server.url_for("postgres"))
    observer = pg_observer.PgObserver(await asyncpg.connect(url), gone_timeout=0.5)
    try:
        conn = await asyncpg.connect(url)
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        assert pid != conn.get_server_pid()  # the driver's pid is the pooler's key
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(2370)")
            with pytest.raises(SimulationStuck, match="not released"):
                await observer.wait_released([pid], set)  # holds a lock
            await observer.wait_released([pid], lambda: {pid})  # linked: released
        await conn.close()
        await observer.wait_released([pid], set)
        # The pooler keeps the server connection: waiting for it to exit never ends.
        with pytest.raises(SimulationStuck, match="did not exit"):
            await observer.wait_gone([pid])
    finally:
        await observer.close()


async def test_a_backend_the_pooler_hands_to_the_observer_is_released(pooled_empty: str) -> None:
    # pgbouncer links a server at a client's first query, not at login: an observer
    # that has not queried yet may be given the server a worker just closed (seen in
    # the toy's crash sweep, where the wait then timed out on the observer's own query).
    observer = pg_observer.PgObserver(await asyncpg.connect(pooled_empty), gone_timeout=0.5)
    try:
        conn = await asyncpg.connect(pooled_empty)
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        await conn.close()
        await observer.wait_released([pid], set)
        assert await observer._conn.fetchval("SELECT pg_backend_pid()") == pid
    finally:
        await observer.close()


async def test_a_role_that_may_not_set_deadlock_timeout_still_connects(
    behind: Behind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # set_config raises 42501 for such a role: the stagger is cleared, the pid still read.
    monkeypatch.setattr(engine_scenario, "_STAGGER_DEADLOCKS", [True])
    server = behind.private.server
    direct = server.create_database()
    admin = await asyncpg.connect(direct)
    try:
        await admin.execute(
            "DROP ROLE IF EXISTS sim_plain; CREATE ROLE sim_plain LOGIN NOSUPERUSER;"
            " ALTER SCHEMA public OWNER TO sim_plain"
        )
        plain = direct.replace("postgres@", "sim_plain@", 1)
        sim = _simulator(SharedDatabase(plain), tmp_path)
        execution = await sim.replay(UNIQUE, UNIQUE_B_BLOCKS)
        assert execution.status == "pass"
        assert execution.decisions[-1].blocked == ("b",)
        assert engine_scenario._STAGGER_DEADLOCKS == [False]
    finally:
        await admin.close()
        server.drop_database(direct)
