"""The in-memory "database": committed tables plus the copy one unit of work edits."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.outbox import OutboxMessage
from scheduling.ports.records import (
    AgentVersionRecord,
    IdempotencyEntry,
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunRecord,
    SessionEvent,
    SessionRecord,
)


@dataclass
class Tables:
    """Every table, keyed like its primary key."""

    schedules: dict[UUID, Schedule] = field(default_factory=dict)
    revisions: dict[tuple[UUID, int], ScheduleRevision] = field(default_factory=dict)
    occurrences: dict[UUID, ScheduleOccurrence] = field(default_factory=dict)
    idempotency: dict[tuple[str, str, str], IdempotencyEntry] = field(default_factory=dict)
    principals: dict[tuple[str, str], PrincipalRecord] = field(default_factory=dict)
    agent_versions: dict[tuple[UUID, str], AgentVersionRecord] = field(default_factory=dict)
    agent_active: dict[UUID, str] = field(default_factory=dict)
    sessions: dict[UUID, SessionRecord] = field(default_factory=dict)
    session_events: dict[tuple[UUID, int], SessionEvent] = field(default_factory=dict)
    runs: dict[UUID, RunRecord] = field(default_factory=dict)
    checkpoints: dict[tuple[UUID, int], RunCheckpoint] = field(default_factory=dict)
    events: dict[UUID, ProcessEvent] = field(default_factory=dict)
    outbox: dict[UUID, OutboxMessage] = field(default_factory=dict)

    def copy(self) -> Tables:
        # Values are immutable, so copying the dictionaries isolates a transaction.
        return Tables(**{name: copy.copy(value) for name, value in vars(self).items()})


@dataclass
class Scope:
    """What one unit of work may see: a principal, a tenant, or everything (trusted)."""

    tenant_id: str | None = None
    principal_id: str | None = None

    def sees(self, tenant_id: str, principal_id: str) -> bool:
        if self.tenant_id is not None and tenant_id != self.tenant_id:
            return False
        return self.principal_id is None or principal_id == self.principal_id


class Working(Protocol):
    """What a repository reads from its unit of work: the scope and the open tables
    (``MemoryUnitOfWork`` is one; repositories need not import it)."""

    scope: Scope

    def tables(self) -> Tables:
        """The working copy of an open unit of work."""
        ...
