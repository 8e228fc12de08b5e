"""Contract suite of the ToolLedger port: the memory adapter and the PostgreSQL adapter
(through the API role, so row-level security applies) behave the same.

Not in registry.toml: that registry lists unit-of-work repositories, and the ledger is
its own port with its own transactions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from scheduling.adapters.memory.tool_ledger import MemoryToolLedger
from scheduling.adapters.postgres.tool_ledger import PostgresToolLedger
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import (
    ApprovalDecisionRecord,
    ApprovalRequestRecord,
    InvocationState,
    ToolInvocationRecord,
    ToolLedger,
)
from scheduling.testing import storage_over

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ALICE = Principal("tenant-a", "alice", frozenset({"schedule.write"}))
BOB = Principal("tenant-a", "bob", frozenset({"schedule.write"}))
MALLORY = Principal("tenant-b", "alice", frozenset({"schedule.write"}))


@pytest.fixture(params=["memory", "postgres"])
async def ledger(request: pytest.FixtureRequest) -> AsyncIterator[ToolLedger]:
    if request.param == "memory":
        yield MemoryToolLedger()
        return
    url = request.getfixturevalue("pg_url")
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=2)
    try:
        yield PostgresToolLedger(storage_over(admin).factory("api"))
    finally:
        await admin.dispose()


def invocation(n: int, who: Principal = ALICE, key: str | None = "k-1") -> ToolInvocationRecord:
    return ToolInvocationRecord(
        id=UUID(int=n),
        tenant_id=who.tenant_id,
        principal_id=who.principal_id,
        idempotency_key=key,
        tool_name="schedule.create",
        tool_version="1.2.0",
        arguments_hash=f"sha256:{n}",
        state=InvocationState.AWAITING_APPROVAL,
        created_at=T0,
        updated_at=T0,
    )


def approval(n: int, invocation_id: UUID, who: Principal = ALICE) -> ApprovalRequestRecord:
    return ApprovalRequestRecord(
        UUID(int=1000 + n), invocation_id, who.tenant_id, who.principal_id, "sha256:view", T0
    )


def decision(approval_id: UUID, approved: bool = True) -> ApprovalDecisionRecord:
    return ApprovalDecisionRecord(
        approval_id,
        ALICE.tenant_id,
        ALICE.principal_id,
        approved,
        "approver",
        T0 + timedelta(seconds=5),
    )


@pytest.mark.postgres
class TestToolLedgerContract:
    async def test_open_is_found_by_key_and_id(self, ledger: ToolLedger) -> None:
        record = invocation(1)
        assert await ledger.open(ALICE, record, approval(1, record.id)) == record
        assert await ledger.find(ALICE, "k-1") == record
        assert await ledger.get(ALICE, record.id) == record
        request, decided = await ledger.approval(ALICE, record.id)
        assert request is not None
        assert request.view_hash == "sha256:view"
        assert decided is None

    async def test_a_second_open_with_the_key_returns_the_first_and_writes_nothing(
        self, ledger: ToolLedger
    ) -> None:
        first = invocation(1)
        await ledger.open(ALICE, first, approval(1, first.id))
        second = invocation(2)
        assert await ledger.open(ALICE, second, approval(2, second.id)) == first
        assert await ledger.get(ALICE, second.id) is None

    async def test_rows_are_invisible_to_other_principals_and_tenants(
        self, ledger: ToolLedger
    ) -> None:
        record = invocation(1)
        await ledger.open(ALICE, record, approval(1, record.id))
        for other in (BOB, MALLORY):
            assert await ledger.find(other, "k-1") is None
            assert await ledger.get(other, record.id) is None
            assert await ledger.approval(other, record.id) == (None, None)
        # The same key is another principal's own key.
        theirs = invocation(2, BOB)
        assert await ledger.open(BOB, theirs, None) == theirs

    async def test_one_decision_moves_the_state_and_a_second_is_refused(
        self, ledger: ToolLedger
    ) -> None:
        record = invocation(1)
        request = approval(1, record.id)
        await ledger.open(ALICE, record, request)
        await ledger.decide(ALICE, decision(request.id), InvocationState.APPROVED)
        stored = await ledger.get(ALICE, record.id)
        assert stored is not None
        assert stored.state is InvocationState.APPROVED
        _, decided = await ledger.approval(ALICE, record.id)
        assert decided is not None
        assert decided.approved
        with pytest.raises(ConflictError) as again:
            await ledger.decide(ALICE, decision(request.id, approved=False), InvocationState.DENIED)
        assert again.value.code == "schedule.tool.approval_decided"

    async def test_finish_records_state_code_and_output(self, ledger: ToolLedger) -> None:
        record = invocation(1)
        await ledger.open(ALICE, record, None)
        await ledger.finish(
            ALICE,
            record.id,
            state=InvocationState.SUCCEEDED,
            at=T0,
            output={"schedule_id": "x", "replayed": False},
            output_bytes=34,
        )
        stored = await ledger.get(ALICE, record.id)
        assert stored is not None
        assert stored.state is InvocationState.SUCCEEDED
        assert stored.output == {"schedule_id": "x", "replayed": False}
        assert stored.output_bytes == 34

    async def test_read_invocations_without_a_key_never_collide(self, ledger: ToolLedger) -> None:
        one, two = invocation(1, key=None), invocation(2, key=None)
        assert await ledger.open(ALICE, one, None) == one
        assert await ledger.open(ALICE, two, None) == two
        assert await ledger.get(ALICE, two.id) == two
