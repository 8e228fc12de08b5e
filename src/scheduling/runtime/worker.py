"""The run worker: claim, lease, heartbeat, checkpoint, enforce, finish.

Each action of the executor goes through two fenced transactions:

1. *charge*: check the deadline and the limits for the usage after the action, then
   persist the charged usage with a checkpoint (``charged = true``; for a ``Wait`` also
   its absolute end) — before the action happens, so a crash can never hand a recovered
   run a fresh budget;
2. *perform, then record*: the action runs (tool pipeline, clock wait with heartbeats)
   and its result is checkpointed with the cursor advanced (``charged = false``).

A recovered run resumes at its checkpoint's cursor with its checkpointed usage; a
charged but unrecorded action is performed again without being charged again.
Every write is ``RunRepository.save(..., expected_fencing_token=token)`` first, so a
worker whose lease was taken over (recovery) or revoked (cancellation) writes nothing
and stops with ``LeaseLost``. Time comes only from the Clock; ``probe.step`` follows
each commit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import RunCheckpoint, RunRecord, RunStatus, SessionEvent
from scheduling.ports.repositories import STALE
from scheduling.ports.retry import (
    JitterSource,
    RetrySettings,
    TransientRetry,
    fault_of,
    is_transient,
)
from scheduling.ports.runtime import (
    ClaimedRun,
    ExecutionContext,
    Executor,
    Fail,
    Finish,
    ModelCall,
    RunQueue,
    RunTerminalHook,
    ToolCall,
    Wait,
)
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime.context import instruction_of
from scheduling.runtime.tools import ToolPipeline
from scheduling.runtime.usage import (
    LIMITS_INVALID,
    SYNTHESIS_RESERVE,
    Usage,
    charge,
    exceeded,
    in_synthesis_reserve,
    parse_limits,
)

LEASE_LOST = reason(
    "schedule.runtime.lease_lost",
    "The worker's fencing token is stale (recovered or cancelled elsewhere); it wrote nothing",
)
DEADLINE_EXCEEDED = reason("schedule.runtime.deadline_exceeded", "The run passed its deadline_at")
AGENT_FAILED = reason("schedule.runtime.agent_failed", "The agent ended the run as failed")
INVALID_SETTINGS = reason(
    "schedule.runtime.invalid_settings",
    "Worker lease, heartbeat, poll or drain seconds are not positive, or heartbeat >= lease",
)
DRAINED = reason(
    "schedule.runtime.drained",
    "The worker stopped: the run was checkpointed and its lease released for another worker",
)

log = logging.getLogger(__name__)


class LeaseLost(ConflictError):
    """A fenced write matched no row: another holder or a cancellation moved the token."""


class _Released(Exception):
    """The drain timeout passed while a run was held: hand it back at this safe point."""


@dataclass(frozen=True)
class WorkerSettings:
    """Lease length, heartbeat period (below the lease) and idle poll interval."""

    lease_seconds: float = 60.0
    heartbeat_seconds: float = 20.0
    poll_seconds: float = 1.0
    drain_seconds: float = 30.0
    """After the first stop signal: how long held runs may go on before each is
    checkpointed and its lease released (fenced) so another worker resumes it."""
    transient_retry: RetrySettings = field(default_factory=RetrySettings)
    """Prompt retries of a fenced write that met a transient database error (never of
    one whose COMMIT outcome is unknown: that run is left to lease recovery)."""

    def __post_init__(self) -> None:
        if (
            min(self.lease_seconds, self.heartbeat_seconds, self.poll_seconds) <= 0
            or not 0 < self.drain_seconds < float("inf")
            or self.heartbeat_seconds >= self.lease_seconds
        ):
            raise ValidationError(INVALID_SETTINGS, "need 0 < heartbeat < lease and poll > 0")


@dataclass
class RunState:
    """The checkpointed execution state."""

    cursor: int = 0
    charged: bool = False
    usage: Usage = field(default_factory=Usage)
    wait_until: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "charged": self.charged,
            "usage": self.usage.to_json(),
            "wait_until": None if self.wait_until is None else self.wait_until.isoformat(),
        }

    @classmethod
    def from_checkpoint(cls, checkpoint: RunCheckpoint | None, run: RunRecord) -> RunState:
        # A seed checkpoint may carry anything; missing keys mean "not started".
        data = checkpoint.state if checkpoint is not None else {}
        usage = Usage.from_json(data.get("usage", run.usage))
        wait = data.get("wait_until")
        return cls(
            cursor=int(data.get("cursor", 0)),
            charged=bool(data.get("charged", False)),
            usage=usage,
            wait_until=datetime.fromisoformat(wait) if isinstance(wait, str) else None,
        )


@dataclass(frozen=True)
class RunOutcome:
    """What one execution attempt ended with (evidence for checks and logs)."""

    run_id: str
    status: str
    reason_code: str | None
    usage: dict[str, Any]
    fencing_token: int
    recovered: bool
    resumed_from_seq: int | None
    resumed_cursor: int
    claimed_at: datetime
    ended_at: datetime
    lease_lost: bool = False


@dataclass(frozen=True)
class _Event:
    event_type: str
    actor: str
    payload: dict[str, Any]


class RunObserver(Protocol):
    """Told of each claim and of each attempt's end (the role's metrics port, ADR 1510).
    ``ended`` gets the run as this worker last wrote it; an observer's failure is logged
    and never touches the run."""

    def claimed(self, claimed: ClaimedRun) -> None: ...

    async def ended(self, outcome: RunOutcome, run: RunRecord) -> None: ...


class _Attempt:
    """One worker's hold on one run: its token, run copy and checkpoint sequence."""

    def __init__(self, claimed: ClaimedRun) -> None:
        self.run = claimed.run
        self.token = claimed.lease.fencing_token
        self.seq = claimed.checkpoint.seq if claimed.checkpoint is not None else -1


class RunWorker:
    """Executes claimed runs. Several workers (and slots) may share one database."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        queue: RunQueue,
        executor: Executor,
        tools: ToolPipeline,
        clock: Clock,
        owner: str,
        settings: WorkerSettings | None = None,
        probe: Probe | None = None,
        on_finished: RunTerminalHook | None = None,
        on_claim: Callable[[ClaimedRun], None] | None = None,
        jitter: JitterSource | None = None,
        observer: RunObserver | None = None,
    ) -> None:
        self._uow = uow
        self._queue = queue
        self._executor = executor
        self._tools = tools
        self._clock = clock
        self.owner = owner
        self.settings = settings or WorkerSettings()
        self._probe = probe or NullProbe()
        self._on_finished = on_finished
        self._on_claim = on_claim
        self.observer = observer
        self._release = asyncio.Event()
        # A fixed seed when none is injected: the delays stay replayable.
        self.retry = TransientRetry(
            self.settings.transient_retry, clock, jitter or random.Random(0)
        )

    # ------------------------------------------------------------------ loop

    async def run_once(self) -> RunOutcome | None:
        """Claim one run and execute it to its end (or until the lease is lost)."""
        # A transient error before the claim's COMMIT is retried; an unknown COMMIT
        # outcome is not (a claim that landed is recovered after its lease).
        claimed = await self.retry.run(
            lambda: self._queue.claim(self.owner, self._clock.now(), self.settings.lease_seconds),
            what=f"run worker {self.owner} claim",
        )
        if claimed is None:
            return None
        if self._on_claim is not None:
            self._on_claim(claimed)
        if self.observer is not None:
            self.observer.claimed(claimed)
        return await self.execute(claimed)

    async def slot(self, stop: asyncio.Event) -> None:
        """One claim loop until ``stop`` is set; when idle it sleeps on the clock. An
        unexpected error abandons the run (its lease expires and another worker
        recovers it), as a crash would."""
        while not stop.is_set():
            try:
                outcome = await self.run_once()
            except Exception as exc:
                if is_transient(exc):
                    # The database cannot serve (after the retries): one line, no
                    # traceback, once per slot and poll (ADR 2220).
                    log.warning(
                        "run worker %s: database unavailable (%s); claim or run left to"
                        " the next poll",
                        self.owner,
                        fault_of(exc),
                        extra={"fault": fault_of(exc)},
                    )
                else:
                    log.exception("run worker %s: execution abandoned", self.owner)
                outcome = None
            if outcome is None and not stop.is_set():
                await self._clock.sleep(self.settings.poll_seconds)

    async def serve(self, slots: int, stop: asyncio.Event) -> None:
        """Run ``slots`` claim loops concurrently until ``stop`` is set. Once it is, no
        slot claims again; a held run goes on for at most ``drain_seconds`` (on the
        Clock), then is checkpointed and its lease released (``release``)."""
        drainer = asyncio.ensure_future(self._drain_after(stop))
        try:
            await asyncio.gather(*(self.slot(stop) for _ in range(slots)))
        finally:
            drainer.cancel()
            await asyncio.gather(drainer, return_exceptions=True)

    def release(self) -> None:
        """Hand back every held run at its next safe point (and claim nothing more
        once the slots see their stop event)."""
        self._release.set()

    async def _drain_after(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await self._clock.sleep(self.settings.drain_seconds)
        log.info("run worker %s: drain timeout passed; releasing held runs", self.owner)
        self.release()

    # ------------------------------------------------------------------ execution

    async def execute(self, claimed: ClaimedRun) -> RunOutcome:
        attempt = _Attempt(claimed)
        ended = await self._attempt(attempt, claimed)
        if self.observer is not None:
            try:
                await self.observer.ended(ended, attempt.run)
            except Exception:
                log.exception("run observer failed for run %s", attempt.run.id)
        return ended

    async def _attempt(self, attempt: _Attempt, claimed: ClaimedRun) -> RunOutcome:
        state = RunState.from_checkpoint(claimed.checkpoint, claimed.run)
        resumed_cursor = state.cursor

        def outcome(reason_code: str | None, *, lost: bool = False) -> RunOutcome:
            return RunOutcome(
                run_id=str(attempt.run.id),
                status=attempt.run.status.value,
                reason_code=reason_code,
                usage=state.usage.to_json(),
                fencing_token=attempt.token,
                recovered=claimed.recovered,
                resumed_from_seq=None if claimed.checkpoint is None else claimed.checkpoint.seq,
                resumed_cursor=resumed_cursor,
                claimed_at=claimed.claimed_at,
                ended_at=self._clock.now(),
                lease_lost=lost,
            )

        try:
            try:
                code = await self._drive(attempt, state, claimed)
            except _Released:
                await self._write(attempt, state=state, release=True, step="run.released")
                return outcome(DRAINED)
        except LeaseLost:
            return outcome(LEASE_LOST, lost=True)
        if self._on_finished is not None:
            try:
                # Post-run accounting is idempotent: a transient error is retried.
                await self.retry.run(
                    functools.partial(self._on_finished.run_finished, attempt.run),
                    what=f"post-run hook for run {attempt.run.id}",
                    idempotent=True,
                )
            except Exception as exc:
                if is_transient(exc):
                    log.warning(
                        "post-run hook for run %s: database unavailable (%s); the"
                        " scheduler's accounting sweep takes it",
                        attempt.run.id,
                        fault_of(exc),
                        extra={"fault": fault_of(exc)},
                    )
                else:
                    log.exception("post-run hook failed for run %s", attempt.run.id)
        return outcome(code)

    async def _drive(self, attempt: _Attempt, state: RunState, claimed: ClaimedRun) -> str | None:
        run = attempt.run
        events, agent = await self.retry.run(
            functools.partial(self._read_context, run),
            what=f"run {run.id} context",
            idempotent=True,
        )
        agent_spec = agent.spec if agent is not None else {}
        instruction = instruction_of(events)
        started = "run.recovered" if claimed.recovered else "run.started"
        await self._write(
            attempt,
            events=[
                _Event(
                    started,
                    "runtime",
                    {
                        "fencing_token": attempt.token,
                        "resumed_from_seq": attempt.seq if attempt.seq >= 0 else None,
                        "cursor": state.cursor,
                        "usage": state.usage.to_json(),
                    },
                )
            ],
            step="run.started",
        )
        limits = parse_limits(run.limits)
        if limits is None:
            return await self._finish(attempt, state, RunStatus.FAILED, LIMITS_INVALID)
        while True:
            if self._release.is_set():
                raise _Released
            if self._past_deadline(run):
                return await self._finish(attempt, state, RunStatus.FAILED, DEADLINE_EXCEEDED)
            action = await self._executor.next_action(
                ExecutionContext(run, instruction, state.cursor, agent_spec)
            )
            if isinstance(action, Finish):
                answer = _Event("message.assistant", "assistant", {"text": action.answer})
                return await self._finish(attempt, state, RunStatus.COMPLETED, None, [answer])
            if isinstance(action, Fail):
                return await self._finish(
                    attempt, state, RunStatus.FAILED, AGENT_FAILED, error_class=action.error_class
                )
            if (
                not state.charged
                and isinstance(action, ToolCall)
                and in_synthesis_reserve(limits, state.usage)
            ):
                # Refused before it is charged: the cursor moves on, the agent answers.
                denied = _Event(
                    "tool.denied",
                    "runtime",
                    {
                        "tool": action.name,
                        "reason_code": SYNTHESIS_RESERVE,
                        "missing_scopes": [],
                    },
                )
                state.cursor += 1
                await self._write(attempt, state=state, events=[denied], step="run.checkpointed")
                continue
            if not state.charged:
                after = state.usage + charge(action)
                over = exceeded(limits, after)
                if over is not None:
                    return await self._finish(attempt, state, RunStatus.FAILED, over)
                state.usage, state.charged = after, True
                if isinstance(action, Wait):
                    state.wait_until = self._clock.now() + timedelta(seconds=action.seconds)
                await self._write(attempt, state=state, step="run.charged")
            results: list[_Event] = []
            if isinstance(action, ToolCall):
                results.append(self._tool(action, run, agent_spec))
            elif isinstance(action, Wait):
                if not await self._wait(attempt, state):
                    return await self._finish(attempt, state, RunStatus.FAILED, DEADLINE_EXCEEDED)
            elif isinstance(action, ModelCall):
                results.append(_Event("model.called", "runtime", {"cost": str(action.cost)}))
            state.cursor, state.charged, state.wait_until = state.cursor + 1, False, None
            await self._write(attempt, state=state, events=results, step="run.checkpointed")

    async def _read_context(self, run: RunRecord) -> tuple[Any, Any]:
        async with self._uow.begin() as uow:
            events = await uow.sessions.events(run.session_id, None)
            agent = await uow.agents.get_version(run.agent_id, run.agent_version)
        return events, agent

    def _past_deadline(self, run: RunRecord) -> bool:
        return run.deadline_at is not None and self._clock.now() >= run.deadline_at

    def _tool(self, call: ToolCall, run: RunRecord, agent_spec: dict[str, Any]) -> _Event:
        decision = self._tools.check(call, run.requested_scopes, agent_spec)
        if not decision.allowed:
            return _Event(
                "tool.denied",
                "runtime",
                {
                    "tool": call.name,
                    "reason_code": decision.reason_code,
                    "missing_scopes": sorted(decision.missing_scopes),
                },
            )
        output = self._tools.invoke(call)
        return _Event(
            "tool.result",
            "tool",
            {
                "tool": call.name,
                "text": output.text,
                "bytes": output.original_bytes,
                "truncated": output.truncated,
            },
        )

    async def _wait(self, attempt: _Attempt, state: RunState) -> bool:
        """Sleep until ``state.wait_until`` in heartbeat-sized pieces; False at the deadline."""
        end = state.wait_until or self._clock.now()
        while True:
            now = self._clock.now()
            if self._past_deadline(attempt.run):
                return False
            if now >= end:
                return True
            piece = min((end - now).total_seconds(), self.settings.heartbeat_seconds)
            if attempt.run.deadline_at is not None:
                piece = min(piece, max((attempt.run.deadline_at - now).total_seconds(), 0.0))
            await self._sleep_unless_released(piece)
            if self._release.is_set():
                raise _Released
            await self._write(attempt, step="run.heartbeat")

    async def _sleep_unless_released(self, seconds: float) -> None:
        if self._release.is_set():
            return
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        released = asyncio.ensure_future(self._release.wait())
        try:
            await asyncio.wait((sleeper, released), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, released):
                task.cancel()
            await asyncio.gather(sleeper, released, return_exceptions=True)

    # ------------------------------------------------------------------ fenced writes

    async def _finish(
        self,
        attempt: _Attempt,
        state: RunState,
        status: RunStatus,
        reason_code: str | None,
        events: Sequence[_Event] = (),
        *,
        error_class: str | None = None,
    ) -> str | None:
        failure = None
        if status is RunStatus.FAILED:
            failure = {"reason": reason_code, "error_class": error_class or "RunLimitExceeded"}
            if reason_code == DEADLINE_EXCEEDED:
                failure["error_class"] = "DeadlineExceeded"
            elif reason_code == AGENT_FAILED:
                failure["error_class"] = error_class or "AgentFailed"
        terminal = _Event(
            f"run.{status.value.lower()}",
            "runtime",
            {"reason_code": reason_code, "usage": state.usage.to_json()},
        )
        await self._write(
            attempt,
            state=state,
            events=[*events, terminal],
            status=status,
            failure=failure,
            step="run.finished",
        )
        return reason_code

    async def _write(
        self,
        attempt: _Attempt,
        *,
        step: str,
        state: RunState | None = None,
        events: Sequence[_Event] = (),
        status: RunStatus | None = None,
        failure: dict[str, Any] | None = None,
        release: bool = False,
    ) -> None:
        """One fenced transaction: the run row first (its UPDATE is the fence and takes
        the row lock), then the checkpoint and session events; then ``probe.step``.
        ``release`` ends the lease now (the run stays RUNNING, claimable at once)."""
        now = self._clock.now()
        run = attempt.run
        changes: dict[str, Any] = {"updated_at": now}
        if state is not None:
            changes["usage"] = state.usage.to_json()
            changes["cost"] = state.usage.cost
        if status is None:
            lease = 0.0 if release else self.settings.lease_seconds
            changes["lease_expires_at"] = now + timedelta(seconds=lease)
        else:
            changes.update(
                status=status,
                lease_owner=None,
                lease_expires_at=None,
                finished_at=now,
                failure=failure,
            )
        updated = replace(run, **changes)
        # Before COMMIT nothing of a failed attempt persists, so a transient error is
        # retried with the same rows; an unknown COMMIT outcome is not (lease recovery).
        await self.retry.run(
            functools.partial(self._commit_write, attempt, updated, state, events, now),
            what=f"run {run.id} {step}",
        )
        attempt.run = updated
        if state is not None:
            attempt.seq += 1
        await self._probe.step(step)

    async def _commit_write(
        self,
        attempt: _Attempt,
        updated: RunRecord,
        state: RunState | None,
        events: Sequence[_Event],
        now: datetime,
    ) -> None:
        run = attempt.run
        async with self._uow.begin() as uow:
            try:
                await uow.runs.save(updated, expected_fencing_token=attempt.token)
            except ConflictError as exc:
                if exc.code == STALE:
                    raise LeaseLost(
                        LEASE_LOST, "the lease moved to another holder", {"run_id": str(run.id)}
                    ) from None
                raise
            if state is not None:
                await uow.runs.add_checkpoint(
                    RunCheckpoint(run.id, attempt.seq + 1, attempt.token, state.to_json(), now)
                )
            if events:
                existing = await uow.sessions.events(run.session_id, None)
                seq = existing[-1].seq if existing else 0
                for offset, event in enumerate(events, start=1):
                    await uow.sessions.append_event(
                        SessionEvent(
                            session_id=run.session_id,
                            seq=seq + offset,
                            event_type=event.event_type,
                            actor=event.actor,
                            payload=event.payload,
                            occurred_at=now,
                            run_id=run.id,
                        )
                    )
            await uow.commit()
