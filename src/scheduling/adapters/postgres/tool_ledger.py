"""The PostgreSQL tool ledger: invocation, approval-request and decision rows through the
API role's unit of work (row-level security keeps each principal to its own rows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import and_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.sql.elements import ColumnElement

from scheduling.adapters.postgres.tables import (
    tool_approval_decisions,
    tool_approval_requests,
    tool_invocations,
)
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import (
    APPROVAL_DECIDED,
    ApprovalDecisionRecord,
    ApprovalRequestRecord,
    InvocationState,
    ToolInvocationRecord,
)

_INV = tool_invocations.c


def _owner(principal: Principal) -> Any:
    return and_(_INV.tenant_id == principal.tenant_id, _INV.principal_id == principal.principal_id)


def _request_owner(principal: Principal) -> Any:
    """The approval request's owner predicate: row-level security enforces it for the
    API role, and the query says it too, so a login that bypasses it (the trusted one)
    reads and decides only the principal's own requests, as the other methods do."""
    req = tool_approval_requests.c
    return and_(req.tenant_id == principal.tenant_id, req.principal_id == principal.principal_id)


def _invocation(row: Any) -> ToolInvocationRecord:
    m = row._mapping
    return ToolInvocationRecord(
        id=m["id"],
        tenant_id=m["tenant_id"],
        principal_id=m["principal_id"],
        idempotency_key=m["idempotency_key"],
        tool_name=m["tool_name"],
        tool_version=m["tool_version"],
        arguments_hash=m["arguments_hash"],
        state=InvocationState(m["state"]),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        run_id=m["run_id"],
        session_id=m["session_id"],
        reason_code=m["reason_code"],
        output=m["output"],
        output_bytes=m["output_bytes"],
    )


class PostgresToolLedger:
    """See ``scheduling.ports.tool_ledger.ToolLedger``."""

    def __init__(self, uow: PostgresUnitOfWorkFactory) -> None:
        self._uow = uow

    async def find(self, principal: Principal, key: str) -> ToolInvocationRecord | None:
        return await self._one(principal, _INV.idempotency_key == key)

    async def get(self, principal: Principal, invocation_id: UUID) -> ToolInvocationRecord | None:
        return await self._one(principal, _INV.id == invocation_id)

    async def _one(
        self, principal: Principal, condition: ColumnElement[bool]
    ) -> ToolInvocationRecord | None:
        """The principal's one invocation matching ``condition`` (RLS and predicate)."""
        async with self._uow.begin(principal) as uow:
            row = (
                await uow.tx.execute(select(tool_invocations).where(_owner(principal), condition))
            ).first()
        return None if row is None else _invocation(row)

    async def open(
        self,
        principal: Principal,
        invocation: ToolInvocationRecord,
        approval: ApprovalRequestRecord | None,
    ) -> ToolInvocationRecord:
        values = {
            "id": invocation.id,
            "tenant_id": principal.tenant_id,
            "principal_id": principal.principal_id,
            "idempotency_key": invocation.idempotency_key,
            "tool_name": invocation.tool_name,
            "tool_version": invocation.tool_version,
            "arguments_hash": invocation.arguments_hash,
            "state": invocation.state.value,
            "run_id": invocation.run_id,
            "session_id": invocation.session_id,
            "reason_code": invocation.reason_code,
            "output": invocation.output,
            "output_bytes": invocation.output_bytes,
            "created_at": invocation.created_at,
            "updated_at": invocation.updated_at,
        }
        statement = (
            insert(tool_invocations)
            .values(**values)
            .on_conflict_do_nothing(
                index_elements=["tenant_id", "principal_id", "idempotency_key"],
                index_where=text("idempotency_key IS NOT NULL"),
            )
            .returning(tool_invocations.c.id)
        )
        async with self._uow.begin(principal) as uow:
            inserted = (await uow.tx.execute(statement)).first()
            if inserted is None:
                # The key was used first (possibly by a concurrent identical call).
                row = (
                    await uow.tx.execute(
                        select(tool_invocations).where(
                            _owner(principal), _INV.idempotency_key == invocation.idempotency_key
                        )
                    )
                ).one()
                return _invocation(row)
            if approval is not None:
                await uow.tx.execute(
                    insert(tool_approval_requests).values(
                        id=approval.id,
                        invocation_id=invocation.id,
                        tenant_id=principal.tenant_id,
                        principal_id=principal.principal_id,
                        view_hash=approval.view_hash,
                        requested_at=approval.requested_at,
                    )
                )
            await uow.commit()
        return invocation

    async def approval(
        self, principal: Principal, invocation_id: UUID
    ) -> tuple[ApprovalRequestRecord | None, ApprovalDecisionRecord | None]:
        req, dec = tool_approval_requests.c, tool_approval_decisions.c
        async with self._uow.begin(principal) as uow:
            row = (
                await uow.tx.execute(
                    select(tool_approval_requests, dec.approved, dec.decided_by, dec.decided_at)
                    .outerjoin(tool_approval_decisions, dec.approval_id == req.id)
                    .where(req.invocation_id == invocation_id, _request_owner(principal))
                )
            ).first()
        if row is None:
            return None, None
        m = row._mapping
        request = ApprovalRequestRecord(
            id=m["id"],
            invocation_id=m["invocation_id"],
            tenant_id=m["tenant_id"],
            principal_id=m["principal_id"],
            view_hash=m["view_hash"],
            requested_at=m["requested_at"],
        )
        decision = None
        if m["decided_at"] is not None:
            decision = ApprovalDecisionRecord(
                approval_id=m["id"],
                tenant_id=m["tenant_id"],
                principal_id=m["principal_id"],
                approved=m["approved"],
                decided_by=m["decided_by"],
                decided_at=m["decided_at"],
            )
        return request, decision

    async def decide(
        self, principal: Principal, decision: ApprovalDecisionRecord, state: InvocationState
    ) -> None:
        req = tool_approval_requests.c
        async with self._uow.begin(principal) as uow:
            request = (
                await uow.tx.execute(
                    select(req.invocation_id).where(
                        req.id == decision.approval_id, _request_owner(principal)
                    )
                )
            ).first()
            if request is None:
                raise ConflictError(APPROVAL_DECIDED, "no open approval request")
            inserted = (
                await uow.tx.execute(
                    insert(tool_approval_decisions)
                    .values(
                        approval_id=decision.approval_id,
                        tenant_id=principal.tenant_id,
                        principal_id=principal.principal_id,
                        approved=decision.approved,
                        decided_by=decision.decided_by,
                        decided_at=decision.decided_at,
                    )
                    .on_conflict_do_nothing(index_elements=["approval_id"])
                    .returning(tool_approval_decisions.c.approval_id)
                )
            ).first()
            if inserted is None:
                raise ConflictError(APPROVAL_DECIDED, "the approval request is already decided")
            await uow.tx.execute(
                update(tool_invocations)
                .where(_owner(principal), _INV.id == request.invocation_id)
                .values(state=state.value, updated_at=decision.decided_at)
            )
            await uow.commit()

    async def finish(
        self,
        principal: Principal,
        invocation_id: UUID,
        *,
        state: InvocationState,
        at: datetime,
        reason_code: str | None = None,
        output: dict[str, Any] | None = None,
        output_bytes: int | None = None,
    ) -> None:
        async with self._uow.begin(principal) as uow:
            await uow.tx.execute(
                update(tool_invocations)
                .where(_owner(principal), _INV.id == invocation_id)
                .values(
                    state=state.value,
                    updated_at=at,
                    reason_code=reason_code,
                    output=output,
                    output_bytes=output_bytes,
                )
            )
            await uow.commit()
