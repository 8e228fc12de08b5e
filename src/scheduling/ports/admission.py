"""The schedule admission port (spec "Capacity, fairness, and cost", "Ports").

Admission is decided inside the materialization transaction, before a run exists, so
the controller receives that transaction's unit of work: a PostgreSQL controller takes
its tenant-scoped advisory lock there and the lock lasts until the materializer
commits or rolls back. Two schedules racing for a tenant's last slot therefore
serialize before either creates a run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from scheduling.domain.admission import AdmissionOutcome, ScheduleAdmissionDecision
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.unit_of_work import UnitOfWork

__all__ = ["AdmissionOutcome", "ScheduleAdmissionController", "ScheduleAdmissionDecision"]


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
