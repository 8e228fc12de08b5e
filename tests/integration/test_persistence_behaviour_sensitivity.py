"""Tests of the test for the behavioural persistence_schema check: two of the broken
schemas of issue 12 (each passed the text-based comparison) now fail it."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from gates.checks.test_persistence_behaviour import check_behaviour
from gates.runner.pytest_plugin import GateEvidence
from scheduling.adapters.postgres.roles import role_names

pytestmark = pytest.mark.postgres

API = role_names().api


async def _break(url: str, *statements: str) -> None:
    async with admin_connection(url) as conn:
        for statement in statements:
            await conn.execute(text(statement))
        await conn.commit()


@pytest.mark.parametrize(
    "statements",
    [
        pytest.param(
            [
                "CREATE OR REPLACE FUNCTION scheduling_reject_revision_update() RETURNS trigger"
                " LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
            ],
            id="revision-trigger-returns-new",
        ),
        pytest.param(
            [
                "DROP POLICY schedule_occurrences_api ON schedule_occurrences",
                "CREATE POLICY schedule_occurrences_api ON schedule_occurrences"
                f" TO {API} USING (schedule_id IS NOT NULL)",
            ],
            id="occurrence-policy-schedule-id-not-null",
        ),
    ],
)
async def test_a_broken_schema_fails_the_behavioural_check(
    pg_url: str, statements: list[str]
) -> None:
    await _break(pg_url, *statements)
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        await check_behaviour(pg_url, GateEvidence())
