"""gate.schedule.persistence_isolated: "PostgreSQL row-level security *and* repository
predicates prevent cross-tenant and cross-principal reads and mutations" - the
repository-predicate half for the stores ``test_persistence`` does not walk without
row-level security: the request-idempotency ledger and the tool ledger.

Three owners share one key text: alice and bob (tenant-a) and mallory (tenant-b, the
principal id ``alice``). Through the trusted login, which row-level security does not
confine, and through the API role, which it does:

* the request-idempotency lookup of each owner's key returns that owner's own entry
  (its own schedule), never a neighbour's under the same key text;
* the principal read (and the durable principal directory's snapshot, the scheduler
  role's too) of alice in tenant-b is tenant-b's alice, never tenant-a's;
* the tool ledger's ``find`` by the shared idempotency key returns the caller's own
  invocation, ``get`` of another owner's invocation id is nothing, and ``finish`` of
  another owner's invocation changes no row;
* the tool ledger's approval read of another owner's invocation is nothing, and its
  decision of another owner's approval request is refused and writes nothing.

Tests of the test: ``scheduling-gates mutate``
(``plumbing.idempotency_lookup_ignores_principal``, ``plumbing.tool_ledger_owner_tenant_only``,
``plumbing.principal_read_ignores_tenant``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from uuid import UUID

import pytest

from gates.checks.persistence_support import ALICE, BOB, MALLORY, OWNERS, T0, seeded_world
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import (
    APPROVAL_DECIDED,
    ApprovalDecisionRecord,
    ApprovalRequestRecord,
    InvocationState,
    ToolInvocationRecord,
)
from scheduling.testing import Role, open_storage

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.persistence_isolated")]

KEY = "shared-call-key"
ROLES: tuple[Role, ...] = ("trusted", "api")


def _name(p: Principal) -> str:
    return f"{p.principal_id}@{p.tenant_id}"


def _invocation(p: Principal, n: int) -> ToolInvocationRecord:
    return ToolInvocationRecord(
        id=UUID(int=(0x7001 << 112) | n),
        tenant_id=p.tenant_id,
        principal_id=p.principal_id,
        idempotency_key=KEY,
        tool_name="schedule.create",
        tool_version="1.0.0",
        arguments_hash=f"sha256:args-{n}",
        state=InvocationState.APPROVED,
        created_at=T0,
        updated_at=T0,
    )


async def test_idempotency_and_tool_ledger_predicates_confine_without_rls(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    world = await seeded_world(pg_url)  # each owner recorded the key text "key-1"
    storage = open_storage(pg_url, pool_size=2)
    try:
        for role in ROLES:
            factory = storage.as_role(role)
            for viewer in OWNERS:
                async with factory.begin(viewer) as uow:
                    entry = await uow.idempotency.lookup(viewer, "key-1")
                assert entry is not None, (role, _name(viewer))
                assert (entry.tenant_id, entry.principal_id) == (
                    viewer.tenant_id,
                    viewer.principal_id,
                ), (role, _name(viewer), entry)
                assert entry.schedule_id == world.of(viewer).schedule.id, (role, _name(viewer))
        gate_evidence.record("idempotency_lookups_own", ["trusted", "api"])

        # The principal row (authentication, authority): alice of tenant-a and alice of
        # tenant-b are two principals; each read, and each directory snapshot, is the
        # viewer's own tenant's row.
        for role in (*ROLES, "scheduler"):
            principals, _ = storage.directories(role, durable=True)
            for viewer in OWNERS:
                async with storage.as_role(role).begin(viewer) as uow:
                    record = await uow.principals.get(viewer.tenant_id, viewer.principal_id)
                assert record is not None, (role, _name(viewer))
                assert (record.tenant_id, record.principal_id) == (
                    viewer.tenant_id,
                    viewer.principal_id,
                ), (role, _name(viewer), record)
                snapshot = await principals.current(viewer.tenant_id, viewer.principal_id)
                assert snapshot is not None, (role, _name(viewer))
                assert (snapshot.tenant_id, snapshot.principal_id) == (
                    viewer.tenant_id,
                    viewer.principal_id,
                ), (role, _name(viewer), snapshot)
        gate_evidence.record("principal_reads_own_tenant", [*ROLES, "scheduler"])

        api_ledger = storage.tool_ledger("api")
        made = {}
        for n, owner in enumerate(OWNERS, start=1):
            made[_name(owner)] = await api_ledger.open(owner, _invocation(owner, n), None)
        for role in ROLES:
            ledger = storage.tool_ledger(role)
            for viewer in OWNERS:
                found = await ledger.find(viewer, KEY)
                assert found is not None, (role, _name(viewer))
                assert found.id == made[_name(viewer)].id, (role, _name(viewer), found)
                for other in OWNERS:
                    if other == viewer:
                        continue
                    foreign = made[_name(other)].id
                    assert await ledger.get(viewer, foreign) is None, (
                        role,
                        _name(viewer),
                        _name(other),
                    )
                    await ledger.finish(
                        viewer,
                        foreign,
                        state=InvocationState.FAILED,
                        at=T0 + timedelta(hours=1),
                        reason_code="schedule.plumbing.forged",
                    )
        for owner in OWNERS:
            kept = await storage.tool_ledger("trusted").get(owner, made[_name(owner)].id)
            assert kept is not None, _name(owner)
            assert (kept.state, kept.reason_code, kept.updated_at) == (
                InvocationState.APPROVED,
                None,
                T0,
            ), (_name(owner), kept)
        gate_evidence.record("tool_ledger_viewers", [_name(p) for p in (ALICE, BOB, MALLORY)])
    finally:
        await storage.close()


def _waiting(p: Principal, n: int) -> tuple[ToolInvocationRecord, ApprovalRequestRecord]:
    invocation = replace(
        _invocation(p, n),
        id=UUID(int=(0x7002 << 112) | n),
        idempotency_key=f"approval-key-{n}",
        state=InvocationState.AWAITING_APPROVAL,
    )
    request = ApprovalRequestRecord(
        id=UUID(int=(0x7003 << 112) | n),
        invocation_id=invocation.id,
        tenant_id=p.tenant_id,
        principal_id=p.principal_id,
        view_hash=f"sha256:view-{n}",
        requested_at=T0,
    )
    return invocation, request


async def test_approval_reads_and_decisions_confine_without_rls(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The tool ledger's approval read and decision by the same predicates: through the
    trusted login (no row-level security) and the API role, another owner's approval
    request reads as none and deciding it is refused (``schedule.tool.approval_decided``,
    "no open approval request") with no decision row and the invocation still waiting;
    each owner then decides its own (``plumbing.approval_read_by_id_only``,
    ``plumbing.decision_by_id_only``)."""
    await seeded_world(pg_url)
    storage = open_storage(pg_url, pool_size=2)
    try:
        api_ledger = storage.tool_ledger("api")
        requests: dict[str, ApprovalRequestRecord] = {}
        for n, owner in enumerate(OWNERS, start=1):
            invocation, request = _waiting(owner, n)
            await api_ledger.open(owner, invocation, request)
            requests[_name(owner)] = request
        for role in ROLES:
            ledger = storage.tool_ledger(role)
            for viewer in OWNERS:
                for other in OWNERS:
                    if other == viewer:
                        continue
                    foreign = requests[_name(other)]
                    seen = await ledger.approval(viewer, foreign.invocation_id)
                    assert seen == (None, None), (role, _name(viewer), _name(other), seen)
                    forged = ApprovalDecisionRecord(
                        approval_id=foreign.id,
                        tenant_id=viewer.tenant_id,
                        principal_id=viewer.principal_id,
                        approved=True,
                        decided_by=viewer.principal_id,
                        decided_at=T0 + timedelta(minutes=5),
                    )
                    with pytest.raises(ConflictError) as refused:
                        await ledger.decide(viewer, forged, InvocationState.APPROVED)
                    assert refused.value.code == APPROVAL_DECIDED, (role, refused.value)
        trusted = storage.tool_ledger("trusted")
        for owner in OWNERS:
            request = requests[_name(owner)]
            kept, decision = await trusted.approval(owner, request.invocation_id)
            assert kept == request, (_name(owner), kept)
            assert decision is None, (_name(owner), "decided by another owner", decision)
            waiting = await trusted.get(owner, request.invocation_id)
            assert waiting is not None, _name(owner)
            assert waiting.state is InvocationState.AWAITING_APPROVAL, (_name(owner), waiting)
            own = ApprovalDecisionRecord(
                approval_id=request.id,
                tenant_id=owner.tenant_id,
                principal_id=owner.principal_id,
                approved=False,
                decided_by=owner.principal_id,
                decided_at=T0 + timedelta(minutes=6),
            )
            await api_ledger.decide(owner, own, InvocationState.DENIED)
            _, decided = await trusted.approval(owner, request.invocation_id)
            assert decided == own, (_name(owner), decided)
        gate_evidence.record("approval_viewers", [_name(p) for p in OWNERS])
    finally:
        await storage.close()
