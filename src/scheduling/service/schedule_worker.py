"""ScheduleWorker (spec "Ports", "Materialization transaction").

``run_once()`` reads one deterministic, bounded batch of due ids (``next_fire_at``
then id) and materializes each in its own transaction, so one corrupt definition can
neither roll back nor block its siblings: its error is logged, counted, and the
schedule is set aside for a bounded backoff (in memory) while the rest proceed.
An admission RETRY sets the schedule aside for the controller's backoff the same way.

Throughput (ADR 1701): up to ``concurrency`` materializations of the batch are in flight
at once, each still its own transaction (sibling isolation unchanged). Each of the
``concurrency`` slots is one task taking the batch's next id, inside a connection lane
of the factory where it has them (``ConnectionLanes``): one pooled connection passed
from one decision's transaction to the next, returned or discarded when a decision fails
(ADR 2640). A worker given a ``lane`` (a random 128-bit number; the ring position, not a
connection lane) processes its batch in the order of ``(id - lane) mod 2**128``: workers
that read the same deterministic batch start at different points of the id ring and work
on disjoint stretches instead of colliding on the same first ids; the row lock (``SKIP
LOCKED``) still decides every race. Without a lane the batch keeps its scan order. A
NOT_DUE result means another worker got there first (or the schedule changed): the pass
starts nothing more and leaves the rest of its batch (``PassReport.yielded``) to an
immediate next pass, whose fresh scan no longer contains what others decided. A laned
worker that collided at id ``c`` restarts at the median of the fresh batch in ring order
from ``c``: the worker it met keeps going forward from ``c``, so the two split the
stretch ahead instead of leapfrogging through it.

``run(stop)`` loops: a pass, then (optionally) a post-run accounting sweep, then sleep
on the Clock until the earliest of the next known ``next_fire_at``, the earliest
backoff expiry and the fallback poll; a LISTEN/NOTIFY wake source may cut the sleep
short. Correctness never depends on a notification: the table scan finds every due
schedule on the next pass. Cancellation propagates. With an accountant wired, the
sleep is cut into ``accounting_poll_seconds`` pieces with an accounting sweep after
each, so a run is accounted about that long after it finishes (ADR 2221), not after
the next firing.

A database that cannot serve (ADR 2220: the one classification of connection faults,
``ports.retry.is_transient``) is nobody's definition: what is left of it after the
retries sets no schedule aside and ends the pass (``PassReport.unavailable``), with
one WARNING line naming the fault, no traceback; the loop tries again after
``transient_retry.max_delay_seconds``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable
from uuid import UUID

from scheduling.domain.schedule import ScheduleState
from scheduling.ports.clock import Clock
from scheduling.ports.retry import (
    JitterSource,
    RetrySettings,
    TransientRetry,
    fault_of,
    is_transient,
)
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.accounting import PendingAccounts, RunAccountant
from scheduling.service.materializer import (
    MaterializeResult,
    MaterializeStatus,
    ScheduleMaterializer,
)

_log = logging.getLogger(__name__)
_accounting_log = logging.getLogger("scheduling.accounting")
_RING = 1 << 128


@runtime_checkable
class ConnectionLanes(Protocol):
    """A unit-of-work factory that can pass one connection along the units of work a
    task begins inside ``lane()`` (PostgreSQL's, ADR 2640), each still its own
    transaction; a failed one's connection is never passed on."""

    def lane(self) -> AbstractAsyncContextManager[None]: ...


class WakeSource(Protocol):
    """Returns from ``wait`` when a notification suggests looking again (best effort)."""

    async def wait(self) -> None: ...


@dataclass(frozen=True)
class WorkerSettings:
    batch_size: int = 100
    fallback_poll_seconds: float = 30.0
    failure_backoff_seconds: float = 60.0
    accounting_batch: int = 50
    contention_pause_seconds: float = 1.0
    concurrency: int = 1
    """Materializations of one pass in flight at once (each its own transaction)."""
    transient_retry: RetrySettings = field(default_factory=RetrySettings)
    """Prompt retries of a transient database error (connection lost, terminated
    backend, serialization failure, deadlock); ``failure_backoff_seconds`` is for a
    definition that fails deterministically."""
    accounting_poll_seconds: float = 1.0
    """With an accountant wired: the longest the loop sleeps between accounting sweeps
    (accounting lag after a run finishes is about this)."""

    def __post_init__(self) -> None:
        if self.concurrency <= 0:
            raise ValueError("concurrency must be positive")
        if self.batch_size <= 0 or self.fallback_poll_seconds <= 0:
            raise ValueError("batch_size and fallback_poll_seconds must be positive")
        if self.contention_pause_seconds <= 0:
            raise ValueError("contention_pause_seconds must be positive")
        if self.failure_backoff_seconds <= 0 or self.accounting_batch <= 0:
            raise ValueError("failure_backoff_seconds and accounting_batch must be positive")
        if not 0 < self.accounting_poll_seconds < float("inf"):
            raise ValueError("accounting_poll_seconds must be positive")


@dataclass
class PassReport:
    """What one ``run_once`` did."""

    scanned: list[UUID] = field(default_factory=list)
    results: list[MaterializeResult] = field(default_factory=list)
    errors: dict[UUID, str] = field(default_factory=dict)
    deferred: list[UUID] = field(default_factory=list)
    yielded: list[UUID] = field(default_factory=list)
    """Batch ids left unattempted after a collision (the next pass rescans at once)."""
    unavailable: dict[UUID, str] = field(default_factory=dict)
    """Schedules the database could not serve after the retries, by classified fault:
    none is set aside; the pass ended there and the loop tries again shortly."""

    def count(self, status: MaterializeStatus) -> int:
        return sum(r.status is status for r in self.results)


class PassObserver(Protocol):
    """Told of every decision and scan as it happens (the role's metrics port, ADR 1510):
    ``WorkerMetrics`` keeps bounded samples for the exit summary, an observer keeps
    cumulative counters and histograms."""

    def decided(self, result: MaterializeResult) -> None: ...

    def scanned(self, due: int, seconds: float) -> None: ...


@dataclass
class WorkerMetrics:
    """Tenant-safe aggregates of the spec's tracked scheduler metrics (no ids, no
    instructions): due-to-decided lag, dispositions, coalesced misfires and the longest
    outage closed, auto-pauses, scan sizes and durations."""

    lags: list[float] = field(default_factory=list)
    dispositions: dict[str, int] = field(default_factory=dict)
    coalesced: int = 0
    longest_outage_seconds: float = 0.0
    auto_paused: int = 0
    retries: int = 0
    transient_retries: int = 0
    errors: int = 0
    passes: int = 0
    due_seen: int = 0
    scan_seconds: list[float] = field(default_factory=list)
    observers: list[PassObserver] = field(default_factory=list)

    MAX_SAMPLES = 10_000

    def scanned(self, due: int, seconds: float) -> None:
        self.passes += 1
        self.due_seen += due
        self.scan_seconds.append(seconds)
        del self.scan_seconds[: -self.MAX_SAMPLES]
        for observer in self.observers:
            observer.scanned(due, seconds)

    def observe(self, result: MaterializeResult) -> None:
        for observer in self.observers:
            observer.decided(result)
        if result.status is MaterializeStatus.RETRY:
            self.retries += 1
        lag = result.lag_seconds
        if lag is None or result.occurrence is None:
            return
        if len(self.lags) < self.MAX_SAMPLES:
            self.lags.append(lag)
        name = result.occurrence.disposition.value
        self.dispositions[name] = self.dispositions.get(name, 0) + 1
        self.coalesced += result.coalesced
        if result.coalesced_first is not None:
            outage = (result.occurrence.created_at - result.coalesced_first).total_seconds()
            self.longest_outage_seconds = max(self.longest_outage_seconds, outage)
        if result.state_after is ScheduleState.PAUSED:
            self.auto_paused += 1

    def lag_percentiles(self) -> dict[str, float] | None:
        """p50, p95 and p99 of the due-to-decided lag in seconds."""
        if not self.lags:
            return None
        if len(self.lags) == 1:
            only = self.lags[0]
            return {"p50": only, "p95": only, "p99": only}
        cuts = statistics.quantiles(self.lags, n=100, method="inclusive")
        return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}

    def summary(self) -> dict[str, object]:
        return {
            "lag_seconds": self.lag_percentiles(),
            "decisions": sum(self.dispositions.values()),
            "dispositions": dict(sorted(self.dispositions.items())),
            "coalesced_misfires": self.coalesced,
            "longest_outage_seconds": self.longest_outage_seconds,
            "auto_paused": self.auto_paused,
            "admission_retries": self.retries,
            "transient_retries": self.transient_retries,
            "errors": self.errors,
            "passes": self.passes,
            "due_seen": self.due_seen,
            "max_scan_seconds": max(self.scan_seconds, default=0.0),
        }


class ScheduleWorker:
    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        materializer: ScheduleMaterializer,
        clock: Clock,
        settings: WorkerSettings | None = None,
        wake: WakeSource | None = None,
        accountant: RunAccountant | None = None,
        pending: PendingAccounts | None = None,
        lane: int | None = None,
        jitter: JitterSource | None = None,
    ) -> None:
        self._uow = uow
        self._lane = lane
        self._collided_at: UUID | None = None
        self._materializer = materializer
        self._clock = clock
        self.settings = settings or WorkerSettings()
        self._wake = wake
        self._accountant = accountant
        self._pending = pending
        self._backoff: dict[UUID, datetime] = {}
        self.metrics = WorkerMetrics()
        # A fixed seed when none is injected: the delays stay replayable.
        self._retry = TransientRetry(
            self.settings.transient_retry, clock, jitter or random.Random(0)
        )

    async def run_once(self) -> PassReport:
        """Materialize one bounded batch of due schedules, each in its own transaction."""
        started = time.perf_counter()
        now = self._clock.now()
        self._backoff = {k: v for k, v in self._backoff.items() if v > now}
        limit = self.settings.batch_size
        # Over-read by the set-aside count so deferred ids cannot fill the batch.
        due = await self._retry.run(
            functools.partial(self._due, now, limit + len(self._backoff)),
            what="schedule scan",
            idempotent=True,
        )
        report = PassReport()
        batch: list[UUID] = []
        for schedule_id in due:
            if schedule_id in self._backoff:
                report.deferred.append(schedule_id)
                continue
            if len(batch) >= limit:
                break
            batch.append(schedule_id)
        if self._lane is not None:
            lane = self._lane
            batch.sort(key=lambda sid: (sid.int - lane) % _RING)
            if self._collided_at is not None and batch:
                half = len(batch) // 2
                batch = batch[half:] + batch[:half]
                self._lane = batch[0].int
            self._collided_at = None
        collided = False

        async def step(schedule_id: UUID) -> None:
            nonlocal collided
            if report.unavailable:
                return  # the database cannot serve: the rest would meet the same
            if collided:
                report.yielded.append(schedule_id)
            elif not await self._attempt(schedule_id, report) and self._lane is not None:
                # Throughput mode: another worker shares this batch; leave it the rest
                # and restart elsewhere (ADR 1701). Without lanes a row another worker
                # holds is only skipped: yielding the rest would stall behind it.
                collided = True
                self._collided_at = schedule_id
                self._lane = schedule_id.int

        # Up to ``concurrency`` slots take the batch's ids in order, each one at a
        # time: the same ids start in the same order as one task per id behind a
        # semaphore did, but a slot is one task for its whole share of the batch and,
        # where the factory can (``ConnectionLanes``), passes one pooled connection
        # from each decision's transaction to the next (ADR 2640).
        ids = iter(batch)

        async def run_slot() -> None:
            async with self._lane_of():
                for schedule_id in ids:
                    await step(schedule_id)

        if self.settings.concurrency == 1:
            await run_slot()
        else:
            # Cancelling the pass cancels every materialization in flight.
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.settings.concurrency, len(batch))):
                    group.create_task(run_slot())
        self.metrics.transient_retries = self._retry.retried
        self.metrics.scanned(len(due), time.perf_counter() - started)
        return report

    def _lane_of(self) -> AbstractAsyncContextManager[None]:
        """A lane of the worker's factory, if it has them (a wrapped or in-memory
        factory has none: each unit of work checks its connection out as before)."""
        lanes = self._uow
        return lanes.lane() if isinstance(lanes, ConnectionLanes) else nullcontext()

    async def _attempt(self, schedule_id: UUID, report: PassReport) -> bool:
        """Materialize one schedule; False on NOT_DUE (a collision: stop the pass)."""
        report.scanned.append(schedule_id)
        result = await self._one(schedule_id, report)
        return result is None or result.status is not MaterializeStatus.NOT_DUE

    async def _one(self, schedule_id: UUID, report: PassReport) -> MaterializeResult | None:
        """Materialize one schedule; its failure is isolated from its siblings."""
        try:
            # A transient error is retried at once (the materialization is
            # idempotent: a retry re-reads the schedule); what remains is isolated.
            result = await self._retry.run(
                functools.partial(self._materializer.materialize, schedule_id),
                what=f"materializing schedule {schedule_id}",
                idempotent=True,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one definition's failure is isolated
            if is_transient(exc):
                # The database, not the definition: nothing is set aside.
                fault = fault_of(exc)
                report.unavailable[schedule_id] = fault
                _log.warning(
                    "materializing schedule %s: database unavailable after retries (%s);"
                    " not set aside, the pass ends",
                    schedule_id,
                    fault,
                    extra={"fault": fault},
                )
                return None
            _log.exception("materializing schedule %s failed", schedule_id)
            report.errors[schedule_id] = type(exc).__name__
            self.metrics.errors += 1
            self._set_aside(schedule_id, self.settings.failure_backoff_seconds)
            return None
        report.results.append(result)
        self.metrics.observe(result)
        if result.status is MaterializeStatus.RETRY:
            self._set_aside(schedule_id, result.retry_after_seconds or 1.0)
        return result

    async def _due(self, now: datetime, limit: int) -> Sequence[UUID]:
        async with self._uow.begin() as uow:
            return await uow.schedules.due(now, limit)

    async def account(self) -> int:
        """One bounded post-run accounting sweep (if an accountant is wired): a claimed
        batch, each run retried like a materialization."""
        if self._accountant is None or self._pending is None:
            return 0
        # The claim is retried whole (a run accounted before is no longer pending);
        # each run of the batch is retried on its own inside.
        return await self._retry.run(
            functools.partial(
                self._accountant.account_pending,
                self._pending,
                self.settings.accounting_batch,
                retry=self._retry,
            ),
            what="post-run accounting",
            idempotent=True,
        )

    async def _account_logged(self, stopped: Callable[[], bool]) -> None:
        """``account`` in the loop, again at once while sweeps come back full (a
        backlog drains at the accountant's pace, not one batch per poll); a failure is
        logged under ``scheduling.accounting`` (a traceback only for what is not a
        database outage) and left to the next sweep."""
        try:
            while await self.account() >= self.settings.accounting_batch and not stopped():
                pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_transient(exc):
                _accounting_log.warning(
                    "post-run accounting: database unavailable (%s); the next sweep retries",
                    fault_of(exc),
                    extra={"fault": fault_of(exc)},
                )
            else:
                _accounting_log.exception("post-run accounting failed")

    async def sleep_seconds(self) -> float:
        """How long to sleep: until the next known firing, backoff expiry or poll."""
        now = self._clock.now()
        async with self._uow.begin() as uow:
            next_fire = await uow.schedules.next_fire_at()
        bound = now + timedelta(seconds=self.settings.fallback_poll_seconds)
        candidates = [bound, *self._backoff.values()]
        if next_fire is not None and next_fire > now:
            candidates.append(next_fire)
        elif next_fire is not None:
            # Due but set aside or locked by another worker: pause briefly, never spin.
            candidates.append(now + timedelta(seconds=self.settings.contention_pause_seconds))
        return max((min(candidates) - now).total_seconds(), 0.0)

    async def run(self, stop: asyncio.Event | Callable[[], bool]) -> None:
        """Loop until ``stop`` is set (or returns True)."""

        def stopped() -> bool:
            return stop.is_set() if isinstance(stop, asyncio.Event) else stop()

        while not stopped():
            outage = False
            try:
                report = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a scan failure (database away): retry shortly
                report = PassReport()
                outage = is_transient(exc)
                if outage:
                    _log.warning(
                        "schedule scan: database unavailable (%s); trying again shortly",
                        fault_of(exc),
                        extra={"fault": fault_of(exc)},
                    )
                else:
                    _log.exception("schedule scan failed")
            outage = outage or bool(report.unavailable)
            if not outage:
                await self._account_logged(stopped)
            if stopped():
                return
            busy = report.yielded or (report.scanned and not _all_idle(report))
            seconds: float | None = 0.0 if busy and not outage else None
            if outage:
                seconds = self.settings.transient_retry.max_delay_seconds
            if seconds is None:
                try:
                    seconds = await self.sleep_seconds()
                except Exception as exc:
                    if is_transient(exc):
                        _log.warning(
                            "reading the next firing: database unavailable (%s)",
                            fault_of(exc),
                            extra={"fault": fault_of(exc)},
                        )
                        seconds = self.settings.transient_retry.max_delay_seconds
                    else:
                        _log.exception("reading the next firing failed")
                        seconds = self.settings.fallback_poll_seconds
            if seconds > 0:
                await self._sleep_accounting(seconds, stopped)

    async def _sleep_accounting(self, seconds: float, stopped: Callable[[], bool]) -> None:
        """Sleep ``seconds`` (a wake ends it early); with an accountant wired, in pieces
        of ``accounting_poll_seconds`` with a sweep after each."""
        if self._accountant is None or self._pending is None:
            await self._sleep(seconds)
            return
        deadline = self._clock.now() + timedelta(seconds=seconds)
        while not stopped():
            left = (deadline - self._clock.now()).total_seconds()
            if left <= 0:
                return
            if await self._sleep(min(left, self.settings.accounting_poll_seconds)):
                return  # woken: a pass is due
            if stopped():
                return
            await self._account_logged(stopped)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep on the Clock; True when the wake source cut it short."""
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        waits: list[asyncio.Future[None]] = [sleeper]
        if self._wake is not None:
            waits.append(asyncio.ensure_future(_await(self._wake.wait)))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            return sleeper not in done
        finally:
            for pending in waits:
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def _set_aside(self, schedule_id: UUID, seconds: float) -> None:
        self._backoff[schedule_id] = self._clock.now() + timedelta(seconds=seconds)


def _all_idle(report: PassReport) -> bool:
    """True when the pass decided nothing (every scanned schedule was deferred/idle)."""
    return all(
        r.status in (MaterializeStatus.NOT_DUE, MaterializeStatus.RETRY) for r in report.results
    )


async def _await(call: Callable[[], Awaitable[None]]) -> None:
    await call()
