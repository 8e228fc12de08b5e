"""Ports of the run substrate: the run queue, the executor, and their values.

The spec calls the run queue and run worker "existing"; this repository builds a small,
real version (``scheduling.runtime``). The scheduler only creates QUEUED runs; the run
worker claims them through ``RunQueue`` and drives an ``Executor`` one action at a time,
enforcing limits, deadline, tool authority and fencing itself. An executor never writes
to the database and never sees a lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import IntEnum
from typing import Any, Protocol
from uuid import UUID

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.records import RunCheckpoint, RunRecord

INVALID_CAPACITY = reason(
    "schedule.runtime.invalid_capacity",
    "Queue slot counts are negative or the reserves exceed the total",
)


class RunPriority(IntEnum):
    """The two priority classes of the queue (lower claims first)."""

    INTERACTIVE = 0
    ASYNC = 10


def priority_class(priority: int) -> RunPriority:
    """Priority 0 is interactive; every other priority is async work."""
    return RunPriority.INTERACTIVE if priority == RunPriority.INTERACTIVE else RunPriority.ASYNC


@dataclass(frozen=True)
class QueueCapacity:
    """Fleet-wide run slots with a reserve for each class.

    At most ``total_slots`` runs hold a live lease at once. Async work may use at most
    ``total_slots - interactive_reserved`` of them, so an async backlog never takes the
    interactive reserve; interactive work at most ``total_slots - async_reserved``, so
    schedules always keep ``async_reserved`` slots. ``require_reserves()`` is the
    deployment rule (at least one slot of each); zero reserves exist only so a check can
    show what happens without them.
    """

    total_slots: int
    interactive_reserved: int
    async_reserved: int

    def __post_init__(self) -> None:
        counts = (self.total_slots, self.interactive_reserved, self.async_reserved)
        if (
            self.total_slots < 1
            or min(counts) < 0
            or self.interactive_reserved + self.async_reserved > self.total_slots
        ):
            raise ValidationError(
                INVALID_CAPACITY,
                "slot counts must be non-negative and the reserves fit in the total",
                {"total": counts[0], "interactive": counts[1], "async": counts[2]},
            )

    def require_reserves(self) -> QueueCapacity:
        """The deployment rule: one interactive reserved slot and one async slot."""
        if self.interactive_reserved < 1 or self.async_reserved < 1:
            raise ValidationError(
                INVALID_CAPACITY, "a deployment reserves at least one slot for each class"
            )
        return self

    def admits(self, cls: RunPriority, running_interactive: int, running_async: int) -> bool:
        """Whether one more run of ``cls`` may start given the live-leased counts."""
        if running_interactive + running_async >= self.total_slots:
            return False
        if cls is RunPriority.INTERACTIVE:
            return running_interactive < self.total_slots - self.async_reserved
        return running_async < self.total_slots - self.interactive_reserved


@dataclass(frozen=True)
class Lease:
    """A worker's claim on a run. Every write it makes is fenced by ``fencing_token``:
    a claim, a recovery and a cancellation each increase the token, so a stale holder's
    write matches no row."""

    run_id: UUID
    owner: str
    fencing_token: int
    expires_at: datetime


@dataclass(frozen=True)
class ClaimedRun:
    """A claim: the run as stored after the claim, its lease and latest checkpoint.

    ``recovered`` is true when the run was RUNNING under an expired lease (a crashed
    worker); execution then resumes from ``checkpoint`` with its persisted usage.
    """

    run: RunRecord
    lease: Lease
    checkpoint: RunCheckpoint | None
    recovered: bool
    claimed_at: datetime


class RunQueue(Protocol):
    """The durable run queue (PostgreSQL only; there is no in-memory queue)."""

    async def claim(self, owner: str, now: datetime, lease_seconds: float) -> ClaimedRun | None:
        """Claim at most one run in its own committed transaction, or ``None``.

        Eligible: QUEUED runs, and RUNNING runs whose lease expired (``lease_expires_at
        <= now``: recovery), with ``scheduled_for <= now``. Order: priority, then
        ``scheduled_for``, then id. A class is eligible only while ``QueueCapacity.admits``
        it for the live-leased counts at ``now``. Rows locked elsewhere are skipped
        (``FOR UPDATE SKIP LOCKED``); two claimers never get the same run. The claim sets
        RUNNING, the owner, ``lease_expires_at = now + lease_seconds`` and increments the
        fencing token. ``now`` comes from the caller's Clock, never from the database.
        """
        ...

    async def running_counts(self, now: datetime) -> tuple[int, int]:
        """(interactive, async) runs holding a live lease at ``now`` (diagnostics)."""
        ...


# ----------------------------------------------------------------------------- executor


@dataclass(frozen=True)
class ModelCall:
    """One model request (no provider: the scripted agent only charges it)."""

    cost: Decimal = Decimal("0.01")


@dataclass(frozen=True)
class ToolCall:
    """A request to invoke a tool through the tool pipeline."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    cost: Decimal = Decimal(0)


@dataclass(frozen=True)
class Wait:
    """Work that takes ``seconds`` of clock time (the worker heartbeats meanwhile)."""

    seconds: float


@dataclass(frozen=True)
class Finish:
    """The run completes with the assistant's ``answer``."""

    answer: str


@dataclass(frozen=True)
class Fail:
    """The agent gives up; ``error_class`` is a sanitized classification."""

    error_class: str = "ScriptedFailure"


Action = ModelCall | ToolCall | Wait | Finish | Fail


@dataclass(frozen=True)
class ExecutionContext:
    """What an executor may look at: never a lease, a connection or a credential."""

    run: RunRecord
    instruction: str
    cursor: int
    agent_spec: Mapping[str, Any]


class Executor(Protocol):
    """Decides a run's next action. Contract: deterministic for a given context, no I/O,
    no clock reads; the worker applies, charges, authorizes and checkpoints every
    action, so re-asking for the same ``cursor`` after a crash returns the same action."""

    async def next_action(self, context: ExecutionContext) -> Action: ...


class RunTerminalHook(Protocol):
    """Called after a run's terminal state committed (post-run accounting seam).

    Contract: idempotent; a failure is logged by the worker and never undoes the run."""

    async def run_finished(self, run: RunRecord) -> None: ...
