"""Each request does each thing once (issue 26 item 2, ADR 2240), counted, not timed.

The control plane is built through the composition root over an engine this test
owns, so SQLAlchemy's events on it count every unit of work (``begin``) and every
statement; the cadence parser is counted in every module that imported it, the
secret scanner and the revision constructor at their classes. Real PostgreSQL, real
uvicorn, real HTTP. Each count has a twin that shows the counter seeing the thing
done twice (the service called without the edge's snapshot reads the principal
again), so the counters can fail.
"""

from __future__ import annotations

import io
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from sqlalchemy import event

from scheduling.adapters.postgres.repositories.substrate import PostgresRunRepository
from scheduling.bootstrap import ControlPlane, build_control_plane
from scheduling.domain import cadence as cadence_module
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.secrets import SecretScanner
from scheduling.http.app import create_app
from scheduling.http.models import CreateScheduleBody
from scheduling.http.serving import running
from scheduling.logs import ProcessLogHandler
from scheduling.ports.records import RunRecord, RunStatus, SessionRecord
from scheduling.storage import PostgresStorage
from scheduling.testing import PostgresUnitOfWorkFactory, TokenFile, issue_token
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.http import OWNER, body, settings_for
from simulation.worlds.service import AGENT_ID, AGENT_VERSION, POLICY, START, seed_durable


@dataclass
class Counted:
    plane: ControlPlane
    client: httpx.AsyncClient
    auth: dict[str, str]
    counts: Counter[str]

    def reset(self) -> None:
        self.counts.clear()


def _count_parses(monkeypatch: pytest.MonkeyPatch, counts: Counter[str]) -> None:
    original = cadence_module.parse_cadence

    def counting(payload: object) -> Any:
        if isinstance(payload, Mapping):  # a parse; an already parsed Cadence returns as is
            counts["cadence_parse"] += 1
        return original(payload)

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith("scheduling") and getattr(module, "parse_cadence", None) is original:
            monkeypatch.setattr(module, "parse_cadence", counting)


def _count_calls(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, counts: Counter[str], label: str
) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        counts[label] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)


@pytest.fixture
async def counted(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Counted]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=2)
    await seed_durable(admin, [OWNER], at=START)
    engine_owner = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=4)
    counts: Counter[str] = Counter()
    sync = engine_owner.engine.sync_engine

    def on_begin(conn: Any) -> None:
        counts["transactions"] += 1

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        counts["statements"] += 1
        if "FROM principals" in statement:
            counts["principal_reads"] += 1

    event.listen(sync, "begin", on_begin)
    event.listen(sync, "before_cursor_execute", on_statement)
    storage = PostgresStorage.over_engine(engine_owner.engine, url=pg_url)
    with tempfile.TemporaryDirectory(prefix="sched-once-") as tmp:
        path = Path(tmp) / "tokens.json"
        _, token = issue_token(path, OWNER.tenant_id, OWNER.principal_id, START)
        plane = build_control_plane(
            settings_for(pg_url),
            clock=VirtualClock(START),
            ids=SeededIds(7),
            tokens=TokenFile(path),
            storage=storage,
        )
        try:
            async with (
                running(create_app(plane)) as url,
                httpx.AsyncClient(base_url=url, timeout=30) as client,
            ):
                # A CLI test earlier in this process may have installed the process log
                # handler, whose redaction runs the scanner on every access-log line:
                # this counts the request path, not the log's.
                root = logging.getLogger()
                monkeypatch.setattr(
                    root,
                    "handlers",
                    [h for h in root.handlers if not isinstance(h, ProcessLogHandler)],
                )
                _count_parses(monkeypatch, counts)
                _count_calls(monkeypatch, SecretScanner, "scan", counts, "secret_scans")
                _count_calls(monkeypatch, ScheduleRevision, "__init__", counts, "revision_builds")
                yield Counted(plane, client, {"Authorization": f"Bearer {token}"}, counts)
        finally:
            await plane.close()
            await storage.close()
            await engine_owner.dispose()
            await admin.dispose()


async def _create(world: Counted, key: str, **overrides: Any) -> httpx.Response:
    return await world.client.post(
        "/v1/schedules",
        json=body(**overrides),
        headers={**world.auth, "Idempotency-Key": key},
    )


async def test_create_reads_the_principal_once_in_one_unit_of_work(counted: Counted) -> None:
    await _create(counted, "warm")  # first-use costs (pool, key ring) are not the path's
    counted.reset()
    answer = await _create(counted, "once")
    assert answer.status_code == 201, answer.text
    assert counted.counts["principal_reads"] == 1
    # The authentication read and the write (replay look-up, pinned agent's read,
    # inserts; its wake-up rides the COMMIT, ADR 2310) in one (ADR 2395): was 2.
    assert counted.counts["transactions"] == 1
    assert counted.counts["cadence_parse"] == 1
    assert counted.counts["secret_scans"] == 2  # one scan of the text: title, instruction
    assert counted.counts["revision_builds"] == 1


async def test_a_replayed_create_reads_nothing_twice(counted: Counted) -> None:
    first = await _create(counted, "again")
    assert first.status_code == 201
    counted.reset()
    replay = await _create(counted, "again")
    assert replay.status_code == 200
    assert replay.json()["id"] == first.json()["id"]
    assert counted.counts["principal_reads"] == 1
    # Authentication and the write that finds the key and reads its revision, in one.
    assert counted.counts["transactions"] == 1
    assert counted.counts["cadence_parse"] <= 2  # the request's, the stored revision's


async def test_the_counters_see_a_create_authenticated_apart(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: a principal directory that ignores the write's unit of work
    (``joined`` returns itself, so the principal is read in a transaction of its own,
    as before ADR 2395) shows as a second unit of work on a create and on its replay."""
    await _create(counted, "warm")
    directory = counted.plane.principals
    monkeypatch.setattr(directory, "joined", lambda principals: directory)
    for expected in (201, 200):
        counted.reset()
        answer = await _create(counted, "apart-create")
        assert answer.status_code == expected, answer.text
        assert counted.counts["principal_reads"] == 1
        assert counted.counts["transactions"] == 2


async def test_list_builds_no_revision_and_reads_once(counted: Counted) -> None:
    for n in range(5):
        assert (await _create(counted, f"list-{n}")).status_code == 201
    counted.reset()
    page = await counted.client.get("/v1/schedules", params={"limit": 50}, headers=counted.auth)
    assert page.status_code == 200
    assert len(page.json()["items"]) == 5
    assert counted.counts["revision_builds"] == 0
    assert counted.counts["cadence_parse"] == 0
    assert counted.counts["principal_reads"] == 1
    # Authentication and the page in one unit of work (ADR 2380): was 2.
    assert counted.counts["transactions"] == 1
    assert counted.counts["statements"] == 2  # the principal, the page


async def test_get_reads_the_principal_once(counted: Counted) -> None:
    made = await _create(counted, "get")
    counted.reset()
    answer = await counted.client.get(f"/v1/schedules/{made.json()['id']}", headers=counted.auth)
    assert answer.status_code == 200
    assert counted.counts["principal_reads"] == 1
    assert counted.counts["transactions"] == 1  # authentication and the read (ADR 2380)
    assert counted.counts["revision_builds"] == 1


async def test_the_counters_see_authentication_in_its_own_unit_of_work(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: a principal directory that ignores the request's unit of work
    (``joined`` returns itself, so the principal is read in a transaction of its own,
    as before ADR 2380) shows as a second unit of work on each read."""
    made = (await _create(counted, "apart")).json()
    directory = counted.plane.principals
    monkeypatch.setattr(directory, "joined", lambda principals: directory)
    reads = (
        "/v1/schedules",
        f"/v1/schedules/{made['id']}",
        f"/v1/schedules/{made['id']}/occurrences",
    )
    for path in reads:
        counted.reset()
        answer = await counted.client.get(path, headers=counted.auth)
        assert answer.status_code == 200, (path, answer.text)
        assert counted.counts["principal_reads"] == 1, path
        assert counted.counts["transactions"] == 2, path


async def test_the_counters_see_a_second_principal_read(counted: Counted) -> None:
    """Test of the test: the service without the edge's snapshot (as the model tools
    call it) reads the principal itself, and the counter shows it."""
    await _create(counted, "warm")
    principal = await counted.plane.principals.current(OWNER.tenant_id, OWNER.principal_id)
    assert principal is not None
    counted.reset()
    from_tool = CreateScheduleBody.model_validate(body(title="counted")).to_definition()
    await counted.plane.service.create(OWNER, "tool-path", from_tool)
    assert counted.counts["principal_reads"] == 1  # no edge read here: the service's own
    assert counted.counts["transactions"] == 2
    counted.reset()
    await counted.plane.service.create(OWNER, "tool-path-2", from_tool, authority=principal)
    assert counted.counts["principal_reads"] == 0
    assert counted.counts["transactions"] == 1


async def test_the_counters_see_the_agent_pinned_in_its_own_unit_of_work(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: a registry that ignores the write's unit of work (``joined``
    returns itself, so the pin opens its own transaction, as before ADR 2310) shows as
    a second unit of work."""
    await _create(counted, "warm")
    registry = counted.plane.api.agents
    monkeypatch.setattr(registry, "joined", lambda agents: registry)
    counted.reset()
    answer = await _create(counted, "pinned-apart")
    assert answer.status_code == 201, answer.text
    assert counted.counts["transactions"] == 2


async def test_update_locks_validates_and_writes_in_one_unit_of_work(counted: Counted) -> None:
    made = await _create(counted, "to-update")
    assert made.status_code == 201, made.text
    counted.reset()
    answer = await counted.client.patch(
        f"/v1/schedules/{made.json()['id']}",
        json={**body(title="Renamed"), "expected_revision": 1},
        headers={**counted.auth, "Idempotency-Key": "update-once"},
    )
    assert answer.status_code == 200, answer.text
    assert counted.counts["principal_reads"] == 1
    # Authentication; the keyed replay look-up; the write (row lock, the look-up again
    # under it, current revision, agent pin, CAS, revision, key, event, wake-up at
    # COMMIT; ADR 2310), whose revision answers the response. Before: 6 (an unlocked
    # read, the agent read and the response's revision read of their own).
    assert counted.counts["transactions"] == 3
    assert answer.json()["current_revision"] == 2
    assert answer.json()["title"] == "Renamed"


async def test_get_and_occurrences_count_their_statements(counted: Counted) -> None:
    made = (await _create(counted, "statements")).json()
    counted.reset()
    answer = await counted.client.get(f"/v1/schedules/{made['id']}", headers=counted.auth)
    assert answer.status_code == 200
    # The principal; the schedule with its current revision, one read (ADR 2420: was 3).
    assert counted.counts["statements"] == 2
    counted.reset()
    inbox = await counted.client.get(
        f"/v1/schedules/{made['id']}/occurrences", headers=counted.auth
    )
    assert inbox.status_code == 200
    assert counted.counts["transactions"] == 1  # ADR 2380: was 2
    # The principal; the repository's owner check (its contract refuses another's
    # schedule; the service's own schedule read before it is gone, ADR 2380); the page.
    assert counted.counts["statements"] == 3


async def test_an_access_line_costs_no_scan_unless_it_holds_client_text(
    counted: Counted,
) -> None:
    """ADR 2300, with the process's log handler on the access logger: a line of the
    server's own fields is written unscanned; an offered request id (client text) makes
    it scanned, which is also this count's test of the test."""
    stream = io.StringIO()
    handler = ProcessLogHandler(stream)
    access = logging.getLogger("scheduling.http.access")
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        await counted.client.get("/v1/schedules", headers=counted.auth)  # warm
        counted.reset()
        assert (await counted.client.get("/v1/schedules", headers=counted.auth)).is_success
        assert counted.counts["secret_scans"] == 0
        offered = {**counted.auth, "X-Request-Id": "client-7"}
        assert (await counted.client.get("/v1/schedules", headers=offered)).is_success
        assert counted.counts["secret_scans"] == 1
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
        handler.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert "request_id=client-7" in lines[-1]


async def _link_runs(pg_url: str, schedule_id: str, n: int, *, after: int = 0) -> None:
    """``n`` materialized occurrences of the schedule, each with its own session and run,
    hourly from ``after + 1`` hours before the world's start."""
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    sid = UUID(schedule_id)
    ids = SeededIds(f"{schedule_id}-{after}")
    try:
        async with admin.begin() as uow:
            for i in range(n):
                at = START - timedelta(hours=after + i + 1)
                session = SessionRecord(
                    id=ids.new_uuid(),
                    tenant_id=OWNER.tenant_id,
                    principal_id=OWNER.principal_id,
                    agent_id=AGENT_ID,
                    agent_version=AGENT_VERSION,
                    metadata={"schedule_id": schedule_id, "schedule_revision": 1},
                    created_at=at,
                    updated_at=at,
                )
                run = RunRecord(
                    id=ids.new_uuid(),
                    tenant_id=OWNER.tenant_id,
                    principal_id=OWNER.principal_id,
                    session_id=session.id,
                    agent_id=AGENT_ID,
                    agent_version=AGENT_VERSION,
                    policy_profile=POLICY,
                    status=RunStatus.QUEUED,
                    priority=10,
                    scheduled_for=at,
                    requested_scopes=frozenset({"memory.read"}),
                    limits={"max_steps": 10},
                    created_at=at,
                    updated_at=at,
                )
                await uow.sessions.create(session)
                await uow.runs.create(run)
                await uow.occurrences.insert(
                    ScheduleOccurrence(
                        id=ids.new_uuid(),
                        schedule_id=sid,
                        schedule_revision=1,
                        nominal_fire_at=at,
                        disposition=OccurrenceDisposition.MATERIALIZED,
                        session_id=session.id,
                        run_id=run.id,
                        reason_code=None,
                        authority_version="av-1",
                        materialized_at=at,
                        links_erased_at=None,
                        created_at=at,
                    )
                )
            await uow.commit()
    finally:
        await admin.dispose()


async def _page_statements(world: Counted, schedule_id: str, linked: int) -> int:
    world.reset()
    inbox = await world.client.get(f"/v1/schedules/{schedule_id}/occurrences", headers=world.auth)
    assert inbox.status_code == 200, inbox.text
    items = inbox.json()["items"]
    assert sum(item["run"] is not None for item in items) == linked
    assert world.counts["transactions"] == 1
    return world.counts["statements"]


async def test_occurrences_read_their_linked_runs_once(counted: Counted, pg_url: str) -> None:
    """The page's linked runs are one read (ADR 2390): the principal, the owner check,
    the page, the runs, whether the page links one run or three."""
    made = (await _create(counted, "linked")).json()
    await _link_runs(pg_url, made["id"], 1)
    assert await _page_statements(counted, made["id"], 1) == 4
    await _link_runs(pg_url, made["id"], 2, after=1)
    assert await _page_statements(counted, made["id"], 3) == 4


async def test_the_counters_see_one_run_read_per_row(
    counted: Counted, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: the per-row reads before ADR 2390 (a point read per linked
    run) show as one statement per run on the same page."""

    async def per_row(
        self: PostgresRunRepository, run_ids: Collection[UUID], principal: Any
    ) -> dict[UUID, RunRecord]:
        return {run_id: await self.get(run_id, principal) for run_id in run_ids}

    monkeypatch.setattr(PostgresRunRepository, "get_many", per_row)
    made = (await _create(counted, "per-row")).json()
    await _link_runs(pg_url, made["id"], 3)
    assert await _page_statements(counted, made["id"], 3) == 3 + 3
