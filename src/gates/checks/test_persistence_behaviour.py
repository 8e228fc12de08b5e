"""gate.schedule.persistence_schema by behaviour, not by text: the schema's trust
boundaries are tried, not read. Revisions are immutable (an UPDATE is refused even
to the table's owner login, through the trigger, whatever its text says); a foreign
owner's revisions and occurrences are invisible to the API role and every write
aimed at them (revision UPDATE, occurrence link UPDATE) touches no row; the
occurrence uniqueness refuses a second row for a decided instant.

Tests of the test: tests/integration/test_persistence_behaviour_sensitivity.py (a
trigger replaced by ``RETURN NEW``, the occurrence policy weakened to
``schedule_id IS NOT NULL``)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import (
    ALICE,
    BOB,
    MALLORY,
    admin_connection,
    seeded_world,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import SchedulingError
from scheduling.testing import PostgresUnitOfWorkFactory, role_names

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
