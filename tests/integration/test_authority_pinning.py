"""The pinned authority version at firing, on PostgreSQL (ADR 1200).

The schedule service writes through the API role and the materializer runs through the
scheduler role, both over the durable principal directory (``MaterializeWorld``). Covered: the
owner re-approving under changed authority re-pins and only the next occurrence
materializes; repeated authority changes reach the failure limit and auto-pause;
revisions stored before pinning keep the scope-only rule; and a materializer without
the comparison would materialize the version-only case (so the gate check can fail).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.directories import (
    DurableAgentRegistry,
    DurablePrincipalDirectory,
)
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.directories import AuthoritySnapshot
from scheduling.service.materializer import AUTHORITY_CHANGED, ScheduleMaterializer
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import definition

pytestmark = pytest.mark.postgres


async def fire(
    h: MaterializeWorld, schedule_id: UUID, materializer: ScheduleMaterializer | None = None
) -> None:
    """Advance just past the schedule's next instant and run one strict worker pass."""
    due = await h.next_fire(schedule_id)
    h.clock.advance_to(due + timedelta(seconds=3))
    report = await h.worker(materializer or h.materializer()).run_once()
    assert report.errors == {}


async def revision_definition(
    h: MaterializeWorld, schedule_id: UUID, revision: int
) -> dict[str, Any]:
    rows = await h.sql(
        "SELECT definition FROM schedule_revisions WHERE schedule_id = :i AND revision = :r",
        i=schedule_id,
        r=revision,
    )
    value: dict[str, Any] = rows[0]["definition"]
    return value


async def current_version(h: MaterializeWorld) -> str:
    snap = await DurablePrincipalDirectory(h.admin).current(WHO.tenant_id, WHO.principal_id)
    assert snap is not None
    return snap.authority_version


async def test_owner_re_approval_re_pins_and_only_the_next_occurrence_materializes(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        v1 = await current_version(h)
        await h.set_principal(roles=("member", "auditor"))
        v2 = await current_version(h)
        assert v2 != v1
        await fire(h, sid)
        failed = (await h.ledger()).of(sid).occurrences
        assert [(o["disposition"], o["reason_code"]) for o in failed] == [
            ("AUTHORIZATION_FAILED", AUTHORITY_CHANGED)
        ]
        # The owner re-approves the identical definition under the new authority.
        result = await h.world.service.update(WHO, sid, 1, definition())
        assert result.changed
        assert result.schedule.current_revision == 2
        assert (await revision_definition(h, sid, 1))["authority_version"] == v1
        assert (await revision_definition(h, sid, 2))["authority_version"] == v2
        await fire(h, sid)
        after = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in after.occurrences] == [
            "AUTHORIZATION_FAILED",
            "MATERIALIZED",
        ]
        assert after.occurrences[0] == failed[0]
        assert after.occurrences[1]["schedule_revision"] == 2
        assert after.occurrences[1]["authority_version"] == v2
        assert len(after.runs) == 1
        assert after.runs[0]["metadata"]["authority_version"] == v2
    finally:
        await h.close()


async def test_repeated_authority_changes_reach_the_failure_limit(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(max_consecutive_failures=2)
        await h.set_principal(roles=("member", "auditor"))
        await fire(h, sid)
        await fire(h, sid)
        ledger = (await h.ledger()).of(sid)
        assert [o["reason_code"] for o in ledger.occurrences] == [AUTHORITY_CHANGED] * 2
        assert ledger.runs == []
        assert ledger.sessions == []
        schedule = await h.schedule(sid)
        assert schedule["state"] == "PAUSED"
        assert schedule["pause_reason"] == "failure_limit"
        assert schedule["consecutive_failures"] == 2
        assert "schedule.auto_paused" in ledger.event_types()
    finally:
        await h.close()


async def test_a_revision_stored_before_pinning_keeps_the_scope_only_rule(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        template = await h.create()
        # Revisions are immutable in the database, so store a second schedule whose
        # revision 1 is written as before pinning existed (no authority_version).
        sid = UUID(int=0xA0)
        async with h.admin.begin() as uow:
            schedule = await uow.schedules.get(template, None)
            revision = await uow.schedules.get_revision(template, 1, None)
            await uow.schedules.create(
                schedule.model_copy(update={"id": sid}),
                revision.model_copy(update={"schedule_id": sid, "authority_version": None}),
            )
            await uow.commit()
        assert "authority_version" not in await revision_definition(h, sid, 1)
        await h.set_principal(roles=("member", "auditor"))
        v2 = await current_version(h)
        await fire(h, sid)
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == ["MATERIALIZED"]
        assert ledger.occurrences[0]["authority_version"] == v2
        # The pinned sibling, due at the same instant, failed closed.
        pinned = (await h.ledger()).of(template).occurrences
        assert [o["reason_code"] for o in pinned] == [AUTHORITY_CHANGED]
    finally:
        await h.close()


class ScopeOnlyMaterializer(ScheduleMaterializer):
    """The pre-ADR-1200 rule: the pinned version is ignored at firing."""

    @staticmethod
    def _authorization(
        authority: AuthoritySnapshot | None, revision: ScheduleRevision
    ) -> str | None:
        unpinned = revision.model_copy(update={"authority_version": None})
        return ScheduleMaterializer._authorization(authority, unpinned)


async def test_without_the_comparison_the_version_only_case_would_materialize(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        await h.set_principal(roles=("member", "auditor"))
        lax = ScopeOnlyMaterializer(
            uow=h.scheduler,
            clock=h.clock,
            ids=h.world.ids.fork("scope-only"),
            principals=DurablePrincipalDirectory(h.scheduler),
            agents=DurableAgentRegistry(h.scheduler),
            tenants=h.tenants,
            admission=PostgresAdmissionController(h.tenants),
        )
        await fire(h, sid, lax)
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == ["MATERIALIZED"]
    finally:
        await h.close()
