"""Admission rules (spec "Capacity, fairness, and cost"): the decision values and the
pure rule every controller applies to a tenant's committed usage.

A concurrency denial is transient (RETRY after a bounded backoff); a rate or a rolling
daily/monthly cost denial is REJECT with a stable reason (recorded MISSED, so a cost
ceiling cannot build an unbounded queue). Cost counts committed usage of finished
scheduled runs plus the ``max_cost`` reservation of every active one, plus the
candidate's own ``max_cost``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from scheduling.domain.reasons import reason
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.tenancy import TenantCeilings

CONCURRENCY = reason(
    "schedule.admission.concurrency_limit",
    "The tenant's active scheduled runs are at their ceiling; retried after a backoff",
)
RATE = reason(
    "schedule.admission.rate_limited",
    "The tenant reached its materializations per minute; the occurrence is MISSED",
)
DAILY_COST = reason(
    "schedule.admission.daily_cost_exceeded",
    "The rolling daily scheduled cost would exceed the tenant ceiling; MISSED",
)
MONTHLY_COST = reason(
    "schedule.admission.monthly_cost_exceeded",
    "The rolling monthly scheduled cost would exceed the tenant ceiling; MISSED",
)

DEFAULT_BACKOFF_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 300.0


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


@dataclass(frozen=True)
class TenantUsage:
    """A tenant's committed scheduled-run usage at one instant."""

    active_runs: int
    materialized_last_minute: int
    active_reserved_cost: Decimal
    daily_committed_cost: Decimal
    monthly_committed_cost: Decimal


def decide_admission(
    usage: TenantUsage,
    ceilings: TenantCeilings,
    revision: ScheduleRevision,
    *,
    backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
) -> ScheduleAdmissionDecision:
    """The decision for one more run of ``revision`` given ``usage`` (pure)."""
    if usage.active_runs >= ceilings.max_active_runs:
        bounded = min(max(backoff_seconds, 0.001), MAX_BACKOFF_SECONDS)
        return ScheduleAdmissionDecision(AdmissionOutcome.RETRY, CONCURRENCY, bounded)
    if usage.materialized_last_minute >= ceilings.max_materializations_per_minute:
        return ScheduleAdmissionDecision(AdmissionOutcome.REJECT, RATE)
    charge = usage.active_reserved_cost + revision.limits.max_cost
    if usage.daily_committed_cost + charge > ceilings.max_daily_cost:
        return ScheduleAdmissionDecision(AdmissionOutcome.REJECT, DAILY_COST)
    if usage.monthly_committed_cost + charge > ceilings.max_monthly_cost:
        return ScheduleAdmissionDecision(AdmissionOutcome.REJECT, MONTHLY_COST)
    return ScheduleAdmissionDecision(AdmissionOutcome.ALLOW)
