"""The schedule admission port (spec "Capacity, fairness, and cost", "Ports").

Admission is decided inside the materialization transaction, before a run exists, so
the controller receives that transaction's unit of work: a PostgreSQL controller takes
its tenant-scoped advisory lock there and the lock lasts until the materializer
commits or rolls back. Two schedules racing for a tenant's last slot therefore
serialize before either creates a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.unit_of_work import UnitOfWork


class AdmissionOutcome(StrEnum):
    ALLOW = "ALLOW"
    RETRY = "RETRY"
    REJECT = "REJECT"


@dataclass(frozen=True)
class ScheduleAdmissionDecision:
    """ALLOW continues; RETRY leaves the schedule due (no occurrence) until at least
    ``retry_after_seconds`` have passed; REJECT records a MISSED occurrence with the
    stable ``reason_code`` and advances the cadence."""

    outcome: AdmissionOutcome
    reason_code: str | None = None
    retry_after_seconds: float | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome is AdmissionOutcome.ALLOW


class ScheduleAdmissionController(Protocol):
    """Decides whether one more scheduled run of ``tenant_id`` may be created now.

    Contract: reads only authoritative committed state (plus the caller's own
    transaction) through ``uow``; performs no network I/O; is deterministic for equal
    state; a RETRY carries a positive bounded ``retry_after_seconds`` and a REJECT a
    stable ``schedule.*`` reason code. It writes nothing.
    """

    async def check(
        self, uow: UnitOfWork, tenant_id: str, revision: ScheduleRevision, now: datetime
    ) -> ScheduleAdmissionDecision: ...
