"""Plain records of the substrate (principals, agents, sessions, runs, events).

The scheduling values (Schedule, ScheduleRevision, ScheduleOccurrence) live in the
domain; these are the rows of the small "existing" platform the scheduler writes to.
Every instant is an aware UTC datetime supplied by a Clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any
from uuid import UUID


class RunStatus(StrEnum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


@dataclass(frozen=True)
class PrincipalRecord:
    """A principal in the durable directory; ``authority_inputs`` are non-secret facts."""

    tenant_id: str
    principal_id: str
    enabled: bool
    scopes: frozenset[str]
    authority_inputs: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class AgentVersionRecord:
    """One immutable AgentSpec version with its policy profile and default limits."""

    agent_id: UUID
    version: str
    policy_profile: str
    spec: dict[str, Any]
    limits: dict[str, Any]
    content_hash: str
    created_at: datetime


@dataclass(frozen=True)
class SessionRecord:
    """A conversation session; ``metadata["schedule_id"]`` is reserved for the scheduler."""

    id: UUID
    tenant_id: str
    principal_id: str
    agent_id: UUID
    agent_version: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    title: str | None = None


@dataclass(frozen=True)
class SessionEvent:
    """An append-only session event; ``context_only`` marks durable model context."""

    session_id: UUID
    seq: int
    event_type: str
    actor: str
    payload: dict[str, Any]
    occurred_at: datetime
    context_only: bool = False
    run_id: UUID | None = None


@dataclass(frozen=True)
class RunRecord:
    """A durable run (the queue row)."""

    id: UUID
    tenant_id: str
    principal_id: str
    session_id: UUID
    agent_id: UUID
    agent_version: str
    policy_profile: str
    status: RunStatus
    priority: int
    scheduled_for: datetime
    requested_scopes: frozenset[str]
    limits: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    deadline_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    fencing_token: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    cost: Decimal = Decimal(0)
    failure: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    finished_at: datetime | None = None
    # Claim facts only the queue's claim writes (revision 0006, ADR 1512).
    first_claimed_at: datetime | None = None
    lease_reclaims: int = 0


@dataclass(frozen=True)
class RunCheckpoint:
    """A run checkpoint written under the run's fencing token."""

    run_id: UUID
    seq: int
    fencing_token: int
    state: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class ProcessEvent:
    """An append-only event outside any session (schedule lifecycle, audit)."""

    id: UUID
    tenant_id: str
    principal_id: str
    event_type: str
    actor: str
    payload: dict[str, Any]
    occurred_at: datetime
    schedule_id: UUID | None = None


@dataclass(frozen=True)
class IdempotencyEntry:
    """A create request's idempotency key, bound to the request's content hash."""

    tenant_id: str
    principal_id: str
    key: str
    request_hash: str
    schedule_id: UUID
    created_at: datetime


@dataclass(frozen=True)
class ErasureResult:
    """What a session erasure did: occurrences marked erased and rows deleted."""

    session_id: UUID
    occurrences_marked: int
    runs_deleted: int
    events_deleted: int


# The fields of a ``RunRecord`` a lease holder or a cancellation changes
# (``RunRepository.save`` writes only these); everything else (identity, agent,
# scopes, limits, deadline, metadata) is fixed at submission.
RUN_MUTABLE_FIELDS = (
    "status",
    "lease_owner",
    "lease_expires_at",
    "fencing_token",
    "usage",
    "cost",
    "failure",
    "updated_at",
    "finished_at",
)
