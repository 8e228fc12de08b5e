"""The sequential model and the history driver of gate.schedule.lifecycle_linear.

``LifecycleModel`` is the spec's closed state machine for one schedule, extended with
the cached ``next_fire_at``, the due scan and the materialization a scan triggers, so
a checked history also proves "paused time never backfills" (resume and an ACTIVE
update fire at the first instant strictly after their own time; a scan decides only
the latest due instant at or after the cached next firing, never one inside a pause)
and "cancellation never reopens" (CANCELLED has no way out). The model also follows
the materializer's failure accounting: a MISSED instant counts a failure and the
second consecutive one auto-pauses the schedule; resume resets the count.

Every operation records the clock instant it ran at (the virtual clock stands still
inside a concurrent batch), so the model is a pure function of its arguments.
Results are ``("ok", state, revision, next_fire_at, changed)`` or
``("conflict", current_revision)``; a due read returns whether the schedule was due;
a materialization returns ``("decided", disposition, nominal_fire_at, next_fire_at)``
or ``("not_due",)``.

``HistoryDriver`` executes batches of operations concurrently against a service, a
unit-of-work factory and a materializer (PostgreSQL in the gate), recording a
``simulation.engine.history.History`` whose epoch is a global event counter, so "A completed
before B was invoked" is exactly the real-time order the linearizability checker uses.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.errors import ConflictError, SchedulingError
from scheduling.domain.identity import Principal
from scheduling.domain.recurrence.engine import latest_at_or_before, next_after
from scheduling.domain.schedule import Schedule
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.materializer import (
    MaterializeResult,
    MaterializeStatus,
    ScheduleMaterializer,
)
from scheduling.service.schedules import ScheduleService
from simulation.engine.history import History, OpRef
from simulation.worlds.service import ServiceWorld, definition

CADENCES: tuple[dict[str, Any], ...] = (
    {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
    {"kind": "WEEKLY", "local_time": "07:30", "weekdays": [1, 3, 5], "timezone": "UTC"},
    {"kind": "DAILY", "local_time": "23:15", "timezone": "America/New_York"},
)
LIFECYCLE_OPS = ("update", "pause", "resume", "cancel")
TERMINAL = frozenset({"COMPLETED", "CANCELLED"})
_TARGET = {"pause": "PAUSED", "resume": "ACTIVE", "cancel": "CANCELLED"}
_FROM = {
    "pause": frozenset({"ACTIVE"}),
    "resume": frozenset({"PAUSED"}),
    "cancel": frozenset({"ACTIVE", "PAUSED"}),
}


def fire_after(cadence: int, now: str) -> str | None:
    instant = next_after(parse_cadence(CADENCES[cadence]), datetime.fromisoformat(now))
    return None if instant is None else format_instant(instant)


GRACE_SECONDS = 900
"""The definitions' misfire grace (``service_support.definition``)."""
MAX_FAILURES = 2
"""The definitions' max_consecutive_failures."""


def latest_before(cadence: int, now: str) -> str | None:
    instant = latest_at_or_before(parse_cadence(CADENCES[cadence]), datetime.fromisoformat(now))
    return None if instant is None else format_instant(instant)


def _is_due(current: str, fire: str | None, now: str) -> bool:
    return (
        current == "ACTIVE"
        and fire is not None
        and datetime.fromisoformat(fire) <= datetime.fromisoformat(now)
    )


@dataclass(frozen=True)
class LifecycleModel:
    """One schedule created ACTIVE at ``created_at`` with cadence 0 (see module doc).

    State: (state, revision, next_fire_at, cadence, consecutive_failures, in_flight).
    Runs never finish in the gate, so after one MATERIALIZED occurrence every later
    due instant inside the grace window is SKIPPED_OVERLAP.
    """

    created_at: str
    start: tuple[Any, ...] | None = None
    """The state to start from instead of a fresh creation (e.g. after an update)."""

    def initial(self) -> Hashable:
        if self.start is not None:
            return self.start
        return ("ACTIVE", 1, fire_after(0, self.created_at), 0, 0, False)

    def apply(self, state: Hashable, op: str, args: Mapping[str, Any]) -> tuple[Hashable, Any]:
        assert isinstance(state, tuple)
        current, revision, fire, cadence, failures, in_flight = state
        if op == "read":
            return state, ("read", current, revision, fire)
        now = args["now"]
        if op == "due":
            return state, _is_due(current, fire, now)
        if op == "materialize":
            return self._materialize(state, now)
        if args["expected_revision"] != revision:
            return state, ("conflict", revision)
        if op == "update":
            if current in TERMINAL:
                return state, ("conflict", revision)
            new_cadence = args["cadence"]
            new_fire = fire_after(new_cadence, now) if current == "ACTIVE" else None
            after = (current, revision + 1, new_fire, new_cadence, failures, in_flight)
            return after, ("ok", current, revision + 1, new_fire, True)
        target = _TARGET[op]
        if current == target:
            return state, ("ok", current, revision, fire, False)
        if current not in _FROM[op]:
            return state, ("conflict", revision)
        new_fire = fire_after(cadence, now) if target == "ACTIVE" else None
        # Resume starts a fresh failure count (ADR 0600).
        new_failures = 0 if op == "resume" else failures
        after = (target, revision, new_fire, cadence, new_failures, in_flight)
        return after, ("ok", target, revision, new_fire, True)

    @staticmethod
    def _materialize(state: tuple[Any, ...], now: str) -> tuple[Hashable, Any]:
        current, revision, fire, cadence, failures, in_flight = state
        if not _is_due(current, fire, now):
            return state, ("not_due",)
        nominal = latest_before(cadence, now)
        assert nominal is not None
        late = datetime.fromisoformat(now) - datetime.fromisoformat(nominal)
        if late.total_seconds() > GRACE_SECONDS:
            disposition, failures = "MISSED", failures + 1
        elif in_flight:
            disposition = "SKIPPED_OVERLAP"
        else:
            disposition, in_flight = "MATERIALIZED", True
        new_fire = fire_after(cadence, now)
        after_state = current
        if disposition == "MISSED" and failures >= MAX_FAILURES:
            after_state, new_fire = "PAUSED", None
        after = (after_state, revision, new_fire, cadence, failures, in_flight)
        return after, ("decided", disposition, nominal, new_fire)


@dataclass(frozen=True)
class Op:
    """One generated operation: ``kind`` on schedule ``target`` with a revision offset
    (0 current, -1 stale, +1 ahead) relative to the revision read before its batch."""

    kind: str
    target: int
    offset: int = 0
    cadence: int = 0


def materialized(result: MaterializeResult) -> tuple[Any, ...]:
    """A materialization as the model sees it."""
    if result.status is not MaterializeStatus.DECIDED or result.occurrence is None:
        return (result.status.value,)
    occurrence = result.occurrence
    fire = None if result.next_fire_at is None else format_instant(result.next_fire_at)
    nominal = format_instant(occurrence.nominal_fire_at)
    return ("decided", occurrence.disposition.value, nominal, fire)


def observed(schedule: Schedule, changed: bool) -> tuple[Any, ...]:
    fire = None if schedule.next_fire_at is None else format_instant(schedule.next_fire_at)
    return ("ok", schedule.state.value, schedule.current_revision, fire, changed)


def read_back(schedule: Schedule) -> tuple[Any, ...]:
    """A point read as the model's ``read`` sees it."""
    fire = None if schedule.next_fire_at is None else format_instant(schedule.next_fire_at)
    return ("read", schedule.state.value, schedule.current_revision, fire)


Invoke = Callable[..., OpRef]
"""Starts an operation in a history (``History.invoke`` bound to a process)."""


async def call_lifecycle(
    service: ScheduleService,
    who: Principal,
    kind: str,
    sid: UUID,
    expected: int,
    cadence: int = 0,
    title: str = "T",
) -> tuple[Any, ...]:
    """One lifecycle operation through the service, as the model observes it."""
    if kind == "update":
        changed = definition(title=title, cadence=CADENCES[cadence])
        result = await service.update(who, sid, expected, changed)
    elif kind == "pause":
        result = await service.pause(who, sid, expected)
    elif kind == "resume":
        result = await service.resume(who, sid, expected)
    else:
        result = await service.cancel(who, sid, expected)
    return observed(result.schedule, result.changed)


async def record_scan(
    invoke: Invoke,
    scheduler: UnitOfWorkFactory,
    materializer: ScheduleMaterializer | None,
    schedules: Sequence[UUID],
    now: str,
) -> None:
    """A due scan as the schedule worker does it: one due read (recorded as one read
    per schedule over the same window), then one materialization per due schedule.
    A materialization that returns NOT_DUE wrote nothing (the schedule was locked by a
    concurrent writer, ``SKIP LOCKED``, or no longer due) and is recorded as ``fail``
    (no effect); the due read beside it is checked. Exceptions other than a
    ``SchedulingError`` propagate with the operation left open (indeterminate)."""
    refs = [invoke("due", schedule=k, now=now) for k in range(len(schedules))]
    async with scheduler.begin() as uow:
        due = set(await uow.schedules.due(datetime.fromisoformat(now), 10_000))
    for k, ref in enumerate(refs):
        ref.ok(schedules[k] in due)
    if materializer is None:
        return
    for k, sid in enumerate(schedules):
        if sid not in due:
            continue
        ref = invoke("materialize", schedule=k, now=now)
        try:
            result = await materializer.materialize(sid)
        except SchedulingError as exc:
            ref.fail(("error", exc.code))
            continue
        if result.status is MaterializeStatus.NOT_DUE:
            # Due a moment ago but locked by a concurrent writer (SKIP LOCKED) or no
            # longer due: either way nothing was written and a later scan decides.
            ref.fail(materialized(result))
            continue
        ref.ok(materialized(result))


class HistoryDriver:
    """Runs batches of operations concurrently and records them in a History."""

    def __init__(
        self,
        world: ServiceWorld,
        scheduler: UnitOfWorkFactory,
        who: Principal,
        materializer: ScheduleMaterializer | None = None,
    ) -> None:
        self.world = world
        self.scheduler = scheduler
        self.materializer = materializer
        self.who = who
        self.history = History(world.clock, epoch=lambda: len(self.history.events))
        self.schedules: list[UUID] = []
        self.created_at: list[str] = []
        self._titles = 0

    async def create(self, count: int, prefix: str = "lin") -> None:
        for n in range(count):
            result = await self.world.service.create(self.who, f"{prefix}-{n}", definition())
            self.schedules.append(result.schedule.id)
            self.created_at.append(self.world.clock.now().isoformat())

    async def revisions(self) -> list[int]:
        out = []
        for sid in self.schedules:
            out.append((await self.world.service.get(self.who, sid)).schedule.current_revision)
        return out

    async def batch(self, ops: Sequence[Op]) -> None:
        known = await self.revisions()
        now = self.world.clock.now().isoformat()
        await asyncio.gather(*(self._run(i, op, known, now) for i, op in enumerate(ops)))

    async def _run(self, index: int, op: Op, known: list[int], now: str) -> None:
        process = f"p{index}"
        if op.kind == "due":
            await self._due(process, now)
            return
        sid = self.schedules[op.target]
        args: dict[str, Any] = {
            "schedule": op.target,
            "expected_revision": max(1, known[op.target] + op.offset),
            "now": now,
        }
        if op.kind == "update":
            args["cadence"] = op.cadence
        ref = self.history.invoke(process, op.kind, **args)
        try:
            result = await self._call(op, sid, args)
        except ConflictError as exc:
            ref.ok(("conflict", exc.details.get("current_revision")))
        except SchedulingError as exc:
            # Judged, not dropped: the model answers every lifecycle operation with
            # ok or conflict, so a refusal of any other kind (a service that refuses
            # every resume) is a result no sequential order explains.
            ref.ok(("error", exc.code))
        else:
            ref.ok(result)

    async def _call(self, op: Op, sid: UUID, args: Mapping[str, Any]) -> tuple[Any, ...]:
        if op.kind == "update":
            self._titles += 1
        return await call_lifecycle(
            self.world.service,
            self.who,
            op.kind,
            sid,
            args["expected_revision"],
            op.cadence,
            f"T{self._titles}",
        )

    async def _due(self, process: str, now: str) -> None:
        invoke = functools.partial(self.history.invoke, process)
        await record_scan(invoke, self.scheduler, self.materializer, self.schedules, now)

    def model_for(self, key: Hashable) -> LifecycleModel:
        assert isinstance(key, int)
        return LifecycleModel(self.created_at[key])
