"""``gate.schedule.persistence_isolated`` for identities with awkward characters, over
HTTP against PostgreSQL (API role, forced row-level security, the durable directory).

A unit of work writes its tenant and principal into transaction-local settings that
row-level security reads, sent as PostgreSQL escape-string literals in the one-round-
trip ``BEGIN`` (ADR 1750). The token file accepts any identity without whitespace, so a
principal id may hold a backslash and a quote: such a principal, and another whose id
differs from it only by what a lost escape would drop, each create, read and list
exactly their own schedule, and neither sees the other's.

Test of the test: ``scheduling-gates mutate`` (``tx.literal_backslash_unescaped``:
the backslash is not doubled in the literal).
"""

from __future__ import annotations

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import OWNER, http_world
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

# Backslash sequences an escape-string literal would read as escapes (\b, \t, \x41, a
# trailing backslash before the closing quote), and a quote.
AWKWARD = principal("o'brien\\b\\t\\x41\\", scopes=OWNER.scopes)
PLAIN = principal("o'brien\bA", scopes=OWNER.scopes)


@pytest.mark.gate("gate.schedule.persistence_isolated")
async def test_identities_with_backslashes_and_quotes_stay_isolated(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, [AWKWARD, PLAIN]) as world:
        own: dict[str, str] = {}
        for who in (AWKWARD, PLAIN):
            created = await world.create(f"awkward-{len(own)}", who, title="Awkward")
            assert created.status_code == 201, (who.principal_id, created.text)
            own[who.principal_id] = created.json()["id"]
        for who in (AWKWARD, PLAIN):
            mine = own[who.principal_id]
            listed = await world.call("GET", "/v1/schedules", who)
            assert listed.status_code == 200, listed.text
            assert [row["id"] for row in listed.json()["items"]] == [mine], who.principal_id
            read = await world.call("GET", f"/v1/schedules/{mine}", who)
            assert read.status_code == 200, read.text
            theirs = next(sid for p, sid in own.items() if p != who.principal_id)
            other = await world.call("GET", f"/v1/schedules/{theirs}", who)
            assert other.status_code == 404, (who.principal_id, other.text)
        rows = await world.sql("SELECT principal_id FROM schedules ORDER BY principal_id")
    # Each row carries its creator's id exactly as the token file names it.
    assert sorted(r["principal_id"] for r in rows) == sorted(own)
    gate_evidence.record("principal_ids", sorted(own))
