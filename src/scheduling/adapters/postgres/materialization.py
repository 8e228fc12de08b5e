"""The PostgreSQL ``MaterializationStore``: one statement per step (ADR 1700, 2330).

Each statement is built once at import with bound parameters, so a call only binds
values (SQLAlchemy's compiled cache keys on the same statement object; asyncpg keeps
the prepared statement per pooled connection):

* ``LOCK_DUE`` locks the schedule ``FOR UPDATE OF schedules SKIP LOCKED`` and reads its
  current revision in the same statement (scalar subqueries: if the revision row was
  committed after the statement's snapshot, e.g. an update racing the lock, they are
  NULL and the revision is read by a second statement under the lock);
* ``CONTEXT`` reads the principal, the pinned agent version and the run of the latest
  MATERIALIZED occurrence in one snapshot, under the row lock, through the schedule
  transaction (the scheduler role's trusted scope; no transaction of its own), and
  takes the tenant's admission lock in the same statement (ADR 1750), so admission
  sends no lock statement of its own;
* ``decision_statement`` writes the whole decision (ADR 2330): the occurrence INSERT
  (``ON CONFLICT DO NOTHING``) first, and every other write as a data-modifying CTE
  that selects its rows ``FROM`` the occurrence's RETURNING, so it writes only if
  the occurrence was new: the session, its three events (one INSERT, ADR 2680), the
  run and its checkpoint (or the outcome row), the decision's process events and the
  schedule's CAS UPDATE.
  All CTEs share one snapshot and run to completion; foreign keys are checked at the
  end of the statement. It returns whether the occurrence and the advance were written;
* ``QUEUE_RUN`` writes the run's rows alone, in one INSERT;
* ``advance`` is the schedule's CAS UPDATE with every process event as data-modifying
  CTEs: one statement (ADR 1750), for an advance without a new occurrence.

Every statement runs through ``Transaction.fetch`` as a ``Prepared`` (ADR 1740):
compiled once, sent by asyncpg directly, rows read as records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from operator import attrgetter
from typing import Any
from uuid import UUID

from asyncpg import Record
from sqlalchemy import (
    CTE,
    BigInteger,
    Insert,
    Select,
    Table,
    and_,
    bindparam,
    column,
    func,
    insert,
    literal,
    literal_column,
    select,
    true,
    values,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from scheduling.adapters.postgres.admission import (
    admission_lock_key,
    usage_of,
    usage_params,
    usage_query,
)
from scheduling.adapters.postgres.memo import Memo, authority_version_of, revision_of
from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.repositories.occurrences import (
    INSERT_OCCURRENCE,
    occurrence_row,
)
from scheduling.adapters.postgres.repositories.schedules import (
    PostgresScheduleRepository,
    trusted_cas_params,
    trusted_cas_statement,
)
from scheduling.adapters.postgres.tables import (
    agent_versions,
    principals,
    process_events,
    run_checkpoints,
    runs,
    schedule_occurrences,
    schedule_outbox,
    schedule_revisions,
    schedules,
    session_events,
    sessions,
)
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.directories import AgentSpec, AuthoritySnapshot
from scheduling.ports.firing import Decision, FiringContext, QueuedRun
from scheduling.ports.records import ProcessEvent, RunStatus
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork

_rev = schedule_revisions.c


def _revision_column(name: str) -> Any:
    return (
        select(_rev[name])
        .where(_rev.schedule_id == schedules.c.id, _rev.revision == schedules.c.current_revision)
        .scalar_subquery()
        .label(f"r_{name}")
    )


LOCK_DUE: Select[Any] = (
    select(
        schedules,
        _revision_column("definition"),
        _revision_column("created_by_principal_id"),
        _revision_column("created_at"),
    )
    .where(
        schedules.c.id == bindparam("schedule_id"),
        schedules.c.state == ScheduleState.ACTIVE.value,
        schedules.c.next_fire_at <= bindparam("now", type_=schedules.c.next_fire_at.type),
    )
    .with_for_update(of=schedules, skip_locked=True)
)

# ``admission_lock_key`` in SQL: the first 8 bytes of sha256 as a signed big-endian
# bigint. The lock statement returns it and ``lock_due`` compares it with the Python
# key, so the two can never drift apart silently.
_ADMISSION_KEY_SQL = (
    "('x' || left(encode(sha256(convert_to('scheduling.admission:' || locked.tenant_id,"
    " 'UTF8')), 'hex'), 16))::bit(64)::bigint"
)
_locked = LOCK_DUE.cte("locked").prefix_with("MATERIALIZED")
LOCK_DUE_ADMITTING: Select[Any] = select(
    _locked,
    literal_column(_ADMISSION_KEY_SQL).label("admission_key"),
    func.pg_advisory_xact_lock(literal_column(_ADMISSION_KEY_SQL)).label("admission_locked"),
).select_from(_locked)
"""``LOCK_DUE`` that also takes the tenant's admission lock (ADR 2250): the CTE is
materialized, so the lock is taken for the row ``FOR UPDATE SKIP LOCKED`` returned,
after that row lock; the next statement (the context read with the usage) takes its
snapshot after both were granted."""

_occ = schedule_occurrences.c
_latest = (
    select(_occ.run_id)
    .where(
        _occ.schedule_id == bindparam("schedule_id"),
        _occ.disposition == OccurrenceDisposition.MATERIALIZED.value,
    )
    .order_by(_occ.nominal_fire_at.desc())
    .limit(1)
    .lateral("latest")
)
# Without the due lock's admission lock (another store, or the test of the test that
# needs no lock), the context read takes it as before ADR 2250: evaluated once, in the
# FROM subquery (strict: a NULL key takes no lock).
_one = select(
    literal(1).label("one"),
    func.pg_advisory_xact_lock(bindparam("admission_key", type_=BigInteger)).label("locked"),
).subquery("one")
# The tenant's usage for admission (ADR 2250): read in this statement, whose snapshot
# follows the tenant lock the due lock took.
_usage = usage_query().subquery("usage")
USAGE_COLUMNS = tuple(f"u{i}" for i in range(len(_usage.c)))
_CONTEXT_COLUMNS = (
    principals.c.tenant_id.label("principal_found"),
    principals.c.enabled,
    principals.c.scopes,
    principals.c.authority_inputs,
    agent_versions.c.agent_id.label("agent_found"),
    agent_versions.c.policy_profile,
    agent_versions.c.limits,
    agent_versions.c.content_hash,
    _latest.c.run_id,
    runs.c.status.label("run_status"),
)


def _context(base: Any, *extra: Any) -> Select[Any]:
    return select(*_CONTEXT_COLUMNS, *extra).select_from(
        base.outerjoin(
            principals,
            and_(
                principals.c.tenant_id == bindparam("tenant_id"),
                principals.c.principal_id == bindparam("principal_id"),
            ),
        )
        .outerjoin(
            agent_versions,
            and_(
                agent_versions.c.agent_id
                == bindparam("agent_id", type_=agent_versions.c.agent_id.type),
                agent_versions.c.version == bindparam("agent_version"),
            ),
        )
        .outerjoin(_latest, true())
        .outerjoin(runs, runs.c.id == _latest.c.run_id)
    )


CONTEXT: Select[Any] = _context(_one)
"""Authority, agent version and overlap state, taking the tenant lock itself."""
CONTEXT_WITH_USAGE: Select[Any] = _context(
    _usage, *(column.label(name) for column, name in zip(_usage.c, USAGE_COLUMNS, strict=True))
)
"""The same after the due lock took the tenant lock, with the tenant's usage."""


def _bound(table: Table, prefix: str) -> dict[str, Any]:
    return {c.name: bindparam(f"{prefix}{c.name}", type_=c.type) for c in table.columns}


def _rows(table: Table, prefix: str, count: int) -> Insert:
    """``count`` rows into ``table`` in one statement: one single-row INSERT plus one
    data-modifying CTE per further row. (SQLAlchemy does not cache the compiled form of
    a multi-row VALUES; single-row INSERTs and their CTEs it does.)"""
    statement = insert(table).values(_bound(table, f"{prefix}0_"))
    extra = [
        insert(table).values(_bound(table, f"{prefix}{i}_")).cte(f"{table.name}_{i}")
        for i in range(1, count)
    ]
    return statement.add_cte(*extra) if extra else statement


SESSION_EVENTS = 3
QUEUE_RUN: Insert = _rows(session_events, "e", SESSION_EVENTS).add_cte(
    insert(sessions).values(_bound(sessions, "s_")).cte("queued_session"),
    insert(runs).values(_bound(runs, "r_")).cte("queued_run"),
    insert(run_checkpoints).values(_bound(run_checkpoints, "c_")).cte("queued_checkpoint"),
)

_ADVANCES: dict[tuple[tuple[str, ...], int], Prepared] = {}
_DECISIONS: dict[tuple[tuple[str, ...], int, bool, bool], Prepared] = {}
_LOCK_DUE = Prepared(LOCK_DUE)
_LOCK_DUE_ADMITTING = Prepared(LOCK_DUE_ADMITTING)
_CONTEXT = Prepared(CONTEXT)
_CONTEXT_WITH_USAGE = Prepared(CONTEXT_WITH_USAGE)
_QUEUE_RUN = Prepared(QUEUE_RUN)
_SCHEDULE_COLUMNS = tuple(c.name for c in schedules.columns)
_OCCURRENCE_COLUMNS = tuple(c.name for c in schedule_occurrences.columns)


def advance_statement(changed: tuple[str, ...], events: int) -> Prepared:
    """The schedule's trusted CAS UPDATE with ``events`` process-event INSERTs as
    data-modifying CTEs (ADR 1750), built once per column set and count. The CTEs run
    whether or not the CAS matches; a CAS that matched no row returns no row, the
    caller raises, and the transaction never commits them."""
    key = (changed, events)
    prepared = _ADVANCES.get(key)
    if prepared is None:
        inserts = [
            insert(process_events).values(_bound(process_events, f"p{i}_")).cte(f"event_{i}")
            for i in range(events)
        ]
        statement = trusted_cas_statement(changed).add_cte(*inserts)
        prepared = _ADVANCES.setdefault(key, Prepared(statement))
    return prepared


_new_occurrence = INSERT_OCCURRENCE.cte("occurrence")


def _if_new(table: Table, prefix: str, *, statement: Any = insert) -> Any:
    """One row into ``table`` selected ``FROM`` the occurrence CTE: written only if
    the occurrence was inserted (a conflict returns no row, so this writes none)."""
    bound = _bound(table, prefix)
    rows = select(*bound.values()).select_from(_new_occurrence)
    return statement(table).from_select(list(bound), rows)


def _events_if_new(count: int) -> Insert:
    """The run's ``count`` session events in ONE INSERT selected ``FROM`` the occurrence
    CTE (ADR 2680): a ``VALUES`` list of the same bound rows (``e0_`` ... in seq order)
    cross-joined with the occurrence's RETURNING, so all are written only if the
    occurrence was new. One data-modifying CTE per event (ADR 2330) made the executor
    set up a result relation per row: its indexes opened and its CHECK constraint parsed
    from the catalog text again for each (``ExecConstraints`` builds them per result
    relation per execution), and a CTE scan each."""
    names = [c.name for c in session_events.columns]
    rows = values(*(column(c.name, c.type) for c in session_events.columns), name="events").data(
        [
            tuple(bindparam(f"e{i}_{c.name}", type_=c.type) for c in session_events.columns)
            for i in range(count)
        ]
    )
    chosen = select(*rows.c).select_from(_new_occurrence).join(rows, true())
    return insert(session_events).from_select(names, chosen)


def _cte(write: Any, name: str) -> CTE:
    cte: CTE = write.cte(name)
    return cte


def decision_statement(
    changed: tuple[str, ...], events: int, *, run: bool, outbox: bool
) -> Prepared:
    """The decision in one statement (ADR 2330), built once per column set, event
    count and shape: the occurrence, then (only if it was new) the run's rows or the
    outcome row, ``events`` process events and the schedule's trusted CAS UPDATE.
    Returns one row: ``inserted`` (0: the instant was already decided, nothing
    written) and ``advanced`` (0 after an insert: a stale CAS, the caller raises and
    the transaction never commits)."""
    key = (changed, events, run, outbox)
    prepared = _DECISIONS.get(key)
    if prepared is not None:
        return prepared
    writes = [_new_occurrence]
    if run:
        writes.append(_cte(_if_new(sessions, "s_"), "queued_session"))
        writes.append(_cte(_events_if_new(SESSION_EVENTS), "queued_events"))
        writes.append(_cte(_if_new(runs, "r_"), "queued_run"))
        writes.append(_cte(_if_new(run_checkpoints, "c_"), "queued_checkpoint"))
    if outbox:
        outcome = _if_new(schedule_outbox, "o_", statement=pg_insert)
        writes.append(_cte(outcome.on_conflict_do_nothing(index_elements=["id"]), "outcome"))
    writes += [_cte(_if_new(process_events, f"p{i}_"), f"event_{i}") for i in range(events)]
    cas = trusted_cas_statement(changed).where(select(_new_occurrence.c.id).exists())
    advanced = _cte(cas, "advanced")
    writes.append(advanced)
    statement = select(
        select(func.count()).select_from(_new_occurrence).scalar_subquery().label("inserted"),
        select(func.count()).select_from(advanced).scalar_subquery().label("advanced"),
    ).add_cte(*writes)
    return _DECISIONS.setdefault(key, Prepared(statement))


_DECIDED = Prepared(
    select(schedule_occurrences).where(
        _occ.schedule_id == bindparam("schedule_id", type_=_occ.schedule_id.type),
        _occ.nominal_fire_at == bindparam("nominal_fire_at", type_=_occ.nominal_fire_at.type),
    )
)
"""The committed occurrence of an instant a decision found already decided."""


def _schedule(row: Record) -> Schedule:
    # The lock row is our own SELECT's: checked, not re-validated (ADR 2341).
    return Schedule.from_row(**{name: row[name] for name in _SCHEDULE_COLUMNS})


def _trusted(command: ScheduleCommand) -> None:
    if command.principal is not None or command.revision is not None:
        raise ValueError("the materializer advances in the trusted scope, no revision")


def _run_values(queued: QueuedRun, params: dict[str, Any]) -> None:
    if len(queued.events) != SESSION_EVENTS:
        raise ValueError(f"a queued run has exactly {SESSION_EVENTS} session events")
    _values(queued.session, "s_", params)
    _values(queued.run, "r_", params)
    params["r_status"] = queued.run.status.value
    params["r_requested_scopes"] = sorted(queued.run.requested_scopes)
    _values(queued.checkpoint, "c_", params)
    for i, event in enumerate(queued.events):
        _values(event, f"e{i}_", params)


_FIELDS: dict[tuple[type, str], tuple[tuple[str, ...], attrgetter[Any]]] = {}


def _values(record: Any, prefix: str, out: dict[str, Any]) -> None:
    """Shallow field values of a record dataclass (``asdict`` deep-copies payloads).
    The prefixed names and a getter of every field are built once per class and
    prefix: ``fields`` per record was 3 % of a drain's CPU; one getter and no key
    concatenation take about 1 us per record off the rest (ADR 2460)."""
    known = _FIELDS.get((type(record), prefix))
    if known is None:
        names = tuple(f.name for f in fields(record))
        getter = attrgetter(*names) if len(names) > 1 else attrgetter(names[0], names[0])
        known = _FIELDS.setdefault(
            (type(record), prefix), (tuple(prefix + name for name in names), getter)
        )
    keys, getter = known
    out.update(zip(keys, getter(record), strict=False))


_AGENT_LIMITS = Memo(256)
"""(agent, version) + stored limits -> the validated ``RunLimits``."""


def _revision(schedule: Schedule, row: Record) -> ScheduleRevision:
    return revision_of(
        schedule.id,
        schedule.current_revision,
        row["r_created_by_principal_id"],
        row["r_created_at"],
        row["r_definition"],
    )


def _authority_version(
    schedule: Schedule, enabled: bool, scopes: frozenset[str], inputs: Any
) -> str:
    return authority_version_of(schedule.tenant_id, schedule.principal_id, enabled, scopes, inputs)


def _agent_limits(revision: ScheduleRevision, stored: Any) -> RunLimits:
    key = (revision.agent_id, revision.agent_version)
    limits: RunLimits | None = _AGENT_LIMITS.get(key, stored)
    if limits is None:
        limits = RunLimits.model_validate(stored)
        _AGENT_LIMITS.put(key, stored, limits)
    return limits


class PostgresMaterializationRepository:
    """See ``scheduling.ports.firing.MaterializationRepository``: one statement per
    step in the unit of work's transaction."""

    def __init__(self, tx: Transaction, schedules: PostgresScheduleRepository) -> None:
        self._tx = tx
        self._schedules = schedules
        self._admitting: tuple[str, datetime] | None = None
        """The tenant whose admission lock the due lock took, and its ``now``."""

    async def lock_due(
        self, schedule_id: UUID, now: datetime, *, lock_admission: bool = True
    ) -> tuple[Schedule, ScheduleRevision] | None:
        statement = _LOCK_DUE_ADMITTING if lock_admission else _LOCK_DUE
        rows = await self._tx.fetch(statement, {"schedule_id": schedule_id, "now": now})
        if not rows:
            return None
        row = rows[0]
        schedule = _schedule(row)
        if lock_admission:
            key = admission_lock_key(schedule.tenant_id)
            if row["admission_key"] != key:
                raise RuntimeError("the SQL admission lock key differs from admission_lock_key")
            self._tx.advisory_locks.add(key)
            self._admitting = (schedule.tenant_id, now)
        if row["r_definition"] is None:  # committed after this statement's snapshot
            revision = await self._schedules.get_revision(
                schedule_id, schedule.current_revision, None
            )
        else:
            revision = _revision(schedule, row)
        return schedule, revision

    async def context(
        self, schedule: Schedule, revision: ScheduleRevision, *, lock_admission: bool = True
    ) -> FiringContext:
        tx = self._tx
        params: dict[str, Any] = {
            "schedule_id": schedule.id,
            "tenant_id": schedule.tenant_id,
            "principal_id": schedule.principal_id,
            "agent_id": revision.agent_id,
            "agent_version": revision.agent_version,
        }
        admitting, self._admitting = self._admitting, None
        if admitting is not None and admitting[0] == schedule.tenant_id:
            # The due lock holds the tenant lock: this snapshot follows it, so the
            # usage read here is admission's (ADR 2250).
            params.update(usage_params(schedule.tenant_id, admitting[1]))
            (row,) = await tx.fetch(_CONTEXT_WITH_USAGE, params)
            usage = usage_of([row[name] for name in USAGE_COLUMNS])
            tx.carry_usage(schedule.tenant_id, admitting[1], usage)
        else:
            key = admission_lock_key(schedule.tenant_id) if lock_admission else None
            params["admission_key"] = key
            (row,) = await tx.fetch(_CONTEXT, params)
            if key is not None:  # pg_advisory_xact_lock is strict: NULL takes no lock
                tx.advisory_locks.add(key)
        authority = None
        if row["principal_found"] is not None:
            scopes = frozenset(row["scopes"])
            authority = AuthoritySnapshot(
                tenant_id=schedule.tenant_id,
                principal_id=schedule.principal_id,
                enabled=row["enabled"],
                scopes=scopes,
                authority_version=_authority_version(
                    schedule, row["enabled"], scopes, row["authority_inputs"]
                ),
            )
        agent = None
        if row["agent_found"] is not None:
            agent = AgentSpec(
                agent_id=revision.agent_id,
                version=revision.agent_version,
                policy_profile=row["policy_profile"],
                limits=_agent_limits(revision, row["limits"]),
                content_hash=row["content_hash"],
            )
        status = None if row["run_status"] is None else RunStatus(row["run_status"])
        return FiringContext(authority, agent, status)

    async def create_run(self, queued: QueuedRun) -> None:
        params: dict[str, Any] = {}
        _run_values(queued, params)
        await self._tx.fetch(_QUEUE_RUN, params)

    async def decide(self, decision: Decision) -> ScheduleOccurrence:
        occurrence, command = decision.occurrence, decision.advance
        _trusted(command)
        changed, params = trusted_cas_params(command)
        params.update(occurrence_row(occurrence))
        if decision.run is not None:
            _run_values(decision.run, params)
        if decision.outbox is not None:
            _values(decision.outbox, "o_", params)
        for i, event in enumerate(decision.events):
            _values(event, f"p{i}_", params)
        statement = decision_statement(
            changed,
            len(decision.events),
            run=decision.run is not None,
            outbox=decision.outbox is not None,
        )
        ((inserted, advanced),) = await self._tx.fetch(statement, params)
        if not inserted:
            # A committed transaction decided the instant; this one wrote nothing. The
            # next statement's snapshot (READ COMMITTED) sees that row.
            key = {
                "schedule_id": occurrence.schedule_id,
                "nominal_fire_at": occurrence.nominal_fire_at,
            }
            (row,) = await self._tx.fetch(_DECIDED, key)
            return ScheduleOccurrence(**{name: row[name] for name in _OCCURRENCE_COLUMNS})
        if not advanced:
            await self._schedules.raise_stale(command)
        return occurrence

    async def advance(self, command: ScheduleCommand, events: Sequence[ProcessEvent]) -> None:
        _trusted(command)
        if not events:
            await self._schedules.mutate(command)
            return
        changed, params = trusted_cas_params(command)
        for i, event in enumerate(events):
            _values(event, f"p{i}_", params)
        rows = await self._tx.fetch(advance_statement(changed, len(events)), params)
        if len(rows) != 1:
            await self._schedules.raise_stale(command)


class PostgresMaterializationStore:
    """See ``scheduling.ports.materialization.MaterializationStore``: the unit of
    work's materialization repository, whose context read takes the tenant's admission
    lock (a test of the test that needs no lock sets ``lock_admission`` false)."""

    lock_admission = True

    async def lock_due(
        self, uow: UnitOfWork, schedule_id: UUID, now: datetime
    ) -> tuple[Schedule, ScheduleRevision] | None:
        return await uow.materialization.lock_due(
            schedule_id, now, lock_admission=self.lock_admission
        )

    async def context(
        self, uow: UnitOfWork, schedule: Schedule, revision: ScheduleRevision
    ) -> FiringContext:
        return await uow.materialization.context(
            schedule, revision, lock_admission=self.lock_admission
        )

    async def decide(self, uow: UnitOfWork, decision: Decision) -> ScheduleOccurrence:
        return await uow.materialization.decide(decision)

    async def advance(
        self, uow: UnitOfWork, command: ScheduleCommand, events: Sequence[ProcessEvent]
    ) -> None:
        await uow.materialization.advance(command, events)
