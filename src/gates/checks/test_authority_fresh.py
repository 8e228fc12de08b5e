"""gate.schedule.authority_fresh on PostgreSQL: firing revalidates current authority.

Separate cases, each on its own schedule and database: a requested scope revoked, the
principal disabled, and the authority version changed by a role change that drops the
requested scope (the content-derived version moves with it). Each due occurrence fails
closed: AUTHORIZATION_FAILED with its stable reason, an audited
``schedule.occurrence.authorization_failed`` event, no session or run, cadence
advanced, failure count incremented. Restoring authority affects only the next
occurrence (which materializes with the restored version) and never rewrites the
failed one.

A version change alone (a new role that grants nothing the schedule needs) does not
fail - the spec's success conditions do not include an unchanged version - but the
occurrence and ``run.queued`` carry the *new* version: the materializer resolved it
fresh rather than trusting the snapshot taken at creation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from gates.checks.materialize_support import WHO, Harness
from gates.pytest_plugin import GateEvidence
from scheduling.ports.directories import authority_version
from scheduling.service.materializer import PRINCIPAL_DISABLED, SCOPE_REVOKED

pytestmark = pytest.mark.postgres

Change = Callable[[Harness], Awaitable[None]]


async def revoke_scope(h: Harness) -> None:
    await h.set_principal(scopes=WHO.scopes - {"memory.read"})


async def disable(h: Harness) -> None:
    await h.set_principal(enabled=False)


async def change_version(h: Harness) -> None:
    # The role that granted memory.read is gone: new inputs, new version, scope lost.
    await h.set_principal(scopes=WHO.scopes - {"memory.read"}, roles=("viewer",))


def version(roles: tuple[str, ...], scopes: frozenset[str], enabled: bool = True) -> str:
    return authority_version(
        WHO.tenant_id, WHO.principal_id, enabled, scopes, {"roles": list(roles)}
    )


CASES: dict[str, tuple[Change, str]] = {
    "scope_revoked": (revoke_scope, SCOPE_REVOKED),
    "principal_disabled": (disable, PRINCIPAL_DISABLED),
    "authority_version_changed": (change_version, SCOPE_REVOKED),
}


@pytest.mark.gate("gate.schedule.authority_fresh")
@pytest.mark.parametrize("case", sorted(CASES))
async def test_due_occurrence_fails_closed(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    change, code = CASES[case]
    h = await Harness.open(pg_url)
    try:
        sid = await h.create()
        first = await h.next_fire(sid)
        old_version = version(("member",), WHO.scopes)
        await change(h)
        h.clock.advance_to(first + timedelta(seconds=3))
        assert (await h.worker(h.materializer()).run_once()).errors == {}
        ledger = (await h.ledger()).of(sid)
        assert len(ledger.occurrences) == 1
        failed = ledger.occurrences[0]
        assert failed["disposition"] == "AUTHORIZATION_FAILED"
        assert failed["reason_code"] == code
        assert failed["session_id"] is None
        assert failed["run_id"] is None
        assert failed["authority_version"] != old_version
        assert ledger.runs == []
        assert ledger.sessions == []
        audit = [e for e in ledger.events if e["event_type"].endswith("authorization_failed")]
        assert len(audit) == 1
        assert audit[0]["payload"]["reason_code"] == code
        schedule = await h.schedule(sid)
        assert schedule["consecutive_failures"] == 1
        second = schedule["next_fire_at"]
        assert second > h.clock.now()
        # Restore: only the later occurrence is affected.
        await h.set_principal()
        h.clock.advance_to(second + timedelta(seconds=3))
        assert (await h.worker(h.materializer()).run_once()).errors == {}
        after = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in after.occurrences] == [
            "AUTHORIZATION_FAILED",
            "MATERIALIZED",
        ]
        assert after.occurrences[0] == failed
        assert after.occurrences[1]["authority_version"] == old_version
        assert len(after.runs) == 1
        gate_evidence.record(
            case,
            {
                "reason_code": code,
                "occurrences": [o["disposition"] for o in after.occurrences],
                "failed_authority_version": failed["authority_version"],
                "restored_authority_version": old_version,
            },
        )
    finally:
        await h.close()


@pytest.mark.gate("gate.schedule.authority_fresh")
async def test_version_is_resolved_at_firing(pg_url: str, gate_evidence: GateEvidence) -> None:
    h = await Harness.open(pg_url)
    try:
        sid = await h.create()
        first = await h.next_fire(sid)
        await h.set_principal(roles=("member", "auditor"))
        fresh = version(("member", "auditor"), WHO.scopes)
        h.clock.advance_to(first + timedelta(seconds=3))
        assert (await h.worker(h.materializer()).run_once()).errors == {}
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == ["MATERIALIZED"]
        assert ledger.occurrences[0]["authority_version"] == fresh
        queued = [e for e in ledger.session_events if e["event_type"] == "run.queued"]
        assert queued[0]["payload"]["authority_version"] == fresh
        assert queued[0]["payload"]["occurrence_id"] == str(ledger.occurrences[0]["id"])
        gate_evidence.record(
            "version_only_change", {"stamped": fresh, "disposition": "MATERIALIZED"}
        )
    finally:
        await h.close()
