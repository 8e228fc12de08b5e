"""Gate checks of the persistence layer on real PostgreSQL.

gate.schedule.persistence_schema, uow_atomic, erasure_audited, persistence_isolated.
The structural check is a function returning problems; the check runs it against
the migrated schema (must be empty) and then against the same schema with one
constraint, index, policy or trigger removed at a time, inside a rolled-back
transaction (each mutation must be reported), so the check is shown able to fail.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from gates.checks.persistence_support import (
    ALICE,
    BOB,
    MALLORY,
    OWNED_TABLES,
    OWNERS,
    T0,
    PersistenceWorld,
    admin_connection,
    row_counts,
    seeded_world,
    table_snapshot,
    tables_containing,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import (
    AuthorizationError,
    ConflictError,
    NotFoundError,
    UnavailableError,
)
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.domain.paging import PageRequest
from scheduling.domain.schedule import ScheduleState
from scheduling.ports.records import (
    ErasureResult,
    IdempotencyEntry,
    ProcessEvent,
    RunCheckpoint,
    SessionEvent,
)
from scheduling.ports.repositories import FORBIDDEN, MISSING_REFERENCE, ScheduleCommand
from scheduling.ports.runtime import QueueCapacity
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.runtime.scripted import ANSWER
from scheduling.service.sessions import SessionErasureService
from scheduling.testing import (
    REQUIRED_INDEXES,
    TENANT_TABLES,
    PostgresUnitOfWorkFactory,
    metadata,
    role_names,
    schema_problems,
    sqlstate_of,
)
from simulation.worlds.materialize import WHO as HARNESS_OWNER
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_worker, submission, submitter

ROLES = role_names()
OCC = "schedule_occurrences"

# (what is broken, DDL that breaks it, a phrase the problem report must contain)
SCHEMA_MUTATIONS: tuple[tuple[str, list[str], str], ...] = (
    (
        "occurrence natural key dropped",
        [f"ALTER TABLE {OCC} DROP CONSTRAINT uq_schedule_occurrences_schedule_id_nominal_fire_at"],
        "UNIQUE (schedule_id, nominal_fire_at) missing",
    ),
    (
        "one-run-one-occurrence index dropped",
        ["DROP INDEX uq_schedule_occurrences_run_id"],
        "uq_schedule_occurrences_run_id",
    ),
    (
        "one-run-one-occurrence index no longer unique",
        [
            "DROP INDEX uq_schedule_occurrences_run_id",
            f"CREATE INDEX uq_schedule_occurrences_run_id ON {OCC} (run_id)"
            " WHERE run_id IS NOT NULL",
        ],
        "uq_schedule_occurrences_run_id uniqueness differs",
    ),
    (
        "session link made immediate",
        [
            f"ALTER TABLE {OCC} ALTER CONSTRAINT fk_schedule_occurrences_session_id_sessions"
            " NOT DEFERRABLE"
        ],
        "DEFERRABLE INITIALLY DEFERRED",
    ),
    (
        "run link cascades into history",
        [
            f"ALTER TABLE {OCC} DROP CONSTRAINT fk_schedule_occurrences_run_id_runs",
            f"ALTER TABLE {OCC} ADD CONSTRAINT fk_schedule_occurrences_run_id_runs FOREIGN KEY"
            " (run_id) REFERENCES runs(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED",
        ],
        "ON DELETE",
    ),
    (
        "materialized link rule dropped",
        [f"ALTER TABLE {OCC} DROP CONSTRAINT ck_schedule_occurrences_materialized_links"],
        "accepts MATERIALIZED",
    ),
    (
        "unlinked rule weakened (reason code no longer required)",
        [
            f"ALTER TABLE {OCC} DROP CONSTRAINT ck_schedule_occurrences_unlinked_dispositions",
            f"ALTER TABLE {OCC} ADD CONSTRAINT ck_schedule_occurrences_unlinked_dispositions"
            " CHECK (disposition = 'MATERIALIZED' OR (session_id IS NULL AND run_id IS NULL))",
        ],
        "accepts MISSED",
    ),
    (
        "erasure evidence column dropped",
        [f"ALTER TABLE {OCC} DROP COLUMN links_erased_at CASCADE"],
        "links_erased_at: column missing",
    ),
    (
        "state/pause_reason rule dropped",
        ["ALTER TABLE schedules DROP CONSTRAINT ck_schedules_pause_reason_matches_state"],
        "schedules accepts",
    ),
    (
        "tenant column made nullable",
        ["ALTER TABLE schedules ALTER COLUMN tenant_id DROP NOT NULL"],
        "schedules.tenant_id: nullability differs",
    ),
    (
        "idempotency primary key dropped",
        ["ALTER TABLE schedule_idempotency_keys DROP CONSTRAINT pk_schedule_idempotency_keys"],
        "primary key pk_schedule_idempotency_keys missing",
    ),
    (
        "immutable revision reference dropped",
        [f"ALTER TABLE {OCC} DROP CONSTRAINT fk_schedule_occurrences_revision"],
        "no reference to its immutable revision",
    ),
    (
        "revision immutability trigger dropped",
        ["DROP TRIGGER schedule_revisions_immutable ON schedule_revisions"],
        "revisions are immutable",
    ),
    (
        "due-scan index dropped",
        ["DROP INDEX ix_schedules_state_next_fire_at"],
        "(state, next_fire_at)",
    ),
    (
        "listing index dropped",
        ["DROP INDEX ix_schedules_tenant_id_principal_id_updated_at_id"],
        "(tenant_id, principal_id, updated_at, id)",
    ),
    (
        "history index dropped",
        ["DROP INDEX ix_schedule_occurrences_history"],
        "nominal_fire_at DESC",
    ),
    (
        "retention index no longer partial",
        [
            "DROP INDEX ix_schedules_terminal_retention",
            "CREATE INDEX ix_schedules_terminal_retention ON schedules (tenant_id, updated_at, id)",
        ],
        "ix_schedules_terminal_retention",
    ),
    (
        "row-level security disabled",
        ["ALTER TABLE schedules DISABLE ROW LEVEL SECURITY"],
        "schedules: row-level security not enabled",
    ),
    (
        "row-level security not forced",
        [f"ALTER TABLE {OCC} NO FORCE ROW LEVEL SECURITY"],
        f"{OCC}: row-level security not forced",
    ),
    (
        "API policy dropped",
        ["DROP POLICY schedule_idempotency_keys_api ON schedule_idempotency_keys"],
        "schedule_idempotency_keys: no row-level policy",
    ),
    (
        "a policy granted to PUBLIC",
        ["CREATE POLICY schedules_everyone ON schedules FOR SELECT TO PUBLIC USING (true)"],
        "schedules: policy schedules_everyone applies to PUBLIC",
    ),
    (
        "API policy lets the role see every row",
        [
            "DROP POLICY sessions_api ON sessions",
            f"CREATE POLICY sessions_api ON sessions FOR ALL TO {ROLES.api} USING (true)",
        ],
        "lets",
    ),
)


async def _problems(conn: Any) -> list[str]:
    result: list[str] = await conn.run_sync(schema_problems, ROLES.api)
    return result


@pytest.mark.gate("gate.schedule.persistence_schema")
async def test_schema_encodes_trust_boundaries(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with admin_connection(pg_url) as conn:
        problems = await _problems(conn)
        await conn.rollback()
        assert problems == [], problems
        tables = [t.name for t in metadata.sorted_tables]
        gate_evidence.record("tables_inspected", tables)
        gate_evidence.record(
            "constraints_checked",
            sorted(str(c.name) for t in metadata.sorted_tables for c in t.constraints),
        )
        gate_evidence.record("indexes_required", [name for _, name, _, _ in REQUIRED_INDEXES])
        gate_evidence.record("rls_enabled_and_forced", list(TENANT_TABLES))
        gate_evidence.record("link_rule_combinations_evaluated", 5 * 2**6)
        for label, statements, phrase in SCHEMA_MUTATIONS:
            async with conn.begin():
                for statement in statements:
                    await conn.execute(text(statement))
                broken = await _problems(conn)
                await conn.rollback()
            assert any(phrase in p for p in broken), (label, broken)
            gate_evidence.append("mutations_detected", {"mutation": label, "reported": broken[:3]})
        # The rollbacks restored the schema.
        assert await _problems(conn) == []


# --------------------------------------------------------------------------- uow_atomic


async def _write_everything(
    uow: UnitOfWork, world: PersistenceWorld, steps: int | None = None
) -> int:
    """The writes of a create + materialize + update, in order; stop after ``steps``."""
    owner = ALICE
    w = PersistenceWorld(counter=1000)
    o = PersistenceWorld(counter=2000).build_owner(owner)
    schedule1 = o.schedule.model_copy(update={"current_revision": 1, "id": w.uuid()})
    rev1 = w.revision(schedule1.id, 1, owner)
    rev2 = w.revision(schedule1.id, 2, owner)
    schedule2 = schedule1.model_copy(update={"current_revision": 2})
    session = replace(o.session, id=w.uuid(), metadata={"schedule_id": str(schedule1.id)})
    run = replace(o.run, id=w.uuid(), session_id=session.id)
    occurrence = o.materialized.model_copy(
        update={
            "id": w.uuid(),
            "schedule_id": schedule1.id,
            "schedule_revision": 1,
            "session_id": session.id,
            "run_id": run.id,
        }
    )
    writes: list[Callable[[], Awaitable[object]]] = [
        lambda: uow.schedules.create(schedule1, rev1),
        lambda: uow.idempotency.record(
            IdempotencyEntry("tenant-a", "alice", "atomic-key", "sha256:a", schedule1.id, T0)
        ),
        lambda: uow.occurrences.insert(occurrence),
        lambda: uow.sessions.create(session),
        lambda: uow.runs.create(run),
        lambda: uow.events.append(
            ProcessEvent(
                w.uuid(), "tenant-a", "alice", "schedule.created", "api", {}, T0, schedule1.id
            )
        ),
        lambda: uow.schedules.mutate(
            ScheduleCommand(expected=schedule1, updated=schedule2, revision=rev2)
        ),
    ]
    assert len(writes) == ATOMIC_WRITES
    for write in writes[:steps]:
        await write()
    return len(writes)


ATOMIC_WRITES = 7


class _Crash(Exception):
    pass


@pytest.mark.gate("gate.schedule.uow_atomic")
async def test_repositories_commit_or_roll_back_together(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=3)
    await check_uow_atomic(pg_url, factory, gate_evidence)


async def check_uow_atomic(
    pg_url: str, factory: PostgresUnitOfWorkFactory, gate_evidence: GateEvidence
) -> None:
    """Every repository's writes commit or roll back together (disposes ``factory``)."""
    world = await seeded_world(pg_url)
    try:
        before = await table_snapshot(pg_url)
        # A crash after every single write leaves nothing behind.
        for steps in range(1, ATOMIC_WRITES + 1):

            async def crash_after(n: int = steps) -> None:
                async with factory.begin() as uow:
                    await _write_everything(uow, world, n)
                    raise _Crash

            with pytest.raises(_Crash):
                await crash_after()
            assert await table_snapshot(pg_url) == before, f"partial state after write {steps}"
            gate_evidence.append("crash_after_write", steps)
        # A deferred link that is missing at commit fails the whole transaction.
        async with factory.begin() as uow:
            await _write_everything(uow, world)
            dangling = world.of(BOB).missed.model_copy(
                update={
                    "id": world.uuid(),
                    "nominal_fire_at": T0 + timedelta(days=5),
                    "disposition": OccurrenceDisposition.MATERIALIZED,
                    "reason_code": None,
                    "materialized_at": T0 + timedelta(days=5),
                    "authority_version": "av-1",
                    "session_id": world.uuid(),
                    "run_id": world.uuid(),
                    "schedule_revision": 2,
                }
            )
            await uow.occurrences.insert(dangling)
            with pytest.raises(ConflictError) as caught:
                await uow.commit()
        assert caught.value.code == MISSING_REFERENCE
        assert await table_snapshot(pg_url) == before
        gate_evidence.record("deferred_violation_rolled_back", True)
        # A backend killed mid-transaction loses everything it wrote.
        async with factory.begin() as uow:
            await _write_everything(uow, world)
            pid = (await uow.tx.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            async with admin_connection(pg_url) as admin:
                await admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                await admin.commit()
            with pytest.raises(UnavailableError):
                await uow.commit()
        assert await table_snapshot(pg_url) == before
        gate_evidence.record("killed_backend_rolled_back", True)
        # Uncommitted writes are invisible to others; committed ones appear all at once.
        async with factory.begin() as uow:
            await _write_everything(uow, world)
            async with factory.begin() as other:
                assert (await other.schedules.list(ALICE, PageRequest(limit=50))).items == [
                    world.of(ALICE).schedule
                ]
                assert await other.idempotency.lookup(ALICE, "atomic-key") is None
            await uow.commit()
        after = await row_counts(pg_url)
        grown = {t: after[t] - len(before[t]) for t in OWNED_TABLES if after[t] != len(before[t])}
        assert grown == {
            "schedules": 1,
            "schedule_revisions": 2,
            "schedule_idempotency_keys": 1,
            "schedule_occurrences": 1,
            "sessions": 1,
            "runs": 1,
            "process_events": 1,
        }, grown
        gate_evidence.record("rows_committed_together", grown)
    finally:
        await factory.dispose()


# --------------------------------------------------------------------------- erasure


async def _find_marker(url: str, marker: str) -> list[str]:
    """Tables in which any row's text contains ``marker``."""
    async with admin_connection(url) as conn:
        found = []
        for table in metadata.sorted_tables:
            sql = f"SELECT count(*) FROM {table.name} t WHERE t::text LIKE :m"
            if (await conn.execute(text(sql), {"m": f"%{marker}%"})).scalar_one():
                found.append(table.name)
        return found


@pytest.mark.gate("gate.schedule.erasure_audited")
async def test_session_erasure_keeps_an_explicit_occurrence_audit_state(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await check_erasure_audited(pg_url, gate_evidence)


async def check_erasure_audited(pg_url: str, gate_evidence: GateEvidence) -> None:
    """Erasure through the API role marks the occurrence, then deletes the graph."""
    world = await seeded_world(pg_url)
    api = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=ROLES.api, pool_size=2)
    alice, bob, mallory = world.of(ALICE), world.of(BOB), world.of(MALLORY)
    try:
        assert set(await _find_marker(pg_url, alice.marker)) == {
            "session_events",
            "run_checkpoints",
        }
        others_before = {
            p.principal_id + "@" + p.tenant_id: await _owner_rows(pg_url, world, p)
            for p in (BOB, MALLORY)
        }
        erased_at = T0 + timedelta(days=3)
        async with api.begin(ALICE) as uow:
            result = await uow.sessions.erase(alice.session.id, ALICE, erased_at)
            await uow.commit()
        gate_evidence.record(
            "erasure",
            {
                "occurrences_marked": result.occurrences_marked,
                "runs_deleted": result.runs_deleted,
                "events_deleted": result.events_deleted,
                "role": ROLES.api,
            },
        )
        assert (result.occurrences_marked, result.runs_deleted, result.events_deleted) == (1, 1, 2)
        async with admin_connection(pg_url) as conn:
            row = (
                await conn.execute(
                    text("SELECT * FROM schedule_occurrences WHERE id = :i"),
                    {"i": alice.materialized.id},
                )
            ).one()
        assert row.disposition == "MATERIALIZED"
        assert (row.session_id, row.run_id, row.links_erased_at) == (None, None, erased_at)
        assert (row.materialized_at, row.authority_version) == (T0, "av-7")
        # Erased content is gone from every table; the audit facts remain.
        assert await _find_marker(pg_url, alice.marker) == []
        counts = await _owner_rows(pg_url, world, ALICE)
        assert counts["sessions"] == counts["session_events"] == counts["runs"] == 0
        assert counts["run_checkpoints"] == 0
        assert counts["schedules"] == 1
        assert counts["schedule_revisions"] == 2
        assert counts["schedule_occurrences"] == 2
        assert counts["process_events"] == 1
        gate_evidence.record("alice_rows_after_erasure", counts)
        for p in (BOB, MALLORY):
            assert (
                await _owner_rows(pg_url, world, p)
                == others_before[p.principal_id + "@" + p.tenant_id]
            )

        # Erasure is atomic: a failure after marking leaves the live link and the graph.
        async def erase_then_fail() -> None:
            async with api.begin(BOB) as uow:
                await uow.sessions.erase(bob.session.id, BOB, erased_at)
                raise _Crash

        with pytest.raises(_Crash):
            await erase_then_fail()
        async with api.begin(BOB) as uow:
            kept = await uow.occurrences.get(bob.materialized.id, BOB)
            assert (kept.session_id, kept.run_id, kept.links_erased_at) == (
                bob.session.id,
                bob.run.id,
                None,
            )
            assert (await uow.sessions.get(bob.session.id, BOB)).id == bob.session.id
        gate_evidence.record("failed_erasure_left_live_link", True)
        # No shortcut: deleting a session without marking its occurrence is refused, so a
        # generic null link can never be mistaken for erasure or a failed materialization.
        async with admin_connection(pg_url) as conn:
            with pytest.raises(DBAPIError) as refused:
                await conn.execute(
                    text("DELETE FROM sessions WHERE id = :i"), {"i": mallory.session.id}
                )
            await conn.rollback()
        assert sqlstate_of(refused.value) == "23514", refused.value
        gate_evidence.record("unmarked_session_delete_refused_sqlstate", "23514")
        assert await _owner_rows(pg_url, world, MALLORY) == others_before["alice@tenant-b"]
    finally:
        await api.dispose()


async def _owner_rows(url: str, world: PersistenceWorld, owner: Any) -> dict[str, int]:
    """Row counts of one owner's graph, by ids (admin view)."""
    o = world.of(owner)
    queries = {
        "schedules": ("SELECT count(*) FROM schedules WHERE id = :s", {"s": o.schedule.id}),
        "schedule_revisions": (
            "SELECT count(*) FROM schedule_revisions WHERE schedule_id = :s",
            {"s": o.schedule.id},
        ),
        "schedule_occurrences": (
            "SELECT count(*) FROM schedule_occurrences WHERE schedule_id = :s",
            {"s": o.schedule.id},
        ),
        "process_events": (
            "SELECT count(*) FROM process_events WHERE schedule_id = :s",
            {"s": o.schedule.id},
        ),
        "sessions": ("SELECT count(*) FROM sessions WHERE id = :x", {"x": o.session.id}),
        "session_events": (
            "SELECT count(*) FROM session_events WHERE session_id = :x",
            {"x": o.session.id},
        ),
        "runs": ("SELECT count(*) FROM runs WHERE id = :r", {"r": o.run.id}),
        "run_checkpoints": (
            "SELECT count(*) FROM run_checkpoints WHERE run_id = :r",
            {"r": o.run.id},
        ),
    }
    async with admin_connection(url) as conn:
        return {
            name: int((await conn.execute(text(sql), params)).scalar_one())
            for name, (sql, params) in queries.items()
        }


# ------------------------------------------- erasure of a really materialized run

Eraser = Callable[[MaterializeWorld, UUID], Awaitable[ErasureResult]]


async def erase_through_service(h: MaterializeWorld, session_id: UUID) -> ErasureResult:
    """The session delete route's service, through the API role, as the owner."""
    return await SessionErasureService(h.api, h.clock).erase(HARNESS_OWNER, session_id)


@pytest.mark.gate("gate.schedule.erasure_audited")
async def test_erasure_of_a_materialized_and_executed_occurrence(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await check_real_erasure(pg_url, gate_evidence)


async def check_real_erasure(
    pg_url: str, gate_evidence: GateEvidence, erase: Eraser = erase_through_service
) -> None:
    """The real materializer (one strict worker scan) and the real run worker produce
    the graph; the real erasure service erases it. The occurrence keeps its audit facts,
    the session's whole graph is gone, its content survives nowhere (the instruction
    only in the schedule's own revision), and the schedule history is untouched. A
    session no occurrence links (an on-demand run of the owner's) is erased whole too."""
    marker = f"erasure-probe-{secrets.token_hex(6)}"
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(key="erased", instruction=f"Brief me on {marker}. [script:succeed]")
        other = await h.create(
            key="kept",
            instruction="Another schedule's work.",
            cadence={"kind": "DAILY", "local_time": "11:00", "timezone": "Europe/Paris"},
        )
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        await h.scan()
        runner = run_worker(h.admin, h.clock, "eraser-run", capacity=QueueCapacity(4, 1, 1))
        executed = 0
        while await runner.run_once() is not None:
            executed += 1
        assert executed == 1
        # Another schedule's occurrence (run left queued) and a later, missed occurrence
        # of the erased schedule: history erasure must not touch.
        h.clock.advance_to(await h.next_fire(other) + timedelta(seconds=1))
        await h.scan()
        h.clock.advance_to(await h.next_fire(sid) + timedelta(minutes=20))
        await h.scan()
        ledger = await h.ledger()
        mine = ledger.of(sid)
        assert [o["disposition"] for o in mine.occurrences] == ["MATERIALIZED", "MISSED"]
        target = mine.occurrences[0]
        session_id, run_id = target["session_id"], target["run_id"]
        assert mine.runs[0]["status"] == "COMPLETED"
        kinds = {e["event_type"] for e in mine.session_events}
        assert {"message.user", "message.assistant"} <= kinds, kinds
        assert mine.checkpoints, "the run wrote no checkpoint"
        before_marker = await tables_containing(pg_url, marker)
        before_answer = await tables_containing(pg_url, ANSWER)
        assert "session_events" in before_marker  # the seed message holds the instruction
        assert "session_events" in before_answer  # the run's output
        history = await _history(h, exclude=target["id"])
        graph_events = len(mine.session_events)

        h.clock.advance(3600)
        erased_at = h.clock.now()
        result = await erase(h, session_id)

        assert (result.occurrences_marked, result.runs_deleted, result.events_deleted) == (
            1,
            1,
            graph_events,
        )
        row = (await h.sql("SELECT * FROM schedule_occurrences WHERE id = :i", i=target["id"]))[0]
        assert row["disposition"] == "MATERIALIZED"
        assert (row["session_id"], row["run_id"], row["links_erased_at"]) == (None, None, erased_at)
        kept = ("materialized_at", "authority_version", "nominal_fire_at", "schedule_revision")
        assert {k: row[k] for k in kept} == {k: target[k] for k in kept}
        assert row["materialized_at"] is not None
        assert row["authority_version"]
        gone = {
            "sessions": await h.sql("SELECT id FROM sessions WHERE id = :s", s=session_id),
            "session_events": await h.sql(
                "SELECT seq FROM session_events WHERE session_id = :s", s=session_id
            ),
            "runs": await h.sql("SELECT id FROM runs WHERE id = :r", r=run_id),
            "run_checkpoints": await h.sql(
                "SELECT seq FROM run_checkpoints WHERE run_id = :r", r=run_id
            ),
        }
        assert all(rows == [] for rows in gone.values()), gone
        # No erased content anywhere: the instruction survives only as the schedule's
        # own definition (history), the run's output nowhere.
        after_marker = await tables_containing(pg_url, marker)
        after_answer = await tables_containing(pg_url, ANSWER)
        assert after_marker == {"schedule_revisions"}, f"instruction kept in {after_marker}"
        assert after_answer == set(), f"run output kept in {after_answer}"
        changed = {
            k: v for k, v in (await _history(h, exclude=target["id"])).items() if v != history[k]
        }
        assert not changed, f"schedule history changed by the erasure: {sorted(changed)}"
        # A session no occurrence links (the owner's on-demand run) is erased whole too:
        # with nothing to mark, its graph still goes.
        adhoc = await submitter(h.admin, h.clock).submit(HARNESS_OWNER, submission("succeed"))
        unlinked = await erase(h, adhoc.session_id)
        assert (unlinked.occurrences_marked, unlinked.runs_deleted) == (0, 1), unlinked
        left = {
            "sessions": await h.sql("SELECT id FROM sessions WHERE id = :s", s=adhoc.session_id),
            "session_events": await h.sql(
                "SELECT seq FROM session_events WHERE session_id = :s", s=adhoc.session_id
            ),
            "runs": await h.sql("SELECT id FROM runs WHERE id = :r", r=adhoc.id),
            "run_checkpoints": await h.sql(
                "SELECT seq FROM run_checkpoints WHERE run_id = :r", r=adhoc.id
            ),
        }
        assert all(rows == [] for rows in left.values()), left
        gate_evidence.record(
            "materialized_executed_erased",
            {
                "produced_by": "ScheduleWorker scan + RunWorker (scripted succeed)",
                "erased_through": "SessionErasureService (API role)",
                "erasure": {
                    "occurrences_marked": result.occurrences_marked,
                    "runs_deleted": result.runs_deleted,
                    "events_deleted": result.events_deleted,
                },
                "instruction_tables_before": sorted(before_marker),
                "instruction_tables_after": sorted(after_marker),
                "output_tables_before": sorted(before_answer),
                "output_tables_after": sorted(after_answer),
                "history_rows_unchanged": {k: len(v) for k, v in history.items()},
            },
        )
    finally:
        await h.close()


async def _history(h: MaterializeWorld, *, exclude: UUID) -> dict[str, list[dict[str, Any]]]:
    """The schedule history erasure must leave alone (all but the erased occurrence),
    plus the other schedule's live graph."""
    return {
        "schedules": await h.sql("SELECT * FROM schedules ORDER BY id"),
        "schedule_revisions": await h.sql(
            "SELECT * FROM schedule_revisions ORDER BY schedule_id, revision"
        ),
        "other_occurrences": await h.sql(
            "SELECT * FROM schedule_occurrences WHERE id <> :x ORDER BY id", x=exclude
        ),
        "process_events": await h.sql("SELECT * FROM process_events ORDER BY id"),
        "other_sessions": await h.sql(
            "SELECT s.* FROM sessions s JOIN schedule_occurrences o ON o.session_id = s.id"
            " WHERE o.id <> :x ORDER BY s.id",
            x=exclude,
        ),
        "other_runs": await h.sql(
            "SELECT r.* FROM runs r JOIN schedule_occurrences o ON o.run_id = r.id"
            " WHERE o.id <> :x ORDER BY r.id",
            x=exclude,
        ),
    }


# --------------------------------------------------------------------------- isolation

# Statements without any tenant or principal predicate: RLS alone must confine them.
_BLIND_WRITES = (
    "UPDATE schedules SET consecutive_failures = consecutive_failures + 1",
    "UPDATE runs SET priority = priority + 1",
    "UPDATE sessions SET title = 'overwritten'",
    "DELETE FROM session_events",
    "DELETE FROM run_checkpoints",
)
# Blind writes the API role is granted (the occurrence link columns): RLS must confine
# each to exactly the writer's own rows (the row count tells, whatever the content).
_CONFINED_WRITES = {
    "UPDATE schedule_occurrences SET run_id = run_id, session_id = session_id": (
        "schedule_occurrences"
    ),
}
# Blind writes the API role is not granted at all: each must be refused outright.
_REFUSED_WRITES = (
    "UPDATE schedule_occurrences SET disposition = 'MISSED'",
    "DELETE FROM schedule_occurrences",
    "UPDATE schedule_idempotency_keys SET request_hash = 'forged'",
    "DELETE FROM schedule_idempotency_keys",
    "UPDATE process_events SET event_type = 'forged'",
    "DELETE FROM process_events",
    "UPDATE schedule_revisions SET revision = revision + 100",
    "DELETE FROM schedule_revisions",
)


@pytest.mark.gate("gate.schedule.persistence_isolated")
async def test_api_role_sees_and_changes_only_its_own_rows(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await check_isolation(pg_url, gate_evidence)


async def check_isolation(pg_url: str, gate_evidence: GateEvidence) -> None:
    """As the API role, cross-tenant and cross-principal access sees and changes nothing."""
    world = await seeded_world(pg_url)
    api = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=ROLES.api, pool_size=2)
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with admin_connection(pg_url) as conn:
            attrs = (
                await conn.execute(
                    text(
                        "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles"
                        " WHERE rolname = ANY(:r)"
                    ),
                    {"r": list(ROLES.all())},
                )
            ).all()
        assert len(attrs) == 4
        assert not any(r.rolsuper or r.rolbypassrls for r in attrs)
        gate_evidence.record("roles_checked", sorted(r.rolname for r in attrs))
        per_owner = {t: 1 for t in OWNED_TABLES} | {
            "schedule_revisions": 2,
            "schedule_occurrences": 2,
            "session_events": 2,
        }
        for viewer in OWNERS:
            others = [p for p in OWNERS if p != viewer]
            async with api.begin(viewer) as uow:
                for table in OWNED_TABLES:
                    sql = f"SELECT count(*) FROM {table}"
                    seen = (await uow.tx.execute(text(sql))).scalar_one()
                    assert seen == per_owner[table], (viewer, table, seen)
                await _foreign_reads_hidden(uow, viewer, world)
                for other in others:
                    o = world.of(other)
                    assert await uow.events.for_schedule(o.schedule.id) == []
                    # Even a trusted-path read (no principal predicate) sees nothing.
                    with pytest.raises(NotFoundError):
                        await uow.schedules.get(o.schedule.id, None)
            # The repository predicates alone (an admin login bypasses RLS) hide them too.
            async with admin.begin(viewer) as uow:
                await _foreign_reads_hidden(uow, viewer, world)
            gate_evidence.append("viewers", f"{viewer.principal_id}@{viewer.tenant_id}")
        gate_evidence.record("repository_predicates_checked_without_rls", True)
        # Blind writes by alice change only alice's rows.
        before = {
            f"{p.principal_id}@{p.tenant_id}": await _owner_snapshot(pg_url, world, p)
            for p in (BOB, MALLORY)
        }
        async with api.begin(ALICE) as uow:
            for statement in _BLIND_WRITES:
                changed = (await uow.tx.execute(text(statement))).rowcount
                gate_evidence.append("blind_writes", {"sql": statement, "rows": changed})
                assert changed >= 1
            for statement, table in _CONFINED_WRITES.items():
                changed = (await uow.tx.execute(text(statement))).rowcount
                gate_evidence.append("blind_writes", {"sql": statement, "rows": changed})
                assert changed == per_owner[table], (statement, changed, per_owner[table])
            await uow.commit()
        for statement in _REFUSED_WRITES:
            async with api.begin(ALICE) as uow:
                with pytest.raises(AuthorizationError) as refused:
                    await uow.tx.execute(text(statement))
            assert refused.value.code == FORBIDDEN, (statement, refused.value)
            gate_evidence.append("blind_writes_refused", statement)
        for p in (BOB, MALLORY):
            assert (
                await _owner_snapshot(pg_url, world, p) == before[f"{p.principal_id}@{p.tenant_id}"]
            ), p
        # Writing a row for another tenant or principal is refused by the policy.
        foreign = world.of(MALLORY)
        moved = world.of(ALICE).schedule
        forged_id = world.uuid()
        attempts: list[Callable[[UnitOfWork], Awaitable[object]]] = [
            lambda u: u.schedules.create(
                foreign.schedule.model_copy(update={"id": forged_id, "current_revision": 1}),
                world.revision(forged_id, 1, MALLORY),
            ),
            lambda u: u.tx.execute(  # type: ignore[attr-defined]
                text("UPDATE schedules SET tenant_id = 'tenant-b' WHERE id = :i"),
                {"i": moved.id},
            ),
            lambda u: u.idempotency.record(
                IdempotencyEntry("tenant-a", "bob", "k", "h", world.of(BOB).schedule.id, T0)
            ),
            lambda u: u.events.append(
                ProcessEvent(world.uuid(), "tenant-b", "alice", "x", "api", {}, T0)
            ),
            # A session of another principal, and rows appended under another
            # principal's schedule, session or run (the child policies' WITH CHECK).
            lambda u: u.sessions.create(
                replace(world.of(ALICE).session, id=world.uuid(), principal_id="bob")
            ),
            lambda u: u.sessions.append_event(
                SessionEvent(world.of(BOB).session.id, 9, "message.user", "user", {}, T0)
            ),
            lambda u: u.runs.add_checkpoint(RunCheckpoint(world.of(BOB).run.id, 9, 0, {}, T0)),
            lambda u: u.tx.execute(  # type: ignore[attr-defined]
                text("INSERT INTO schedule_revisions VALUES (:s, 9, '{}'::jsonb, 'alice', :t)"),
                {"s": world.of(BOB).schedule.id, "t": T0},
            ),
        ]
        for attempt in attempts:
            async with api.begin(ALICE) as uow:
                with pytest.raises(AuthorizationError) as caught:
                    await attempt(uow)
                assert caught.value.code == FORBIDDEN
            gate_evidence.count("foreign_writes_refused")
        # A unit of work with no principal scope sees nothing under the API role.
        async with api.begin() as uow:
            for table in OWNED_TABLES:
                sql = f"SELECT count(*) FROM {table}"
                assert (await uow.tx.execute(text(sql))).scalar_one() == 0, table
            with pytest.raises(NotFoundError):
                await uow.schedules.get(world.of(ALICE).schedule.id, None)
        gate_evidence.record("unscoped_api_transaction_rows_seen", 0)
        async with admin_connection(pg_url) as conn:
            state = (
                await conn.execute(
                    text("SELECT state FROM schedules WHERE id = :i"), {"i": moved.id}
                )
            ).scalar_one()
        assert state == ScheduleState.ACTIVE.value
    finally:
        await api.dispose()
        await admin.dispose()


async def _foreign_reads_hidden(
    uow: UnitOfWork, viewer: Principal, world: PersistenceWorld
) -> None:
    """Every principal-scoped read or repository mutation of another owner's rows is
    not found (or empty), and changes nothing."""
    for other in OWNERS:
        if other == viewer:
            continue
        o = world.of(other)
        reads: list[Callable[[], Awaitable[object]]] = [
            partial(uow.schedules.get, o.schedule.id, viewer),
            partial(uow.schedules.get_revision, o.schedule.id, 2, viewer),
            partial(uow.occurrences.get, o.materialized.id, viewer),
            partial(uow.occurrences.list, o.schedule.id, viewer, PageRequest()),
            partial(uow.sessions.get, o.session.id, viewer),
            partial(uow.runs.get, o.run.id, viewer),
        ]
        cancelled = o.schedule.model_copy(
            update={"state": ScheduleState.CANCELLED, "next_fire_at": None}
        )
        # Mutations through the repositories are refused the same way.
        reads += [
            partial(uow.schedules.mutate, ScheduleCommand(o.schedule, cancelled, viewer)),
            partial(uow.sessions.erase, o.session.id, viewer, T0),
            partial(uow.schedules.get, o.schedule.id, viewer, for_update=True),
        ]
        for read in reads:
            with pytest.raises(NotFoundError):
                await read()
        assert await uow.sessions.events(o.session.id, viewer) == []
        assert await uow.idempotency.lookup(viewer, "key-1") is not None  # its own key only
    listed = await uow.schedules.list(viewer, PageRequest(limit=50))
    assert [s.id for s in listed.items] == [world.of(viewer).schedule.id]


async def _owner_snapshot(url: str, world: PersistenceWorld, owner: Any) -> dict[str, list[str]]:
    o = world.of(owner)
    queries = {
        "schedules": "SELECT t::text FROM schedules t WHERE id = :s",
        "runs": "SELECT t::text FROM runs t WHERE session_id = :x",
        "sessions": "SELECT t::text FROM sessions t WHERE id = :x",
        "session_events": "SELECT t::text FROM session_events t WHERE session_id = :x ORDER BY 1",
        "run_checkpoints": "SELECT t::text FROM run_checkpoints t WHERE run_id = :r",
        "schedule_occurrences": (
            "SELECT t::text FROM schedule_occurrences t WHERE schedule_id = :s ORDER BY 1"
        ),
        "schedule_revisions": (
            "SELECT t::text FROM schedule_revisions t WHERE schedule_id = :s ORDER BY 1"
        ),
        "schedule_idempotency_keys": (
            "SELECT t::text FROM schedule_idempotency_keys t WHERE tenant_id = :tn"
            " AND principal_id = :p ORDER BY 1"
        ),
        "process_events": (
            "SELECT t::text FROM process_events t WHERE tenant_id = :tn"
            " AND principal_id = :p ORDER BY 1"
        ),
        "principals": (
            "SELECT t::text FROM principals t WHERE tenant_id = :tn AND principal_id = :p"
        ),
    }
    params = {
        "s": o.schedule.id,
        "x": o.session.id,
        "r": o.run.id,
        "tn": owner.tenant_id,
        "p": owner.principal_id,
    }
    async with admin_connection(url) as conn:
        out = {}
        for name, sql in queries.items():
            needed = {k: v for k, v in params.items() if f":{k}" in sql}
            out[name] = [r[0] for r in await conn.execute(text(sql), needed)]
        return out


# --------------------------------------------- isolation of the later tables and roles

# One row per owner in each principal-scoped table of the tool pipeline (0003),
# written as the admin login for the owner of schedule :s (ids drawn by the database).
_TOOL_ROWS = (
    "INSERT INTO tool_invocations (id, tenant_id, principal_id, tool_name, tool_version,"
    " arguments_hash, state, created_at, updated_at) SELECT gen_random_uuid(), tenant_id,"
    " principal_id, 'schedule.create', '1.0.0', 'sha256:args', 'SUCCEEDED', updated_at,"
    " updated_at FROM schedules WHERE id = :s",
    "INSERT INTO tool_approval_requests (id, invocation_id, tenant_id, principal_id,"
    " view_hash, requested_at) SELECT gen_random_uuid(), i.id, i.tenant_id, i.principal_id,"
    " 'sha256:view', i.created_at FROM tool_invocations i JOIN schedules s"
    " ON (s.tenant_id, s.principal_id) = (i.tenant_id, i.principal_id) WHERE s.id = :s",
    "INSERT INTO tool_approval_decisions (approval_id, tenant_id, principal_id, approved,"
    " decided_by, decided_at) SELECT r.id, r.tenant_id, r.principal_id, true, r.principal_id,"
    " r.requested_at FROM tool_approval_requests r JOIN schedules s"
    " ON (s.tenant_id, s.principal_id) = (r.tenant_id, r.principal_id) WHERE s.id = :s",
    "INSERT INTO schedule_outbox (id, tenant_id, principal_id, schedule_id, occurrence_id,"
    " kind, payload, created_at) SELECT gen_random_uuid(), tenant_id, principal_id, id,"
    " :m, 'schedule_run_finished', '{}'::jsonb, updated_at FROM schedules WHERE id = :s",
)
TOOL_TABLES = (
    "tool_invocations",
    "tool_approval_requests",
    "tool_approval_decisions",
    "schedule_outbox",
)
# The maintenance role's tables and what one tenant holds of each (tenant-a: alice and
# bob; tenant-b: mallory), as seeded by ``seeded_world``.
_MAINTAINED = {
    "schedules": 1,
    "schedule_revisions": 2,
    "schedule_occurrences": 2,
    "schedule_idempotency_keys": 1,
}


@pytest.mark.gate("gate.schedule.persistence_isolated")
async def test_tool_records_and_maintenance_are_confined(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The tool pipeline's records and the outcome outbox are principal isolated for the
    API role like the scheduling tables; the maintenance role (the purge) sees and
    changes one tenant's scheduling rows, never another tenant's."""
    world = await seeded_world(pg_url)
    async with admin_connection(pg_url) as conn:
        for owner in OWNERS:
            o = world.of(owner)
            for statement in _TOOL_ROWS:
                inserted = await conn.execute(
                    text(statement), {"s": o.schedule.id, "m": o.materialized.id}
                )
                assert inserted.rowcount == 1, (owner, statement)
        await conn.commit()
    api = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=ROLES.api, pool_size=1)
    maintenance = PostgresUnitOfWorkFactory.from_url(
        pg_url, assume_role=ROLES.maintenance, pool_size=1
    )
    try:
        for viewer in OWNERS:
            async with api.begin(viewer) as uow:
                for table in TOOL_TABLES:
                    sql = f"SELECT count(*) FROM {table} WHERE principal_id = :p"
                    own = (await uow.tx.execute(text(sql), {"p": viewer.principal_id})).scalar_one()
                    seen = (
                        await uow.tx.execute(text(f"SELECT count(*) FROM {table}"))
                    ).scalar_one()
                    # One row of its own, none of the other principal (same tenant) or of
                    # the same principal id in the other tenant.
                    assert (own, seen) == (1, 1), (viewer, table, own, seen)
                changed = (
                    await uow.tx.execute(
                        text("UPDATE tool_invocations SET updated_at = updated_at")
                    )
                ).rowcount
                assert changed == 1, (viewer, "blind tool_invocations update", changed)
            gate_evidence.append(
                "tool_records_viewers", f"{viewer.principal_id}@{viewer.tenant_id}"
            )
        tenants = {"tenant-a": 2, "tenant-b": 1}
        for tenant, owners in tenants.items():
            async with maintenance.begin(tenant_id=tenant) as uow:
                for table, per_owner in _MAINTAINED.items():
                    seen = (
                        await uow.tx.execute(text(f"SELECT count(*) FROM {table}"))
                    ).scalar_one()
                    assert seen == per_owner * owners, (tenant, table, seen)
                touched = (
                    await uow.tx.execute(text("UPDATE schedules SET updated_at = updated_at"))
                ).rowcount
                assert touched == owners, (tenant, "blind maintenance update", touched)
            gate_evidence.append("maintenance_tenants", {"tenant": tenant, "schedules": owners})
        # A maintenance transaction with no tenant scope sees nothing.
        async with maintenance.begin() as uow:
            for table in _MAINTAINED:
                seen = (await uow.tx.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
                assert seen == 0, ("unscoped maintenance", table, seen)
    finally:
        await api.dispose()
        await maintenance.dispose()
