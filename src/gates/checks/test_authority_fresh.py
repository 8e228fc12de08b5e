"""gate.schedule.authority_fresh on PostgreSQL: firing revalidates current authority.

Every revision pins the owner's content-derived authority version at approval (create,
update, patch; ADR 1200). Three separate cases, each on its own schedule and database:
a requested scope revoked, the principal disabled, and the authority version changed
*alone* (an extra, unrelated role is granted: the principal stays enabled and every
requested scope stays granted, only the version moves). Each due occurrence fails
closed: AUTHORIZATION_FAILED with its stable reason (``scope_revoked``,
``principal_disabled``, ``authority_changed``), an audited
``schedule.occurrence.authorization_failed`` event, no session or run, cadence
advanced, failure count incremented. Restoring authority (the principal's authority
content returns, so its content-derived version matches the pin again) affects only
the next occurrence, which materializes; the failed one is never rewritten.

A successful occurrence and its ``run.queued`` carry the version resolved at firing,
which equals the revision's pinned one (the only version that can materialize).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.checks.fail_closed import fails_closed_then_recovers
from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.directories import authority_version
from scheduling.service.materializer import (
    AUTHORITY_CHANGED,
    PRINCIPAL_DISABLED,
    SCOPE_REVOKED,
    ScheduleMaterializer,
)
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres

Change = Callable[[MaterializeWorld], Awaitable[None]]

SEEDED_ROLES = ("member",)
"""The roles ``seed_durable`` gives the owner (``MaterializeWorld.set_principal``'s default)."""


async def revoke_scope(h: MaterializeWorld) -> None:
    await h.set_principal(scopes=WHO.scopes - {"memory.read"})


async def disable(h: MaterializeWorld) -> None:
    await h.set_principal(enabled=False)


async def change_version_only(h: MaterializeWorld) -> None:
    # An extra role that grants nothing the schedule needs: same enabled flag, same
    # scopes (memory.read still granted), new authority inputs -> a new version only.
    await h.set_principal(roles=(*SEEDED_ROLES, "auditor"))


def version(roles: tuple[str, ...], scopes: frozenset[str], enabled: bool = True) -> str:
    return authority_version(
        WHO.tenant_id, WHO.principal_id, enabled, scopes, {"roles": list(roles)}
    )


CASES: dict[str, tuple[Change, str]] = {
    "scope_revoked": (revoke_scope, SCOPE_REVOKED),
    "principal_disabled": (disable, PRINCIPAL_DISABLED),
    "authority_version_changed": (change_version_only, AUTHORITY_CHANGED),
}


async def pinned_version(h: MaterializeWorld, schedule_id: UUID, revision: int = 1) -> Any:
    rows = await h.sql(
        "SELECT definition FROM schedule_revisions WHERE schedule_id = :i AND revision = :r",
        i=schedule_id,
        r=revision,
    )
    return rows[0]["definition"].get("authority_version")


async def principal_row(h: MaterializeWorld) -> dict[str, Any]:
    rows = await h.sql(
        "SELECT enabled, scopes, authority_inputs FROM principals"
        " WHERE tenant_id = :t AND principal_id = :p",
        t=WHO.tenant_id,
        p=WHO.principal_id,
    )
    return rows[0]


@pytest.mark.gate("gate.schedule.authority_fresh")
@pytest.mark.parametrize("case", sorted(CASES))
async def test_due_occurrence_fails_closed(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    await check_fails_closed(pg_url, case, gate_evidence)


MaterializerFor = Callable[[MaterializeWorld], ScheduleMaterializer]


def default_materializer(h: MaterializeWorld) -> ScheduleMaterializer:
    return h.materializer()


async def check_fails_closed(
    pg_url: str,
    case: str,
    gate_evidence: GateEvidence,
    materializer_for: MaterializerFor = default_materializer,
) -> None:
    """One case. ONE long-lived worker (one materializer, one principal directory)
    serves the whole case and first fires an occurrence under the old authority, so a
    worker that caches authority is caught when the change is not seen."""
    change, code = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        worker = h.worker(materializer_for(h))
        sid = await h.create()
        old_version = version(SEEDED_ROLES, WHO.scopes)
        assert await pinned_version(h, sid) == old_version

        async def breaks() -> None:
            await change(h)
            if case == "authority_version_changed":
                # Prove the case changes the version and nothing the other two cases cover.
                row = await principal_row(h)
                assert row["enabled"] is True
                assert "memory.read" in row["scopes"]
                assert row["authority_inputs"] == {"roles": [*SEEDED_ROLES, "auditor"]}
                assert version((*SEEDED_ROLES, "auditor"), WHO.scopes) != old_version

        async def restores() -> None:
            # The principal's authority content returns, so the content-derived version
            # matches the pin again; only the later occurrence is affected.
            await h.set_principal()

        failed, after = await fails_closed_then_recovers(
            h,
            worker,
            sid,
            disposition="AUTHORIZATION_FAILED",
            code=code,
            breaks=breaks,
            restores=restores,
        )
        assert failed["authority_version"] != old_version
        assert after.occurrences[2]["authority_version"] == old_version
        assert await pinned_version(h, sid) == old_version
        gate_evidence.record(
            case,
            {
                "reason_code": code,
                "occurrences": [o["disposition"] for o in after.occurrences],
                "pinned_authority_version": old_version,
                "failed_authority_version": failed["authority_version"],
                "restored_authority_version": old_version,
                "worker": "one long-lived worker fired under the old authority first",
            },
        )
    finally:
        await h.close()


@pytest.mark.gate("gate.schedule.authority_fresh")
async def test_materialized_occurrence_carries_the_pinned_version(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        first = await h.next_fire(sid)
        pinned = await pinned_version(h, sid)
        current = version(SEEDED_ROLES, WHO.scopes)
        assert pinned == current
        h.clock.advance_to(first + timedelta(seconds=3))
        assert (await h.worker(h.materializer()).run_once()).errors == {}
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == ["MATERIALIZED"]
        assert ledger.occurrences[0]["authority_version"] == pinned
        assert ledger.runs[0]["metadata"]["authority_version"] == pinned
        queued = [e for e in ledger.session_events if e["event_type"] == "run.queued"]
        assert len(queued) == 1
        assert queued[0]["payload"]["authority_version"] == pinned
        assert queued[0]["payload"]["occurrence_id"] == str(ledger.occurrences[0]["id"])
        gate_evidence.record(
            "materialized_version", {"pinned": pinned, "stamped": pinned, "run_queued": pinned}
        )
    finally:
        await h.close()
