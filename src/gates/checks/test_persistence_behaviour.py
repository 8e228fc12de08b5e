"""gate.schedule.persistence_schema by behaviour, not by text: the schema's trust
boundaries are tried, not read. Revisions are immutable (an UPDATE is refused even
to the table's owner login, through the trigger, whatever its text says); a foreign
owner's revisions and occurrences are invisible to the API role and every write
aimed at them (revision UPDATE, occurrence link UPDATE) touches no row; the
occurrence uniqueness refuses a second row for a decided instant. The row rules the
catalog inspection checks by name only are tried at their boundaries (revision numbers,
the failure counter, the definition's JSON type, the not-early rule, the run lease, the
outbox kind), and the event logs' append-only triggers are tried, each beside the legal
neighbour the database must accept.

Tests of the test: tests/integration/test_persistence_behaviour_sensitivity.py (a
trigger replaced by ``RETURN NEW``, the occurrence policy weakened to
``schedule_id IS NOT NULL``)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from gates.checks.persistence_support import (
    ALICE,
    BOB,
    MALLORY,
    admin_connection,
    seeded_world,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import SchedulingError
from scheduling.testing import PostgresUnitOfWorkFactory, role_names, sqlstate_of

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.persistence_schema"


@pytest.mark.gate(GATE)
async def test_trust_boundaries_hold_when_tried(pg_url: str, gate_evidence: GateEvidence) -> None:
    await check_behaviour(pg_url, gate_evidence)


async def check_behaviour(pg_url: str, gate_evidence: GateEvidence) -> None:
    world = await seeded_world(pg_url)
    alice = world.of(ALICE)
    # 1. A revision UPDATE is refused to everyone, the owner login included.
    for statement in (
        "UPDATE schedule_revisions SET definition = definition WHERE schedule_id = :s",
        "UPDATE schedule_revisions SET revision = revision WHERE schedule_id = :s",
    ):
        async with admin_connection(pg_url) as conn:
            with pytest.raises(Exception) as refused:  # noqa: PT011 - any refusal will do
                await conn.execute(text(statement), {"s": alice.schedule.id})
            await conn.rollback()
        assert "immutable" in str(refused.value), refused.value
        gate_evidence.append("revision_updates_refused", statement)
    # 2. Foreign rows: invisible and unwritable for the API role.
    api = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=role_names().api, pool_size=1)
    try:
        for foreign in (BOB, MALLORY):
            other = world.of(foreign)
            async with api.begin(ALICE) as uow:
                for table in ("schedule_revisions", "schedule_occurrences"):
                    seen = (
                        await uow.tx.execute(
                            text(f"SELECT count(*) FROM {table} WHERE schedule_id = :s"),
                            {"s": other.schedule.id},
                        )
                    ).scalar_one()
                    assert seen == 0, (foreign, table, seen)
                changed = (
                    await uow.tx.execute(
                        text(
                            "UPDATE schedule_occurrences SET run_id = run_id, "
                            "session_id = session_id WHERE schedule_id = :s"
                        ),
                        {"s": other.schedule.id},
                    )
                ).rowcount
                assert changed == 0, (foreign, "occurrence link update reached", changed)
                try:
                    rewritten = (
                        await uow.tx.execute(
                            text(
                                "UPDATE schedule_revisions SET revision = revision"
                                " WHERE schedule_id = :s"
                            ),
                            {"s": other.schedule.id},
                        )
                    ).rowcount
                except SchedulingError:
                    rewritten = 0  # refused outright: the API role may not UPDATE revisions
                assert rewritten == 0, (foreign, "revision update reached", rewritten)
            gate_evidence.append("foreign_rows_hidden_and_unwritable", foreign.principal_id)
        # The owner's own occurrences are visible (the policy is not simply "nothing").
        async with api.begin(ALICE) as uow:
            own = (
                await uow.tx.execute(
                    text("SELECT count(*) FROM schedule_occurrences WHERE schedule_id = :s"),
                    {"s": alice.schedule.id},
                )
            ).scalar_one()
        assert own == 2, own
    finally:
        await api.dispose()
    # 3. Occurrence uniqueness: a second row for a decided instant is refused.
    async with admin_connection(pg_url) as conn:
        await conn.execute(
            text(
                "CREATE TEMP TABLE twin ON COMMIT DROP AS"
                " SELECT * FROM schedule_occurrences WHERE id = :i"
            ),
            {"i": alice.materialized.id},
        )
        await conn.execute(text("UPDATE twin SET id = gen_random_uuid()"))
        with pytest.raises(Exception) as duplicate:  # noqa: PT011
            await conn.execute(text("INSERT INTO schedule_occurrences SELECT * FROM twin"))
        await conn.rollback()
    assert "unique" in str(duplicate.value).lower() or "duplicate" in str(duplicate.value)
    gate_evidence.record("duplicate_occurrence_refused", True)


CHECK_VIOLATION = "23514"
# The append-only and immutability triggers raise insufficient_privilege.
TRIGGER_REFUSAL = "42501"
_OUTBOX = (
    "INSERT INTO schedule_outbox (id, tenant_id, principal_id, schedule_id, occurrence_id,"
    " kind, payload, created_at) SELECT gen_random_uuid(), s.tenant_id, s.principal_id, s.id,"
    " :m, '{kind}', '{{}}'::jsonb, s.updated_at FROM schedules s WHERE s.id = :s"
)
_REVISION_COPY = (
    "INSERT INTO schedule_revisions SELECT schedule_id, {revision}, {definition},"
    " created_by_principal_id, created_at FROM schedule_revisions"
    " WHERE schedule_id = :s AND revision = 1"
)
# (what is tried, the statement, None if the database must accept it (one row), else
# the SQLSTATE it must refuse it with). Each refused form sits beside its legal
# neighbour, so a refusal is the rule's, not any statement's.
BOUNDARIES: tuple[tuple[str, str, str | None], ...] = (
    ("revision pointer 1", "UPDATE schedules SET current_revision = 1 WHERE id = :s", None),
    (
        "revision pointer 0",
        "UPDATE schedules SET current_revision = 0 WHERE id = :s",
        CHECK_VIOLATION,
    ),
    ("failure count 0", "UPDATE schedules SET consecutive_failures = 0 WHERE id = :s", None),
    (
        "failure count -1",
        "UPDATE schedules SET consecutive_failures = -1 WHERE id = :s",
        CHECK_VIOLATION,
    ),
    ("revision 3, an object", _REVISION_COPY.format(revision=3, definition="definition"), None),
    ("revision 0", _REVISION_COPY.format(revision=0, definition="definition"), CHECK_VIOLATION),
    (
        "definition an array",
        _REVISION_COPY.format(revision=3, definition="'[]'::jsonb"),
        CHECK_VIOLATION,
    ),
    (
        "materialized at its instant",
        "UPDATE schedule_occurrences SET materialized_at = nominal_fire_at WHERE id = :m",
        None,
    ),
    (
        "materialized a microsecond early",
        "UPDATE schedule_occurrences SET materialized_at = nominal_fire_at"
        " - interval '1 microsecond' WHERE id = :m",
        CHECK_VIOLATION,
    ),
    (
        "a whole lease",
        "UPDATE runs SET lease_owner = 'w', lease_expires_at = updated_at WHERE id = :r",
        None,
    ),
    (
        "a lease owner without expiry",
        "UPDATE runs SET lease_owner = 'w', lease_expires_at = NULL WHERE id = :r",
        CHECK_VIOLATION,
    ),
    (
        "a lease expiry without owner",
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = updated_at WHERE id = :r",
        CHECK_VIOLATION,
    ),
    ("the outbox's kind", _OUTBOX.format(kind="schedule_run_finished"), None),
    ("another outbox kind", _OUTBOX.format(kind="schedule_run_started"), CHECK_VIOLATION),
    (
        "a process event rewritten",
        "UPDATE process_events SET actor = actor WHERE schedule_id = :s",
        TRIGGER_REFUSAL,
    ),
    (
        "a session event rewritten",
        "UPDATE session_events SET actor = actor WHERE session_id = :x",
        TRIGGER_REFUSAL,
    ),
)


@pytest.mark.gate(GATE)
async def test_row_rules_hold_at_their_boundaries(pg_url: str, gate_evidence: GateEvidence) -> None:
    world = await seeded_world(pg_url)
    alice = world.of(ALICE)
    params = {
        "s": alice.schedule.id,
        "m": alice.materialized.id,
        "r": alice.run.id,
        "x": alice.session.id,
    }
    async with admin_connection(pg_url) as conn:
        for label, sql, refusal in BOUNDARIES:
            bound = {k: v for k, v in params.items() if f":{k}" in sql}
            outcome: Any
            try:
                outcome = (await conn.execute(text(sql), bound)).rowcount
            except DBAPIError as exc:
                outcome = sqlstate_of(exc)
            finally:
                await conn.rollback()
            # Accepted: exactly the one row aimed at; refused: by the rule's SQLSTATE.
            assert outcome == (1 if refusal is None else refusal), (label, outcome)
            gate_evidence.append("boundaries", {"tried": label, "outcome": outcome})
