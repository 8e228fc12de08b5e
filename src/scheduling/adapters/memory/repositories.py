"""In-memory repositories with the same contracts as the PostgreSQL ones."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from datetime import datetime
from uuid import UUID

from scheduling.adapters.memory.store import Tables, Working
from scheduling.domain.errors import ConflictError, NotFoundError, ValidationError
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.paging import (
    INVALID_CURSOR,
    Page,
    PageRequest,
    decode_cursor,
    encode_cursor,
)
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import TERMINAL_STATES, Schedule, ScheduleState
from scheduling.ports.records import (
    RUN_MUTABLE_FIELDS,
    AgentVersionRecord,
    ErasureResult,
    IdempotencyEntry,
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunRecord,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.repositories import (
    DUPLICATE,
    INVALID_COMMAND,
    KEY_REUSED,
    MISSING_REFERENCE,
    NOT_FOUND,
    STALE,
    IdList,
    ScheduleCommand,
    ScheduleListing,
)

_MUTABLE = (
    "state",
    "pause_reason",
    "current_revision",
    "next_fire_at",
    "consecutive_failures",
    "updated_at",
)


class _Base:
    def __init__(self, uow: Working) -> None:
        self._uow = uow

    @property
    def t(self) -> Tables:
        return self._uow.tables()

    def _sees(self, tenant_id: str, principal_id: str, principal: Principal | None) -> bool:
        if not self._uow.scope.sees(tenant_id, principal_id):
            return False
        return principal is None or (tenant_id, principal_id) == (
            principal.tenant_id,
            principal.principal_id,
        )

    def _schedule(self, schedule_id: UUID, principal: Principal | None) -> Schedule | None:
        s = self.t.schedules.get(schedule_id)
        if s is None or not self._sees(s.tenant_id, s.principal_id, principal):
            return None
        return s


class MemoryScheduleRepository(_Base):
    async def create(self, schedule: Schedule, revision: ScheduleRevision) -> Schedule:
        if revision.schedule_id != schedule.id or revision.revision != schedule.current_revision:
            raise ValidationError(INVALID_COMMAND, "the revision does not belong to the schedule")
        if schedule.id in self.t.schedules:
            raise ConflictError(DUPLICATE, "schedule exists")
        self.t.schedules[schedule.id] = schedule
        self.t.revisions[(schedule.id, revision.revision)] = revision
        return schedule

    async def get(
        self, schedule_id: UUID, principal: Principal | None, *, for_update: bool = False
    ) -> Schedule:
        s = self._schedule(schedule_id, principal)
        if s is None:
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        return s

    async def lock_due(self, schedule_id: UUID, now: datetime) -> Schedule | None:
        s = self._schedule(schedule_id, None)
        if s is None or s.state is not ScheduleState.ACTIVE or s.next_fire_at is None:
            return None
        return s if s.next_fire_at <= now else None

    async def get_revision(
        self, schedule_id: UUID, revision: int, principal: Principal | None
    ) -> ScheduleRevision:
        found = self.t.revisions.get((schedule_id, revision))
        if found is None or self._schedule(schedule_id, principal) is None:
            raise NotFoundError(NOT_FOUND, "revision not found", {"schedule_id": str(schedule_id)})
        return found

    async def get_current(
        self, schedule_id: UUID, principal: Principal
    ) -> tuple[Schedule, ScheduleRevision]:
        schedule = await self.get(schedule_id, principal)
        return schedule, await self.get_revision(schedule_id, schedule.current_revision, principal)

    async def get_revisions(
        self, keys: Sequence[tuple[UUID, int]], principal: Principal | None
    ) -> dict[tuple[UUID, int], ScheduleRevision]:
        return {
            key: found
            for key in keys
            if (found := self.t.revisions.get(key)) is not None
            and self._schedule(key[0], principal) is not None
        }

    async def list(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[Schedule]:
        rows = [
            s
            for s in self.t.schedules.values()
            if self._sees(s.tenant_id, s.principal_id, principal)
            and (states is None or s.state in states)
        ]
        rows.sort(key=lambda s: (s.updated_at, s.id.bytes), reverse=True)
        if page.cursor is not None:
            updated_at, last_id = decode_cursor("schedules", page.cursor, 2)
            try:
                key = (datetime.fromisoformat(updated_at), UUID(last_id).bytes)
            except ValueError:
                raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
            rows = [s for s in rows if (s.updated_at, s.id.bytes) < key]
        items = rows[: page.limit]
        cursor = None
        if len(rows) > page.limit:
            last = items[-1]
            cursor = encode_cursor("schedules", [last.updated_at.isoformat(), str(last.id)])
        return Page(items=items, next_cursor=cursor)

    async def list_summaries(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[ScheduleListing]:
        found = await self.list(principal, page, states)
        items = []
        for s in found.items:
            revision = await self.get_revision(s.id, s.current_revision, principal)
            items.append(
                ScheduleListing(
                    s.id,
                    s.tenant_id,
                    s.principal_id,
                    s.state.value,
                    None if s.pause_reason is None else s.pause_reason.value,
                    s.current_revision,
                    s.next_fire_at,
                    s.created_at,
                    s.updated_at,
                    revision.title,
                    dict(revision.cadence),
                    revision.instruction,
                )
            )
        return Page(items=items, next_cursor=found.next_cursor)

    async def mutate(self, command: ScheduleCommand) -> Schedule:
        current = await self.get(command.updated.id, command.principal)
        if any(getattr(current, f) != getattr(command.expected, f) for f in _MUTABLE):
            raise ConflictError(
                STALE,
                "the schedule changed since it was read",
                {"schedule_id": str(current.id), "current_revision": current.current_revision},
            )
        if command.revision is not None:
            key = (command.revision.schedule_id, command.revision.revision)
            if key in self.t.revisions:
                raise ConflictError(DUPLICATE, "revision exists")
            self.t.revisions[key] = command.revision
        self.t.schedules[current.id] = command.updated
        return command.updated

    async def due(self, now: datetime, limit: int) -> IdList:
        due = [
            s
            for s in self.t.schedules.values()
            if s.state is ScheduleState.ACTIVE
            and s.next_fire_at is not None
            and s.next_fire_at <= now
            and self._uow.scope.sees(s.tenant_id, s.principal_id)
        ]
        due.sort(key=lambda s: (s.next_fire_at, s.id.bytes))
        return [s.id for s in due[:limit]]

    async def next_fire_at(self) -> datetime | None:
        times = [
            s.next_fire_at
            for s in self.t.schedules.values()
            if s.state is ScheduleState.ACTIVE and s.next_fire_at is not None
        ]
        return min(times, default=None)

    async def purge_terminal(self, tenant_id: str, before: datetime, limit: int) -> int:
        victims = sorted(
            (
                s
                for s in self.t.schedules.values()
                if s.tenant_id == tenant_id
                and s.state in TERMINAL_STATES
                and s.updated_at <= before
                and self._uow.scope.sees(s.tenant_id, s.principal_id)
            ),
            key=lambda s: (s.updated_at, s.id.bytes),
        )[:limit]
        ids = {s.id for s in victims}
        t = self.t
        t.idempotency = {k: v for k, v in t.idempotency.items() if v.schedule_id not in ids}
        t.occurrences = {k: v for k, v in t.occurrences.items() if v.schedule_id not in ids}
        t.revisions = {k: v for k, v in t.revisions.items() if k[0] not in ids}
        t.schedules = {k: v for k, v in t.schedules.items() if k not in ids}
        return len(ids)


class MemoryOccurrenceRepository(_Base):
    async def insert(self, occurrence: ScheduleOccurrence) -> ScheduleOccurrence:
        for existing in self.t.occurrences.values():
            if (existing.schedule_id, existing.nominal_fire_at) == (
                occurrence.schedule_id,
                occurrence.nominal_fire_at,
            ):
                return existing
        if occurrence.id in self.t.occurrences:
            raise ConflictError(DUPLICATE, "occurrence id exists")
        if (occurrence.schedule_id, occurrence.schedule_revision) not in self.t.revisions:
            raise ConflictError(MISSING_REFERENCE, "the occurrence's revision does not exist")
        for other in self.t.occurrences.values():
            same_run = occurrence.run_id is not None and other.run_id == occurrence.run_id
            same_session = (
                occurrence.session_id is not None and other.session_id == occurrence.session_id
            )
            if same_run or same_session:
                raise ConflictError(DUPLICATE, "the run or session is linked already")
        self.t.occurrences[occurrence.id] = occurrence
        return occurrence

    async def get(self, occurrence_id: UUID, principal: Principal | None) -> ScheduleOccurrence:
        found = self.t.occurrences.get(occurrence_id)
        if found is None or self._schedule(found.schedule_id, principal) is None:
            raise NotFoundError(NOT_FOUND, "occurrence not found", {"id": str(occurrence_id)})
        return found

    async def list(
        self, schedule_id: UUID, principal: Principal, page: PageRequest
    ) -> Page[ScheduleOccurrence]:
        if self._schedule(schedule_id, principal) is None:
            raise NotFoundError(NOT_FOUND, "schedule not found", {"schedule_id": str(schedule_id)})
        rows = sorted(
            (o for o in self.t.occurrences.values() if o.schedule_id == schedule_id),
            key=lambda o: o.nominal_fire_at,
            reverse=True,
        )
        if page.cursor is not None:
            (nominal,) = decode_cursor("occurrences", page.cursor, 1)
            try:
                after = datetime.fromisoformat(nominal)
            except ValueError:
                raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
            rows = [o for o in rows if o.nominal_fire_at < after]
        items = rows[: page.limit]
        cursor = None
        if len(rows) > page.limit:
            cursor = encode_cursor("occurrences", [items[-1].nominal_fire_at.isoformat()])
        return Page(items=items, next_cursor=cursor)

    async def latest(
        self, schedule_id: UUID, disposition: OccurrenceDisposition | None = None
    ) -> ScheduleOccurrence | None:
        rows = [
            o
            for o in self.t.occurrences.values()
            if o.schedule_id == schedule_id
            and (disposition is None or o.disposition is disposition)
            and self._schedule(o.schedule_id, None) is not None
        ]
        return max(rows, key=lambda o: o.nominal_fire_at, default=None)

    async def for_run(self, run_id: UUID) -> ScheduleOccurrence | None:
        for o in self.t.occurrences.values():
            if o.run_id == run_id and self._schedule(o.schedule_id, None) is not None:
                return o
        return None


class MemoryIdempotencyLedger(_Base):
    async def lookup(self, principal: Principal, key: str) -> IdempotencyEntry | None:
        entry = self.t.idempotency.get((principal.tenant_id, principal.principal_id, key))
        if entry is None or not self._sees(entry.tenant_id, entry.principal_id, principal):
            return None
        return entry

    async def record(self, entry: IdempotencyEntry) -> IdempotencyEntry:
        key = (entry.tenant_id, entry.principal_id, entry.key)
        stored = self.t.idempotency.get(key)
        if stored is None:
            if entry.schedule_id not in self.t.schedules:
                raise ConflictError(MISSING_REFERENCE, "the schedule does not exist")
            self.t.idempotency[key] = entry
            return entry
        if stored.request_hash != entry.request_hash:
            raise ConflictError(KEY_REUSED, "the idempotency key was used for another request")
        return stored


class MemoryPrincipalRepository(_Base):
    async def put(self, record: PrincipalRecord) -> None:
        self.t.principals[(record.tenant_id, record.principal_id)] = record

    async def get(self, tenant_id: str, principal_id: str) -> PrincipalRecord | None:
        found = self.t.principals.get((tenant_id, principal_id))
        if found is None or not self._sees(tenant_id, principal_id, None):
            return None
        return found


class MemoryAgentRepository(_Base):
    async def put_version(self, record: AgentVersionRecord) -> None:
        key = (record.agent_id, record.version)
        if key in self.t.agent_versions:
            raise ConflictError(DUPLICATE, "agent version exists")
        self.t.agent_versions[key] = record

    async def get_version(self, agent_id: UUID, version: str) -> AgentVersionRecord | None:
        return self.t.agent_versions.get((agent_id, version))

    async def set_active(self, agent_id: UUID, version: str, at: datetime) -> None:
        if (agent_id, version) not in self.t.agent_versions:
            raise ConflictError(MISSING_REFERENCE, "agent version does not exist")
        self.t.agent_active[agent_id] = version

    async def active(self, agent_id: UUID) -> AgentVersionRecord | None:
        version = self.t.agent_active.get(agent_id)
        return None if version is None else self.t.agent_versions.get((agent_id, version))


class MemorySessionRepository(_Base):
    async def create(self, session: SessionRecord) -> SessionRecord:
        if session.id in self.t.sessions:
            raise ConflictError(DUPLICATE, "session exists")
        self.t.sessions[session.id] = session
        return session

    async def get(self, session_id: UUID, principal: Principal | None) -> SessionRecord:
        found = self.t.sessions.get(session_id)
        if found is None or not self._sees(found.tenant_id, found.principal_id, principal):
            raise NotFoundError(NOT_FOUND, "session not found", {"session_id": str(session_id)})
        return found

    async def append_event(self, event: SessionEvent) -> SessionEvent:
        key = (event.session_id, event.seq)
        if key in self.t.session_events:
            raise ConflictError(DUPLICATE, "event seq exists")
        if event.session_id not in self.t.sessions:
            raise ConflictError(MISSING_REFERENCE, "session does not exist")
        self.t.session_events[key] = event
        return event

    async def events(
        self, session_id: UUID, principal: Principal | None, *, include_context_only: bool = True
    ) -> list[SessionEvent]:
        try:
            await self.get(session_id, principal)
        except NotFoundError:
            return []
        rows = [
            e
            for (sid, _), e in self.t.session_events.items()
            if sid == session_id and (include_context_only or not e.context_only)
        ]
        return sorted(rows, key=lambda e: e.seq)

    async def erase(
        self, session_id: UUID, principal: Principal | None, erased_at: datetime
    ) -> ErasureResult:
        await self.get(session_id, principal)
        t = self.t
        run_ids = {r.id for r in t.runs.values() if r.session_id == session_id}
        marked = 0
        for o in list(t.occurrences.values()):
            linked = o.session_id == session_id or (o.run_id is not None and o.run_id in run_ids)
            if o.disposition is OccurrenceDisposition.MATERIALIZED and linked:
                t.occurrences[o.id] = o.model_copy(
                    update={"session_id": None, "run_id": None, "links_erased_at": erased_at}
                )
                marked += 1
        t.checkpoints = {k: v for k, v in t.checkpoints.items() if k[0] not in run_ids}
        before = len(t.session_events)
        t.session_events = {k: v for k, v in t.session_events.items() if k[0] != session_id}
        events_deleted = before - len(t.session_events)
        t.runs = {k: v for k, v in t.runs.items() if k not in run_ids}
        del t.sessions[session_id]
        return ErasureResult(session_id, marked, len(run_ids), events_deleted)


class MemoryRunRepository(_Base):
    async def create(self, run: RunRecord) -> RunRecord:
        if run.id in self.t.runs:
            raise ConflictError(DUPLICATE, "run exists")
        if run.session_id not in self.t.sessions:
            raise ConflictError(MISSING_REFERENCE, "session does not exist")
        self.t.runs[run.id] = run
        return run

    async def get(self, run_id: UUID, principal: Principal | None) -> RunRecord:
        found = self.t.runs.get(run_id)
        if found is None or not self._sees(found.tenant_id, found.principal_id, principal):
            raise NotFoundError(NOT_FOUND, "run not found", {"run_id": str(run_id)})
        return found

    async def get_many(
        self, run_ids: Collection[UUID], principal: Principal | None
    ) -> dict[UUID, RunRecord]:
        found = (self.t.runs.get(run_id) for run_id in run_ids)
        return {
            run.id: run
            for run in found
            if run is not None and self._sees(run.tenant_id, run.principal_id, principal)
        }

    async def save(self, run: RunRecord, *, expected_fencing_token: int) -> RunRecord:
        current = self.t.runs.get(run.id)
        if current is None or current.fencing_token != expected_fencing_token:
            raise ConflictError(STALE, "the run's fencing token moved", {"run_id": str(run.id)})
        kept = replace(current, **{name: getattr(run, name) for name in RUN_MUTABLE_FIELDS})
        self.t.runs[run.id] = kept
        return kept

    async def add_checkpoint(self, checkpoint: RunCheckpoint) -> RunCheckpoint:
        key = (checkpoint.run_id, checkpoint.seq)
        if key in self.t.checkpoints:
            raise ConflictError(DUPLICATE, "checkpoint exists")
        if checkpoint.run_id not in self.t.runs:
            raise ConflictError(MISSING_REFERENCE, "run does not exist")
        self.t.checkpoints[key] = checkpoint
        return checkpoint

    async def checkpoints(self, run_id: UUID) -> list[RunCheckpoint]:
        rows = [c for (rid, _), c in self.t.checkpoints.items() if rid == run_id]
        return sorted(rows, key=lambda c: c.seq)


class MemoryProcessEventRepository(_Base):
    async def append(self, event: ProcessEvent) -> ProcessEvent:
        if event.id in self.t.events:
            raise ConflictError(DUPLICATE, "event exists")
        self.t.events[event.id] = event
        return event

    async def append_once(self, event: ProcessEvent) -> bool:
        if event.id in self.t.events:
            return False
        self.t.events[event.id] = event
        return True

    async def for_schedule(self, schedule_id: UUID) -> list[ProcessEvent]:
        rows = [
            e
            for e in self.t.events.values()
            if e.schedule_id == schedule_id and self._sees(e.tenant_id, e.principal_id, None)
        ]
        key: Callable[[ProcessEvent], tuple[datetime, bytes]] = lambda e: (  # noqa: E731
            e.occurred_at,
            e.id.bytes,
        )
        return sorted(rows, key=key)
