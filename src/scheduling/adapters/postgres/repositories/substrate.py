"""PostgreSQL repositories of the substrate: principals, agents, sessions, runs, events."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, fields
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ARRAY, Table, any_, bindparam, delete, func, insert, select, true, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.roles import RUN_MUTABLE_COLUMNS
from scheduling.adapters.postgres.tables import (
    agent_active_versions,
    agent_versions,
    principals,
    process_events,
    run_checkpoints,
    runs,
    schedule_occurrences,
    session_events,
    sessions,
)
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.errors import ConflictError, NotFoundError
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.ports.records import (
    AgentVersionRecord,
    ErasureResult,
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunRecord,
    RunStatus,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.repositories import NOT_FOUND, STALE


def _owned(table: Table, principal: Principal | None) -> Any:
    if principal is None:
        return true()
    return (table.c.tenant_id == principal.tenant_id) & (
        table.c.principal_id == principal.principal_id
    )


def _record(cls: Any, row: Any, **override: Any) -> Any:
    values = {f.name: getattr(row, f.name) for f in fields(cls)}
    values.update(override)
    return cls(**values)


_PRINCIPAL = Prepared(
    select(principals).where(
        principals.c.tenant_id == bindparam("tenant_id", type_=principals.c.tenant_id.type),
        principals.c.principal_id
        == bindparam("principal_id", type_=principals.c.principal_id.type),
    )
)


_AGENT_VERSION = Prepared(
    select(agent_versions).where(
        agent_versions.c.agent_id == bindparam("agent_id", type_=agent_versions.c.agent_id.type),
        agent_versions.c.version == bindparam("version", type_=agent_versions.c.version.type),
    )
)


# Every schedule change appends one: prepared (ADR 1740), the payload's JSON through the
# column's own bind processor.
_EVENT = tuple(f.name for f in fields(ProcessEvent))
_APPEND_EVENT = Prepared(
    insert(process_events).values(
        {c.name: bindparam(c.name, type_=c.type) for c in process_events.columns}
    )
)


class PostgresPrincipalRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def put(self, record: PrincipalRecord) -> None:
        row = asdict(record)
        row["scopes"] = sorted(record.scopes)
        statement = pg_insert(principals).values(row)
        statement = statement.on_conflict_do_update(
            index_elements=["tenant_id", "principal_id"],
            set_={
                k: statement.excluded[k]
                for k in ("enabled", "scopes", "authority_inputs", "updated_at")
            },
        )
        await self._tx.execute(statement)

    async def get(self, tenant_id: str, principal_id: str) -> PrincipalRecord | None:
        # Every authenticated request reads this row: a prepared statement on the driver
        # connection (ADR 1740), no per-call SQLAlchemy compilation (ADR 2240).
        rows = await self._tx.fetch(
            _PRINCIPAL, {"tenant_id": tenant_id, "principal_id": principal_id}
        )
        if not rows:
            return None
        row = rows[0]
        values = {f.name: row[f.name] for f in fields(PrincipalRecord)}
        values["scopes"] = frozenset(row["scopes"])
        return PrincipalRecord(**values)


class PostgresAgentRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def put_version(self, record: AgentVersionRecord) -> None:
        await self._tx.execute(insert(agent_versions).values(asdict(record)))

    async def get_version(self, agent_id: UUID, version: str) -> AgentVersionRecord | None:
        # Every create pins a version: prepared, as the principal read (ADR 2240).
        rows = await self._tx.fetch(_AGENT_VERSION, {"agent_id": agent_id, "version": version})
        if not rows:
            return None
        result: AgentVersionRecord = AgentVersionRecord(
            **{f.name: rows[0][f.name] for f in fields(AgentVersionRecord)}
        )
        return result

    async def set_active(self, agent_id: UUID, version: str, at: datetime) -> None:
        statement = pg_insert(agent_active_versions).values(
            agent_id=agent_id, version=version, updated_at=at
        )
        statement = statement.on_conflict_do_update(
            index_elements=["agent_id"],
            set_={"version": statement.excluded.version, "updated_at": at},
        )
        await self._tx.execute(statement)

    async def active(self, agent_id: UUID) -> AgentVersionRecord | None:
        query = (
            select(agent_versions)
            .join(
                agent_active_versions,
                (agent_active_versions.c.agent_id == agent_versions.c.agent_id)
                & (agent_active_versions.c.version == agent_versions.c.version),
            )
            .where(agent_active_versions.c.agent_id == agent_id)
        )
        row = (await self._tx.execute(query)).first()
        return None if row is None else _record(AgentVersionRecord, row)


class PostgresSessionRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def create(self, session: SessionRecord) -> SessionRecord:
        await self._tx.execute(insert(sessions).values(asdict(session)))
        return session

    async def get(self, session_id: UUID, principal: Principal | None) -> SessionRecord:
        query = select(sessions).where(sessions.c.id == session_id, _owned(sessions, principal))
        row = (await self._tx.execute(query)).first()
        if row is None:
            raise NotFoundError(NOT_FOUND, "session not found", {"session_id": str(session_id)})
        result: SessionRecord = _record(SessionRecord, row)
        return result

    async def append_event(self, event: SessionEvent) -> SessionEvent:
        await self._tx.execute(insert(session_events).values(asdict(event)))
        return event

    async def events(
        self, session_id: UUID, principal: Principal | None, *, include_context_only: bool = True
    ) -> list[SessionEvent]:
        visible = select(sessions.c.id).where(
            sessions.c.id == session_id, _owned(sessions, principal)
        )
        query = select(session_events).where(session_events.c.session_id.in_(visible))
        if not include_context_only:
            query = query.where(session_events.c.context_only.is_(False))
        rows = (await self._tx.execute(query.order_by(session_events.c.seq))).all()
        return [_record(SessionEvent, r) for r in rows]

    async def erase(
        self, session_id: UUID, principal: Principal | None, erased_at: datetime
    ) -> ErasureResult:
        await self.get(session_id, principal)
        session_runs = select(runs.c.id).where(runs.c.session_id == session_id)
        occ = schedule_occurrences.c
        # Mark first: the CHECK accepts only live-linked or explicitly erased links, so
        # deleting the session before this would fail rather than half-erase.
        marked = await self._tx.execute(
            update(schedule_occurrences)
            .where(
                occ.disposition == OccurrenceDisposition.MATERIALIZED.value,
                (occ.session_id == session_id) | occ.run_id.in_(session_runs),
            )
            .values(links_erased_at=erased_at, session_id=None, run_id=None)
        )
        await self._tx.execute(
            delete(run_checkpoints).where(run_checkpoints.c.run_id.in_(session_runs))
        )
        events = await self._tx.execute(
            delete(session_events).where(session_events.c.session_id == session_id)
        )
        deleted_runs = await self._tx.execute(delete(runs).where(runs.c.session_id == session_id))
        await self._tx.execute(delete(sessions).where(sessions.c.id == session_id))
        return ErasureResult(
            session_id=session_id,
            occurrences_marked=marked.rowcount,
            runs_deleted=deleted_runs.rowcount,
            events_deleted=events.rowcount,
        )


def _run_row(run: RunRecord) -> dict[str, Any]:
    row = asdict(run)
    row["status"] = run.status.value
    row["requested_scopes"] = sorted(run.requested_scopes)
    return row


def _to_run(row: Any) -> RunRecord:
    result: RunRecord = _record(
        RunRecord,
        row,
        status=RunStatus(row.status),
        requested_scopes=frozenset(row.requested_scopes),
    )
    return result


class PostgresRunRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def create(self, run: RunRecord) -> RunRecord:
        await self._tx.execute(insert(runs).values(_run_row(run)))
        return run

    async def get(self, run_id: UUID, principal: Principal | None) -> RunRecord:
        query = select(runs).where(runs.c.id == run_id, _owned(runs, principal))
        row = (await self._tx.execute(query)).first()
        if row is None:
            raise NotFoundError(NOT_FOUND, "run not found", {"run_id": str(run_id)})
        return _to_run(row)

    async def get_many(
        self, run_ids: Collection[UUID], principal: Principal | None
    ) -> dict[UUID, RunRecord]:
        if not run_ids:
            return {}
        # One array parameter, not an expanding IN: one statement text for any count.
        ids = bindparam("run_ids", list(run_ids), type_=ARRAY(runs.c.id.type))
        query = select(runs).where(runs.c.id == any_(ids), _owned(runs, principal))
        return {row.id: _to_run(row) for row in (await self._tx.execute(query)).all()}

    async def save(self, run: RunRecord, *, expected_fencing_token: int) -> RunRecord:
        row = _run_row(run)
        # Only the mutable columns: the run worker's role may update nothing else.
        result = await self._tx.execute(
            update(runs)
            .where(runs.c.id == run.id, runs.c.fencing_token == expected_fencing_token)
            .values({k: row[k] for k in RUN_MUTABLE_COLUMNS})
        )
        if result.rowcount != 1:
            raise ConflictError(STALE, "the run's fencing token moved", {"run_id": str(run.id)})
        return run

    async def add_checkpoint(self, checkpoint: RunCheckpoint) -> RunCheckpoint:
        await self._tx.execute(insert(run_checkpoints).values(asdict(checkpoint)))
        return checkpoint

    async def checkpoints(self, run_id: UUID) -> list[RunCheckpoint]:
        query = (
            select(run_checkpoints)
            .where(run_checkpoints.c.run_id == run_id)
            .order_by(run_checkpoints.c.seq)
        )
        return [_record(RunCheckpoint, r) for r in (await self._tx.execute(query)).all()]


class PostgresProcessEventRepository:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def append(self, event: ProcessEvent) -> ProcessEvent:
        # Shallow: ``asdict`` deep-copies the payload, a tenth of the append's cost.
        await self._tx.fetch(_APPEND_EVENT, {name: getattr(event, name) for name in _EVENT})
        return event

    async def append_once(self, event: ProcessEvent) -> bool:
        statement = (
            pg_insert(process_events)
            .values(asdict(event))
            .on_conflict_do_nothing(index_elements=[process_events.c.id])
            .returning(process_events.c.id)
        )
        return (await self._tx.execute(statement)).first() is not None

    async def for_schedule(self, schedule_id: UUID) -> list[ProcessEvent]:
        query = (
            select(process_events)
            .where(process_events.c.schedule_id == schedule_id)
            .order_by(process_events.c.occurred_at, process_events.c.id)
        )
        return [_record(ProcessEvent, r) for r in (await self._tx.execute(query)).all()]

    async def count(self) -> int:
        """Visible process events (diagnostics and tests)."""
        return int(
            (await self._tx.execute(select(func.count()).select_from(process_events))).scalar_one()
        )
