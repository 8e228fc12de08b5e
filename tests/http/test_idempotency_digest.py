"""Idempotency keys are stored as a keyed digest, never verbatim (issue 23 finding 3,
ADR 2133): a credential sent as the Idempotency-Key header reaches no table, and replay
semantics are unchanged (same key and body: the same schedule; same key, other body:
409; the key is the caller's own)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from scheduling.service.schedules import idempotency_digest
from simulation.worlds.http import OWNER, HttpWorld, http_world, update_body
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

CREDENTIAL = "ghp_Zq7Rk2Lm9Xv4Np8Ws3Bt6Yd1Hc5Jf0Ga2Ue"
OTHER = principal("other-owner")


async def _every_row(world: HttpWorld) -> str:
    sql = world.sql
    tables = await sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    out = []
    for row in tables:
        name = row["table_name"]
        rows = await sql(f'SELECT CAST(t AS text) AS r FROM "{name}" AS t')
        out += [r["r"] for r in rows]
    return "\n".join(out)


async def test_a_credential_shaped_key_is_stored_only_as_a_digest(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, OTHER]) as world:
        first = await world.create(CREDENTIAL)
        assert first.status_code == 201, first.text
        again = await world.create(CREDENTIAL)
        assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
        assert again.json()["replayed"] is True
        reused = await world.create(CREDENTIAL, title="Another title")
        assert reused.status_code == 409
        # Another caller's identical key is another entry, not a replay of ours.
        theirs = await world.create(CREDENTIAL, who=OTHER)
        assert theirs.status_code == 201
        assert theirs.json()["id"] != first.json()["id"]
        # The full-definition PATCH with a key records its digest too.
        sid = first.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        patch_key = CREDENTIAL[::-1]
        patched = await world.call(
            "PATCH",
            f"/v1/schedules/{sid}",
            json=update_body(detail, title="Renamed"),
            headers={"Idempotency-Key": patch_key},
        )
        assert patched.status_code == 200, patched.text
        stored = await world.sql(
            "SELECT tenant_id, principal_id, key FROM schedule_idempotency_keys"
        )
        assert len(stored) == 3
        secret = bytes(
            (await world.sql("SELECT key FROM deployment_keys WHERE purpose = 'idempotency.key'"))[
                0
            ]["key"]
        )
        expected = {
            idempotency_digest(secret, OWNER.tenant_id, OWNER.principal_id, CREDENTIAL),
            idempotency_digest(secret, OTHER.tenant_id, OTHER.principal_id, CREDENTIAL),
            idempotency_digest(secret, OWNER.tenant_id, OWNER.principal_id, patch_key),
        }
        assert {row["key"] for row in stored} == expected
        assert all(len(row["key"]) == 64 for row in stored)
        everything = await _every_row(world)
        assert CREDENTIAL not in everything
        assert patch_key not in everything
        assert CREDENTIAL[4:24] not in everything
        assert hashlib.sha256(CREDENTIAL.encode()).hexdigest() not in everything


def test_the_digest_is_keyed_and_domain_separated() -> None:
    key = b"k" * 32
    base = idempotency_digest(key, "t", "p", "abc")
    assert base != idempotency_digest(b"j" * 32, "t", "p", "abc")
    # The length prefixes keep ("t", "pa", "bc") and ("t", "p", "abc") apart.
    assert base != idempotency_digest(key, "t", "pa", "bc")
    assert base != idempotency_digest(key, "tp", "", "abc")
    assert base == idempotency_digest(key, "t", "p", "abc")
    # It is the HMAC of the message, not a plain hash of the key.
    assert base != hashlib.sha256(b"abc").hexdigest()
    assert base != hmac.new(key, b"abc", hashlib.sha256).hexdigest()
