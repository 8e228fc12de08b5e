"""Repository ports. Each docstring is the contract every adapter must honour.

Shared rules for every port:

* Repositories are obtained from a ``UnitOfWork`` and act inside its transaction;
  nothing is durable until ``UnitOfWork.commit()``.
* Principal-scoped methods take a ``Principal``; a row owned by another tenant or
  principal is indistinguishable from an absent row (``NotFoundError`` with
  ``NOT_FOUND``, or simply not listed). ``principal=None`` is the trusted path of
  the scheduler, accountant and maintenance roles and is never reachable from a
  request.
* Times are parameters (Clock-supplied). No adapter reads the clock.
* Failures are domain errors with the stable codes below, never driver errors.

The executable form of these contracts is ``tests/contract`` (one suite per port,
run against every adapter registered in ``tests/contract/registry.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol
from uuid import UUID

from scheduling.domain.admission import TenantUsage
from scheduling.domain.errors import ValidationError
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.paging import Page, PageRequest
from scheduling.domain.reasons import reason
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.records import (
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

# ``list`` is also a method name in the protocols below; these aliases keep types clear.
IdList = list[UUID]
EventList = list[ProcessEvent]

NOT_FOUND = reason("schedule.persistence.not_found", "The row is absent or not visible")
STALE = reason(
    "schedule.persistence.stale", "The row changed since it was read; nothing was written"
)
DUPLICATE = reason("schedule.persistence.duplicate", "A row with the same key already exists")
CONSTRAINT = reason(
    "schedule.persistence.constraint_violated", "The database rejected an illegal row state"
)
INVALID_VALUE = reason(
    "schedule.persistence.invalid_value",
    "The database cannot hold a value (SQLSTATE class 22: out of range, malformed)",
)
MISSING_REFERENCE = reason(
    "schedule.persistence.missing_reference", "A referenced row does not exist at commit"
)
FORBIDDEN = reason(
    "schedule.persistence.forbidden", "The database role may not read or write this row"
)
RETRY = reason(
    "schedule.persistence.retry", "A serialization failure or deadlock; retry the transaction"
)
UNAVAILABLE = reason("schedule.persistence.unavailable", "The database cannot be reached")
COMMIT_OUTCOME_UNKNOWN = "commit_outcome_unknown"
"""``details`` key of an UNAVAILABLE error raised by a COMMIT whose connection broke:
the transaction may or may not have committed."""
INVALID_COMMAND = reason(
    "schedule.persistence.invalid_command", "A schedule write whose before/after do not fit"
)
KEY_REUSED = reason(
    "schedule.idempotency.key_reused", "An idempotency key was reused with different content"
)
CLOSED = reason(
    "schedule.persistence.uow_closed", "The unit of work was used outside its transaction"
)


@dataclass(frozen=True)
class ScheduleCommand:
    """A compare-and-set write of one schedule's control record.

    The service derives ``updated`` from ``expected`` with the domain's state machine.
    The write applies only if the stored row still equals ``expected`` in every mutable
    field (state, pause_reason, current_revision, next_fire_at, consecutive_failures,
    updated_at). ``revision`` is the new immutable revision when the command is an
    update: then ``updated.current_revision == expected.current_revision + 1 ==
    revision.revision``; otherwise the revision number must not change.
    """

    expected: Schedule
    updated: Schedule
    principal: Principal | None = None
    revision: ScheduleRevision | None = None

    def __post_init__(self) -> None:
        e, u = self.expected, self.updated
        same_identity = (e.id, e.tenant_id, e.principal_id, e.created_at) == (
            u.id,
            u.tenant_id,
            u.principal_id,
            u.created_at,
        )
        if self.revision is None:
            numbers_fit = u.current_revision == e.current_revision
        else:
            numbers_fit = (
                self.revision.schedule_id == u.id
                and self.revision.revision == u.current_revision == e.current_revision + 1
            )
        if not same_identity or not numbers_fit:
            raise ValidationError(INVALID_COMMAND, "the command's before and after do not fit")


class ScheduleListing(NamedTuple):
    """One list row as stored: the control record's fields beside its current
    revision's title, canonical cadence payload and instruction. Built from the row of
    the adapter's own SELECT as plain values: no ``Schedule`` and no revision is built
    or validated per row (a page needs a summary; ADR 2420). A tuple, the cheapest
    immutable record to build (a frozen dataclass of these twelve fields costs 4x)."""

    id: UUID
    tenant_id: str
    principal_id: str
    state: str
    pause_reason: str | None
    current_revision: int
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    title: str
    cadence: dict[str, object]
    instruction: str


class ScheduleRepository(Protocol):
    """Schedules and their immutable revisions."""

    async def create(self, schedule: Schedule, revision: ScheduleRevision) -> Schedule:
        """Insert ``schedule`` and its first ``revision`` (``revision.revision ==
        schedule.current_revision``). Raises ``ConflictError(DUPLICATE)`` when the id
        exists, ``ValidationError(INVALID_COMMAND)`` when the two do not belong together."""
        ...

    async def get(
        self, schedule_id: UUID, principal: Principal | None, *, for_update: bool = False
    ) -> Schedule:
        """The schedule, if visible to ``principal`` (``None``: trusted path).
        ``for_update`` locks the row until the transaction ends. Raises
        ``NotFoundError(NOT_FOUND)``."""
        ...

    async def lock_due(self, schedule_id: UUID, now: datetime) -> Schedule | None:
        """Lock the schedule with ``FOR UPDATE SKIP LOCKED`` if it is ACTIVE and
        ``next_fire_at <= now``; ``None`` when it is not due or another transaction
        holds it. Trusted path only."""
        ...

    async def get_revision(
        self, schedule_id: UUID, revision: int, principal: Principal | None
    ) -> ScheduleRevision:
        """One immutable revision, if its schedule is visible. Raises ``NotFoundError``."""
        ...

    async def get_current(
        self, schedule_id: UUID, principal: Principal
    ) -> tuple[Schedule, ScheduleRevision]:
        """``get`` and ``get_revision`` of its ``current_revision`` in one read (the
        point read, ADR 2420): the schedule and the revision of one snapshot. An
        absent or another principal's schedule, or a missing current revision (a
        broken invariant), raises ``NotFoundError(NOT_FOUND)``."""
        ...

    async def get_revisions(
        self, keys: Sequence[tuple[UUID, int]], principal: Principal | None
    ) -> dict[tuple[UUID, int], ScheduleRevision]:
        """The revisions named by ``(schedule_id, revision)`` in one read (a list page's
        current revisions); a key whose schedule is not visible is absent, never an
        error."""
        ...

    async def list(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[Schedule]:
        """The principal's schedules, most recently updated first (``updated_at`` then
        ``id``, both descending), optionally only in ``states``. Keyset paginated: the
        pages of one unchanged data set are disjoint and their union is the whole set.
        A malformed cursor raises ``ValidationError(schedule.page.invalid_cursor)``."""
        ...

    async def list_summaries(
        self,
        principal: Principal,
        page: PageRequest,
        states: frozenset[ScheduleState] | None = None,
    ) -> Page[ScheduleListing]:
        """``list`` with each schedule's current revision's title, cadence and
        instruction, in one read: same order, filter, cursor and errors. A schedule
        whose current revision is missing (a broken invariant) raises
        ``NotFoundError(NOT_FOUND)``, as its point read would."""
        ...

    async def mutate(self, command: ScheduleCommand) -> Schedule:
        """Apply a compare-and-set write (see ``ScheduleCommand``); returns
        ``command.updated``. Raises ``NotFoundError(NOT_FOUND)`` when absent or invisible
        to ``command.principal``, ``ConflictError(STALE)`` with ``details["current_revision"]``
        when the stored row differs from ``command.expected`` (and writes nothing)."""
        ...

    async def due(self, now: datetime, limit: int) -> IdList:
        """At most ``limit`` ids of ACTIVE schedules with ``next_fire_at <= now``, in
        ``(next_fire_at, id)`` order. Takes no locks. Trusted path only."""
        ...

    async def next_fire_at(self) -> datetime | None:
        """The earliest ``next_fire_at`` of any ACTIVE schedule, or ``None``."""
        ...

    async def purge_terminal(self, tenant_id: str, before: datetime, limit: int) -> int:
        """Delete at most ``limit`` COMPLETED or CANCELLED schedules of ``tenant_id`` whose
        ``updated_at <= before`` (skipping rows locked elsewhere), with their idempotency
        keys, occurrences and revisions, in dependency order. Never deletes sessions,
        runs or events. Returns the number of schedules deleted."""
        ...


class ScheduleOccurrenceRepository(Protocol):
    """The occurrence ledger: what the scheduler decided for each nominal instant."""

    async def insert(self, occurrence: ScheduleOccurrence) -> ScheduleOccurrence:
        """Insert unless ``(schedule_id, nominal_fire_at)`` exists; returns the stored
        occurrence for that key: ``occurrence`` itself when inserted, otherwise the one
        already committed (compare ids). A concurrent uncommitted insert of the same key
        is waited for. Links are checked at commit (deferred foreign keys)."""
        ...

    async def get(self, occurrence_id: UUID, principal: Principal | None) -> ScheduleOccurrence:
        """One occurrence if its schedule is visible. Raises ``NotFoundError``."""
        ...

    async def list(
        self, schedule_id: UUID, principal: Principal, page: PageRequest
    ) -> Page[ScheduleOccurrence]:
        """The schedule's occurrences, newest ``nominal_fire_at`` first, keyset paginated.
        Raises ``NotFoundError`` when the schedule is absent or not the principal's."""
        ...

    async def latest(
        self, schedule_id: UUID, disposition: OccurrenceDisposition | None = None
    ) -> ScheduleOccurrence | None:
        """The occurrence with the greatest ``nominal_fire_at`` (of ``disposition`` if
        given). Trusted path only."""
        ...

    async def for_run(self, run_id: UUID) -> ScheduleOccurrence | None:
        """The occurrence linked to ``run_id``, if any. Trusted path only."""
        ...


class ScheduleIdempotencyLedger(Protocol):
    """Create-request idempotency keys, scoped to (tenant, principal, key)."""

    async def lookup(self, principal: Principal, key: str) -> IdempotencyEntry | None:
        """The entry for ``key`` of this principal, or ``None``."""
        ...

    async def record(self, entry: IdempotencyEntry) -> IdempotencyEntry:
        """Store ``entry``; if the key exists with the same ``request_hash`` return the
        stored entry (its ``schedule_id`` is the original schedule). Raises
        ``ConflictError(KEY_REUSED)`` when the stored hash differs."""
        ...


class PrincipalRepository(Protocol):
    """The durable principal directory's rows."""

    async def put(self, record: PrincipalRecord) -> None:
        """Insert or replace the principal (trusted administration path)."""
        ...

    async def get(self, tenant_id: str, principal_id: str) -> PrincipalRecord | None:
        """The principal, or ``None`` when absent or not visible."""
        ...


class AgentRepository(Protocol):
    """Versioned AgentSpecs and each agent's floating active pointer."""

    async def put_version(self, record: AgentVersionRecord) -> None:
        """Insert an immutable version. Raises ``ConflictError(DUPLICATE)`` if it exists."""
        ...

    async def get_version(self, agent_id: UUID, version: str) -> AgentVersionRecord | None:
        """The exact version, or ``None``."""
        ...

    async def set_active(self, agent_id: UUID, version: str, at: datetime) -> None:
        """Point the agent's floating pointer at an existing version."""
        ...

    async def active(self, agent_id: UUID) -> AgentVersionRecord | None:
        """The version the floating pointer names, or ``None``."""
        ...


class SessionRepository(Protocol):
    """Sessions, their append-only events, and governed erasure."""

    async def create(self, session: SessionRecord) -> SessionRecord:
        """Insert the session. Raises ``ConflictError(DUPLICATE)`` if the id exists."""
        ...

    async def get(self, session_id: UUID, principal: Principal | None) -> SessionRecord:
        """The session if visible. Raises ``NotFoundError``."""
        ...

    async def append_event(self, event: SessionEvent) -> SessionEvent:
        """Append ``event``; ``seq`` must be the next number (else ``DUPLICATE``)."""
        ...

    async def events(
        self, session_id: UUID, principal: Principal | None, *, include_context_only: bool = True
    ) -> list[SessionEvent]:
        """The session's events in ``seq`` order (none when not visible)."""
        ...

    async def erase(
        self, session_id: UUID, principal: Principal | None, erased_at: datetime
    ) -> ErasureResult:
        """Erase the session graph in the current transaction. First mark every linked
        MATERIALIZED occurrence erased (``links_erased_at = erased_at``, both links
        null), then delete checkpoints, events, runs and the session. Schedule history
        (schedules, revisions, occurrences, process events) is never deleted. Raises
        ``NotFoundError`` when the session is absent or not visible."""
        ...


class RunRepository(Protocol):
    """Durable runs and their checkpoints."""

    async def create(self, run: RunRecord) -> RunRecord:
        """Insert the run. Raises ``ConflictError(DUPLICATE)`` if the id exists."""
        ...

    async def get(self, run_id: UUID, principal: Principal | None) -> RunRecord:
        """The run if visible. Raises ``NotFoundError``."""
        ...

    async def get_many(
        self, run_ids: Collection[UUID], principal: Principal | None
    ) -> dict[UUID, RunRecord]:
        """The visible runs among ``run_ids`` by id, in one read: an unknown id, or one
        ``get`` would refuse (another tenant's or principal's), is absent."""
        ...

    async def save(self, run: RunRecord, *, expected_fencing_token: int) -> RunRecord:
        """Replace the run's mutable fields (``records.RUN_MUTABLE_FIELDS``; others are
        kept as stored) if its stored fencing token equals ``expected_fencing_token``;
        else ``ConflictError(STALE)``."""
        ...

    async def add_checkpoint(self, checkpoint: RunCheckpoint) -> RunCheckpoint:
        """Append a checkpoint (``(run_id, seq)`` unique, else ``DUPLICATE``)."""
        ...

    async def checkpoints(self, run_id: UUID) -> list[RunCheckpoint]:
        """The run's checkpoints in ``seq`` order."""
        ...


class ProcessEventRepository(Protocol):
    """The append-only log of events outside any session."""

    async def append(self, event: ProcessEvent) -> ProcessEvent:
        """Append ``event``. Raises ``ConflictError(DUPLICATE)`` if the id exists."""
        ...

    async def append_once(self, event: ProcessEvent) -> bool:
        """Append ``event`` unless an event with its id exists (then change nothing);
        True when it was appended. A concurrent appender of the same id makes this wait
        for its outcome, never fail: idempotent writers use it instead of catching a
        unique violation (which PostgreSQL logs as an ERROR)."""
        ...

    async def for_schedule(self, schedule_id: UUID) -> list[ProcessEvent]:
        """The schedule's events in ``(occurred_at, id)`` order (visible rows only)."""
        ...


class AdmissionRepository(Protocol):
    """Admission's reads inside the caller's transaction (spec "Capacity, fairness, and
    cost"): the tenant's admission lock, held until the transaction ends, and its
    committed scheduled-run usage. Writes nothing."""

    async def lock_tenant(self, tenant_id: str) -> None:
        """Serialize ``tenant_id``'s admissions until this transaction ends (at most one
        lock statement per transaction; none if the context read already took it)."""
        ...

    async def usage(self, tenant_id: str, now: datetime) -> TenantUsage:
        """The tenant's committed scheduled-run usage at ``now`` (one statement)."""
        ...


class PendingAccountsRepository(Protocol):
    """Terminal scheduled runs not yet accounted (no ``schedule.run_accounted`` event
    for their MATERIALIZED occurrence), oldest finish first."""

    async def pending(self, limit: int) -> list[UUID]: ...

    async def claim(self, limit: int) -> list[UUID]:
        """``pending``, less what a concurrent claim holds, each returned run held for
        this transaction (schedulers share the work in disjoint batches, ADR 2221)."""
        ...
