"""ScheduleService: the one validator and persistence path for schedule lifecycle.

HTTP routes and model tools both call it. Every mutation runs in one unit of work:
it locks the schedule row, applies the closed state rules of
``scheduling.domain.lifecycle``, writes the control record by compare-and-set (plus the
new immutable revision for an update), the idempotency key where one is given, and
the process event, then commits. Time comes from the Clock, ids from the IdGenerator.

Not-found is uniform: a schedule that is absent, another principal's or another
tenant's raises the same ``NotFoundError(schedule.not_found)`` with the same message
and no details, so a caller cannot tell them apart.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import datetime
from typing import NoReturn
from uuid import UUID

from scheduling.domain.cadence import parse_cadence
from scheduling.domain.errors import ConflictError, NotFoundError, SchedulingError, ValidationError
from scheduling.domain.events import ScheduleEvent, ScheduleEventType, state_event
from scheduling.domain.identity import Principal
from scheduling.domain.lifecycle import STALE_REVISION, Action, apply, decide
from scheduling.domain.paging import Page, PageRequest
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.engine import next_after
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.clock import Clock
from scheduling.ports.directories import AuthoritySnapshot
from scheduling.ports.ids import IdGenerator
from scheduling.ports.keys import IDEMPOTENCY_KEY, KEY_BYTES, KeyRing
from scheduling.ports.notifier import NullNotifier, ScheduleNotifier
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import IdempotencyEntry, ProcessEvent
from scheduling.ports.repositories import KEY_REUSED, STALE, ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory
from scheduling.service.runs import view_of
from scheduling.service.validation import (
    NO_FUTURE_OCCURRENCE,
    DefinitionValidator,
    check_definition_text,
    check_idempotency_key,
    check_patch_text,
    normalized_request,
    normalized_with_limits,
    request_hash,
    require_scope,
)
from scheduling.service.values import (
    OccurrenceView,
    ScheduleDefinition,
    ScheduleDetail,
    SchedulePatch,
    ScheduleResult,
    ScheduleSummary,
)

SCHEDULE_NOT_FOUND = reason(
    "schedule.not_found", "The schedule does not exist or is not visible to the caller"
)

READ, WRITE, CANCEL = "schedule.read", "schedule.write", "schedule.cancel"
LIST_MAX = 50

_log = logging.getLogger(__name__)

# Builds the next complete definition from the current revision (full update, patch).
_DefinitionOf = Callable[[ScheduleRevision], ScheduleDefinition]

_EVENT_FOR = {
    Action.UPDATE: ScheduleEventType.UPDATED,
    Action.PAUSE: ScheduleEventType.PAUSED,
    Action.RESUME: ScheduleEventType.RESUMED,
    Action.CANCEL: ScheduleEventType.CANCELLED,
}


def idempotency_digest(secret: bytes, tenant_id: str, principal_id: str, key: str) -> str:
    """What ``schedule_idempotency_keys.key`` stores for a client's Idempotency-Key: the
    hex HMAC-SHA256 under the deployment's ``idempotency.key`` key of the tenant, the
    principal and the key, each length-prefixed (domain-separated: no two triples share
    a message). A credential pasted as the header never reaches a row (ADR 2133), and
    the same key from the same caller still finds its entry."""
    parts = (b"schedule.idempotency.v1", tenant_id.encode(), principal_id.encode(), key.encode())
    message = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


class _InstanceKeys:
    """The key ring of a service built without one (a single-process memory stack): one
    random key for the life of the instance."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(KEY_BYTES)

    async def key(self, purpose: str) -> bytes:
        return self._key


def not_found() -> NotFoundError:
    """The one not-found error every read and write returns (no details, on purpose)."""
    return NotFoundError(SCHEDULE_NOT_FOUND, "schedule not found")


def actor_of(principal: Principal) -> str:
    return f"principal:{principal.principal_id}"


def to_record(event: ScheduleEvent) -> ProcessEvent:
    """The persistence row of a domain process event."""
    return ProcessEvent(
        id=event.id,
        tenant_id=event.tenant_id,
        principal_id=event.principal_id,
        event_type=event.event_type.value,
        actor=event.actor,
        payload=dict(event.payload),
        occurred_at=event.occurred_at,
        schedule_id=event.schedule_id,
    )


class ScheduleService:
    """Create, update, patch, pause, resume, cancel, get, list and occurrences."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        clock: Clock,
        ids: IdGenerator,
        validator: DefinitionValidator,
        notifier: ScheduleNotifier | None = None,
        probe: Probe | None = None,
        keys: KeyRing | None = None,
    ) -> None:
        self._uow = uow
        self._keys: KeyRing = keys or _InstanceKeys()
        self._clock = clock
        self._ids = ids
        self._validator = validator
        self._notifier: ScheduleNotifier = notifier or NullNotifier()
        # Named steps after each write and commit ("service.<op>.<write>"), for the
        # deterministic simulator; production wires none (NullProbe returns at once).
        self._probe: Probe = probe or NullProbe()

    # ------------------------------------------------------------------ create

    async def create(
        self,
        principal: Principal,
        idempotency_key: str,
        definition: ScheduleDefinition,
        *,
        authority: AuthoritySnapshot | None = None,
        within: UnitOfWork | None = None,
    ) -> ScheduleResult:
        """Create a schedule and revision 1; replay an identical keyed request.

        Each thing once (ADR 2240, 2600): one text scan, one cadence parse, one
        ``RunLimits``, one first-fire instant, one revision build, and one transaction
        besides the edge's authentication read (ADR 2310): the replay look-up, the
        pinned agent's read, the write and the wake-up, which PostgreSQL delivers iff it
        commits. ``authority`` is the caller's snapshot the edge already read for this
        request; ``within`` the unit of work it read it in (``writing``, ADR 2395), which
        then is the write's: one transaction in all. The write commits it; any failure
        leaves it to the edge to roll back."""
        require_scope(principal, WRITE)
        key = check_idempotency_key(idempotency_key)
        # Unstorable text (NUL, lone surrogates) and then credential-shaped text fail
        # before anything is hashed, looked up or stored.
        check_definition_text(definition)
        self._validator.scan_text(definition.title, definition.instruction)
        cadence = parse_cadence(definition.cadence)
        key = await self._stored_key(principal, key)
        request, limits = normalized_with_limits(definition, cadence)
        digest = request_hash("schedule.create", request)
        schedule_id = self._ids.new_uuid()
        now = self._clock.now()
        try:
            # Outside the write: a directory read never holds a second connection while
            # the write holds one (the edge's snapshot makes it no read at all; with
            # ``within`` the edge passes the one it read there).
            snapshot = await self._validator.authority(principal, WRITE, authority)
        except SchedulingError:
            # An identical request that committed earlier replays, whatever changed since.
            replay = await self._replay(principal, key, digest)
            if replay is not None:
                return replay
            raise
        async with self._within(principal, within) as uow:
            entry = await uow.idempotency.lookup(principal, key)
            if entry is not None:
                # Looked up before validating: an identical request that committed
                # earlier replays whatever changed since (its one-time instant passed,
                # its agent version went away).
                if entry.request_hash != digest:
                    raise ConflictError(
                        KEY_REUSED, "the idempotency key was used for another request"
                    )
                existing = await self._get(uow, entry.schedule_id, principal)
                current = await uow.schedules.get_revision(
                    existing.id, existing.current_revision, principal
                )
                return ScheduleResult(existing, replayed=True, changed=False, revision=current)
            valid = await self._validator.validate(
                principal,
                snapshot,
                definition,
                now=now,
                require_future=True,
                cadence=cadence,
                scanned=True,
                schedule_id=schedule_id,
                agents=uow.agents,
                limits=limits,
            )
            revision = valid.build(schedule_id, 1, principal.principal_id, now)
            schedule = Schedule(
                id=schedule_id,
                tenant_id=principal.tenant_id,
                principal_id=principal.principal_id,
                state=ScheduleState.ACTIVE,
                pause_reason=None,
                current_revision=1,
                # require_future computed it at this same ``now`` (ADR 2600).
                next_fire_at=valid.first_fire,
                consecutive_failures=0,
                created_at=now,
                updated_at=now,
            )
            await uow.schedules.create(schedule, revision)
            await self._probe.step("service.create.inserted")
            stored = await uow.idempotency.record(self._entry(principal, key, digest, schedule_id))
            await self._probe.step("service.create.key_recorded")
            if stored.schedule_id != schedule_id:
                # A concurrent identical request committed first; ours rolls back.
                await uow.rollback()
                replay = await self._replay(principal, key, digest)
                if replay is None:  # pragma: no cover - the winner's row is committed
                    raise not_found()
                return replay
            await self._emit(
                uow, ScheduleEventType.CREATED, None, schedule, actor_of(principal), now
            )
            await self._probe.step("service.create.event_appended")
            await uow.wakeups.schedule_changed(schedule_id)
            await uow.commit()
        await self._probe.step("service.create.committed")
        await self._observe(schedule_id)
        return ScheduleResult(schedule, replayed=False, changed=True, revision=revision)

    # ------------------------------------------------------------------ update / patch

    async def update(
        self,
        principal: Principal,
        schedule_id: UUID,
        expected_revision: int,
        definition: ScheduleDefinition,
        idempotency_key: str | None = None,
        *,
        authority: AuthoritySnapshot | None = None,
    ) -> ScheduleResult:
        """Replace the full definition with revision N+1 (ACTIVE or PAUSED only);
        ``authority`` as for ``create``."""
        require_scope(principal, WRITE)
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
        check_definition_text(definition)
        self._validator.scan_text(definition.title, definition.instruction)
        if idempotency_key is not None:
            idempotency_key = await self._stored_key(principal, idempotency_key)
        digest = None
        if idempotency_key is not None:
            body = {
                "schedule_id": str(schedule_id),
                "expected_revision": expected_revision,
                "definition": normalized_request(definition),
            }
            digest = request_hash("schedule.update", body)
            replay = await self._replay(principal, idempotency_key, digest)
            if replay is not None:
                return replay
        return await self._write_revision(
            principal,
            schedule_id,
            expected_revision,
            lambda _: definition,
            idempotency_key,
            digest,
            authority=authority,
            scanned=True,
        )

    async def patch(
        self,
        principal: Principal,
        schedule_id: UUID,
        expected_revision: int,
        patch: SchedulePatch,
        idempotency_key: str,
    ) -> ScheduleResult:
        """The closed conversational edit: title, instruction, at or one cadence.

        Agent, version, policy profile, requested scopes, browser binding, limits,
        timeout, grace and failure policy are copied from the current revision.
        """
        require_scope(principal, WRITE)
        key = check_idempotency_key(idempotency_key)
        check_patch_text(patch)
        self._validator.scan_text(patch.title or "-", patch.instruction or "-")
        key = await self._stored_key(principal, key)
        digest = patch_digest(schedule_id, expected_revision, patch)
        replay = await self._replay(principal, key, digest)
        if replay is not None:
            return replay
        return await self._write_revision(
            principal,
            schedule_id,
            expected_revision,
            lambda current: patched_definition(current, patch),
            key,
            digest,
        )

    async def _write_revision(
        self,
        principal: Principal,
        schedule_id: UUID,
        expected_revision: int,
        make: _DefinitionOf,
        key: str | None,
        digest: str | None,
        *,
        authority: AuthoritySnapshot | None = None,
        scanned: bool = False,
    ) -> ScheduleResult:
        # The caller's authority outside the write (the edge's snapshot: no read); then one
        # unit of work (ADR 2310): the row lock, the replay look-up, the state rules, the
        # current revision, validation with the agent pinned inside it, and the write.
        authority = await self._validator.authority(principal, WRITE, authority)
        async with self._uow.begin(principal) as uow:
            if key is None:
                # A stale or terminal update fails on an unlocked read, never queueing on
                # the row lock: revisions only grow and a terminal state stays, so what
                # fails here fails under the lock too. (A keyed one may replay an identical
                # request committed since its look-up, so it reads under the lock.) It
                # keeps one waiter fewer behind an UPDATE, whose next holder PostgreSQL
                # picks at random: the simulator's lifecycle replays rely on it.
                seen = await self._get(uow, schedule_id, principal)
                decide(Action.UPDATE, seen.state, seen.current_revision, expected_revision)
            schedule = await self._get(uow, schedule_id, principal, lock=True)
            await self._probe.step("service.update.locked")
            if key is not None and digest is not None:
                # An identical request that committed since our replay look-up (it may
                # have advanced the revision) replays instead of failing on it.
                entry = await uow.idempotency.lookup(principal, key)
                if entry is not None:
                    if entry.request_hash != digest:
                        raise ConflictError(KEY_REUSED, "the idempotency key was used before")
                    return ScheduleResult(schedule, replayed=True, changed=False)
            # A stale revision or a terminal state fails before anything is validated.
            decision = decide(
                Action.UPDATE, schedule.state, schedule.current_revision, expected_revision
            )
            current = await uow.schedules.get_revision(
                schedule_id, schedule.current_revision, principal
            )
            now = max(self._clock.now(), schedule.updated_at)
            valid = await self._validator.validate(
                principal,
                authority,
                make(current),
                now=now,
                require_future=True,
                scanned=scanned,
                agents=uow.agents,
            )
            revision = valid.build(
                schedule_id, schedule.current_revision + 1, principal.principal_id, now
            )
            if revision.to_definition() == current.to_definition():
                # Unchanged: record the key (if any) and write nothing else.
                if key is not None and digest is not None:
                    await self._record_key(uow, principal, key, digest, schedule_id)
                    await self._probe.step("service.update.key_recorded")
                    await uow.commit()
                    await self._probe.step("service.update.committed")
                return ScheduleResult(schedule, replayed=False, changed=False, revision=current)
            fire = next_after(valid.cadence, now)
            if schedule.state is ScheduleState.ACTIVE and fire is None:
                raise_no_future()
            updated = apply(
                schedule, decision, now=now, next_fire_at=fire, revision=revision.revision
            )
            await self._mutate(uow, ScheduleCommand(schedule, updated, principal, revision))
            await self._probe.step("service.update.mutated")
            if key is not None and digest is not None:
                await self._record_key(uow, principal, key, digest, schedule_id)
                await self._probe.step("service.update.key_recorded")
            await self._emit(
                uow, ScheduleEventType.UPDATED, schedule, updated, actor_of(principal), now
            )
            await self._probe.step("service.update.event_appended")
            await uow.wakeups.schedule_changed(schedule_id)
            await uow.commit()
        await self._probe.step("service.update.committed")
        await self._observe(schedule_id)
        # The revision in hand answers the response (no read of it, as for a create).
        return ScheduleResult(updated, replayed=False, changed=True, revision=revision)

    # ------------------------------------------------------------------ pause / resume / cancel

    async def pause(
        self, principal: Principal, schedule_id: UUID, expected_revision: int
    ) -> ScheduleResult:
        """ACTIVE -> PAUSED (user); idempotent when already PAUSED."""
        require_scope(principal, WRITE)
        return await self._transition(principal, schedule_id, expected_revision, Action.PAUSE)

    async def resume(
        self, principal: Principal, schedule_id: UUID, expected_revision: int
    ) -> ScheduleResult:
        """PAUSED -> ACTIVE at the first instant strictly after now (no backfill)."""
        require_scope(principal, WRITE)
        result = await self._transition(principal, schedule_id, expected_revision, Action.RESUME)
        if result.changed:
            await self._observe(schedule_id)
        return result

    async def cancel(
        self, principal: Principal, schedule_id: UUID, expected_revision: int
    ) -> ScheduleResult:
        """ACTIVE/PAUSED -> CANCELLED (terminal). Never touches a materialized run."""
        require_scope(principal, CANCEL)
        return await self._transition(principal, schedule_id, expected_revision, Action.CANCEL)

    async def _transition(
        self, principal: Principal, schedule_id: UUID, expected_revision: int, action: Action
    ) -> ScheduleResult:
        op = action.value
        async with self._uow.begin(principal) as uow:
            schedule = await self._get(uow, schedule_id, principal, lock=True)
            await self._probe.step(f"service.{op}.locked")
            decision = decide(action, schedule.state, schedule.current_revision, expected_revision)
            if decision.noop:
                return ScheduleResult(schedule, replayed=False, changed=False)
            now = max(self._clock.now(), schedule.updated_at)
            fire = None
            if decision.target is ScheduleState.ACTIVE:
                revision = await uow.schedules.get_revision(
                    schedule_id, schedule.current_revision, principal
                )
                fire = next_after(revision.cadence_value, now)
                if fire is None:
                    raise_no_future()
            updated = apply(schedule, decision, now=now, next_fire_at=fire)
            await self._mutate(uow, ScheduleCommand(schedule, updated, principal))
            await self._probe.step(f"service.{op}.mutated")
            await self._emit(uow, _EVENT_FOR[action], schedule, updated, actor_of(principal), now)
            await self._probe.step(f"service.{op}.event_appended")
            if action is Action.RESUME:  # a resumed schedule is due again: wake schedulers
                await uow.wakeups.schedule_changed(schedule_id)
            await uow.commit()
        await self._probe.step(f"service.{op}.committed")
        return ScheduleResult(updated, replayed=False, changed=True)

    # ------------------------------------------------------------------ pre-approval reads

    async def visible(self, principal: Principal, schedule_id: UUID) -> Schedule:
        """The principal-scoped point read of a control record a caller is about to write
        (a model tool's prepare, before approval): absent, another principal's and
        another tenant's schedules are the same uniform not-found. It needs one of the
        schedule scopes (pause and resume hold schedule.write, cancel schedule.cancel;
        neither needs schedule.read), returns no instruction and locks nothing: the write
        itself re-checks everything under the row lock."""
        if not principal.scopes & {READ, WRITE, CANCEL}:
            require_scope(principal, READ)
        async with self._uow.begin(principal) as uow:
            return await self._get(uow, schedule_id, principal)

    async def check_patch(
        self,
        principal: Principal,
        schedule_id: UUID,
        expected_revision: int,
        patch: SchedulePatch,
        idempotency_key: str,
    ) -> None:
        """What ``patch`` would refuse before it writes, read without a lock: the key used
        for another request, a schedule the caller cannot see, a stale revision, a
        terminal state. A request whose key already committed passes (its ``patch``
        replays: a retry after a crash between the effect and its record)."""
        require_scope(principal, WRITE)
        key = await self._stored_key(principal, check_idempotency_key(idempotency_key))
        digest = patch_digest(schedule_id, expected_revision, patch)
        if await self._replay(principal, key, digest) is not None:
            return
        schedule = await self.visible(principal, schedule_id)
        decide(Action.UPDATE, schedule.state, schedule.current_revision, expected_revision)

    # ------------------------------------------------------------------ reads

    def reading(self, tenant_id: str, principal_id: str) -> UnitOfWork:
        """A principal-scoped unit of work (not yet entered) for an edge that reads the
        caller's authority and then the read it guards in one transaction (ADR 2380):
        ``get``, ``list`` and ``occurrences`` take it as ``within``."""
        return self._uow.begin(Principal(tenant_id, principal_id))

    async def writing(self, tenant_id: str, principal_id: str) -> UnitOfWork:
        """Like ``reading``, for a create whose edge reads the caller's authority in
        the write's own transaction (ADR 2395); ``create`` takes it as ``within``. The
        idempotency secret is loaded first: the key ring's first read takes a
        connection of its own, never while this unit of work holds one."""
        await self._keys.key(IDEMPOTENCY_KEY)
        return self._uow.begin(Principal(tenant_id, principal_id))

    def _within(
        self, principal: Principal, within: UnitOfWork | None
    ) -> AbstractAsyncContextManager[UnitOfWork]:
        """``within`` when the edge holds one open (it stays the edge's to close), else a
        new unit of work of the principal's scope."""
        if within is None:
            return self._uow.begin(principal)
        return nullcontext(within)

    async def get(
        self, principal: Principal, schedule_id: UUID, *, within: UnitOfWork | None = None
    ) -> ScheduleDetail:
        """The authorized point read: the only read returning the full instruction."""
        require_scope(principal, READ)
        async with self._within(principal, within) as uow:
            # The schedule and its current revision in one read (ADR 2420).
            try:
                schedule, revision = await uow.schedules.get_current(schedule_id, principal)
            except NotFoundError:
                raise not_found() from None
        return ScheduleDetail(schedule, revision)

    async def list(
        self,
        principal: Principal,
        *,
        limit: int = LIST_MAX,
        cursor: str | None = None,
        states: frozenset[ScheduleState] | None = None,
        within: UnitOfWork | None = None,
    ) -> Page[ScheduleSummary]:
        """The caller's schedules (newest update first), optionally only in ``states``;
        the filter applies before the cursor and the limit."""
        require_scope(principal, READ)
        page = PageRequest(limit=limit, cursor=cursor)
        async with self._within(principal, within) as uow:
            # One read: each row with its current revision's summary fields, no revision
            # built per row (ADR 2240); a missing revision fails as the point read does.
            try:
                found = await uow.schedules.list_summaries(principal, page, states or None)
            except NotFoundError:
                raise not_found() from None
        items = [ScheduleSummary.listed(row) for row in found.items]
        return Page(items=items, next_cursor=found.next_cursor)

    async def occurrences(
        self,
        principal: Principal,
        schedule_id: UUID,
        *,
        limit: int = LIST_MAX,
        cursor: str | None = None,
        within: UnitOfWork | None = None,
    ) -> Page[OccurrenceView]:
        """The durable offline inbox: occurrences newest first, each with its run."""
        require_scope(principal, READ)
        page = PageRequest(limit=limit, cursor=cursor)
        async with self._within(principal, within) as uow:
            # The repository refuses an absent or another principal's schedule itself
            # (its contract, both adapters): no separate schedule read (ADR 2380).
            try:
                found = await uow.occurrences.list(schedule_id, principal, page)
            except NotFoundError:
                raise not_found() from None
            # The page's linked runs in one read, not one per row (ADR 2390); a run the
            # principal cannot see, or one erased, is absent and its occurrence has none.
            linked = {o.run_id for o in found.items if o.run_id is not None}
            runs = await uow.runs.get_many(linked, principal)
            views = [
                OccurrenceView(o, view_of(runs[o.run_id]) if o.run_id in runs else None)
                for o in found.items
            ]
        return Page(items=views, next_cursor=found.next_cursor)

    # ------------------------------------------------------------------ helpers

    async def _get(
        self, uow: UnitOfWork, schedule_id: UUID, principal: Principal, *, lock: bool = False
    ) -> Schedule:
        try:
            return await uow.schedules.get(schedule_id, principal, for_update=lock)
        except NotFoundError:
            raise not_found() from None

    async def _mutate(self, uow: UnitOfWork, command: ScheduleCommand) -> None:
        try:
            await uow.schedules.mutate(command)
        except NotFoundError:
            raise not_found() from None
        except ConflictError as exc:
            if exc.code != STALE:
                raise
            current = exc.details.get("current_revision", command.expected.current_revision)
            raise ConflictError(
                STALE_REVISION,
                "the schedule changed since it was read",
                {"current_revision": current},
            ) from None

    async def _stored_key(self, principal: Principal, key: str) -> str:
        """The keyed digest that stands for ``key`` in the idempotency ledger."""
        secret = await self._keys.key(IDEMPOTENCY_KEY)
        return idempotency_digest(secret, principal.tenant_id, principal.principal_id, key)

    async def _replay(self, principal: Principal, key: str, digest: str) -> ScheduleResult | None:
        async with self._uow.begin(principal) as uow:
            entry = await uow.idempotency.lookup(principal, key)
            if entry is None:
                return None
            if entry.request_hash != digest:
                raise ConflictError(KEY_REUSED, "the idempotency key was used for another request")
            schedule = await self._get(uow, entry.schedule_id, principal)
        return ScheduleResult(schedule, replayed=True, changed=False)

    def _entry(
        self, principal: Principal, key: str, digest: str, schedule_id: UUID
    ) -> IdempotencyEntry:
        return IdempotencyEntry(
            tenant_id=principal.tenant_id,
            principal_id=principal.principal_id,
            key=key,
            request_hash=digest,
            schedule_id=schedule_id,
            created_at=self._clock.now(),
        )

    async def _record_key(
        self, uow: UnitOfWork, principal: Principal, key: str, digest: str, schedule_id: UUID
    ) -> None:
        stored = await uow.idempotency.record(self._entry(principal, key, digest, schedule_id))
        if stored.schedule_id != schedule_id:
            raise ConflictError(KEY_REUSED, "the idempotency key was used for another schedule")

    async def _emit(
        self,
        uow: UnitOfWork,
        event_type: ScheduleEventType,
        before: Schedule | None,
        after: Schedule,
        actor: str,
        at: datetime,
    ) -> None:
        event = state_event(
            self._ids.new_uuid(), event_type, before=before, after=after, actor=actor, at=at
        )
        await uow.events.append(to_record(event))

    async def _observe(self, schedule_id: UUID) -> None:
        # The observer told after the commit (the wake-up itself rode the unit of work);
        # its failure never fails the request that already committed.
        try:
            await self._notifier.schedule_changed(schedule_id)
        except Exception:
            _log.warning("schedule change observer failed", exc_info=False)


def patch_digest(schedule_id: UUID, expected_revision: int, patch: SchedulePatch) -> str:
    """The request hash a keyed ``patch`` records in the idempotency ledger."""
    body = {
        "schedule_id": str(schedule_id),
        "expected_revision": expected_revision,
        "patch": patch.as_json(),
    }
    return request_hash("schedule.patch", body)


def raise_no_future() -> NoReturn:
    raise ValidationError(NO_FUTURE_OCCURRENCE, "the cadence never fires after now")


def patched_definition(current: ScheduleRevision, patch: SchedulePatch) -> ScheduleDefinition:
    """The complete next definition: the patch over the current revision, with every
    hidden authority and execution field preserved."""
    if patch.at is not None:
        at = patch.at if isinstance(patch.at, str) else patch.at.isoformat()
        cadence: dict[str, object] = {"kind": "ONCE", "at": at}
    elif patch.cadence is not None:
        cadence = dict(patch.cadence)
    else:
        cadence = dict(current.cadence)
    return ScheduleDefinition(
        title=current.title if patch.title is None else patch.title,
        instruction=current.instruction if patch.instruction is None else patch.instruction,
        cadence=cadence,
        agent_id=current.agent_id,
        agent_version=current.agent_version,
        policy_profile=current.policy_profile,
        requested_scopes=current.requested_scopes,
        browser_profile_id=current.browser_profile_id,
        limits=current.limits,
        run_timeout_seconds=current.run_timeout_seconds,
        misfire_grace_seconds=current.misfire_grace_seconds,
        max_consecutive_failures=current.max_consecutive_failures,
    )
