"""Admission rules (spec "Capacity, fairness, and cost") and the development controller.

The pure rule (``decide_admission``) lives in ``scheduling.domain.admission`` and is
re-exported here for callers of the service layer.

``AllowAllAdmission`` admits everything and exists for development only;
``require_production_admission`` is what a production composition root calls.
"""

from __future__ import annotations

from datetime import datetime

from scheduling.domain.admission import (
    CONCURRENCY,
    DAILY_COST,
    DEFAULT_BACKOFF_SECONDS,
    MAX_BACKOFF_SECONDS,
    MONTHLY_COST,
    RATE,
    AdmissionOutcome,
    ScheduleAdmissionDecision,
    TenantUsage,
    decide_admission,
)
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.unit_of_work import UnitOfWork

__all__ = [
    "CONCURRENCY",
    "DAILY_COST",
    "DEFAULT_BACKOFF_SECONDS",
    "DEVELOPMENT_ONLY",
    "MAX_BACKOFF_SECONDS",
    "MONTHLY_COST",
    "RATE",
    "AllowAllAdmission",
    "TenantUsage",
    "decide_admission",
    "require_production_admission",
]

DEVELOPMENT_ONLY = reason(
    "schedule.admission.development_only",
    "The allow-all admission controller was configured in production",
)


class AllowAllAdmission:
    """Admits every occurrence. Development only: production refuses it."""

    development_only = True

    async def check(
        self, uow: UnitOfWork, tenant_id: str, revision: ScheduleRevision, now: datetime
    ) -> ScheduleAdmissionDecision:
        return ScheduleAdmissionDecision(AdmissionOutcome.ALLOW)


def require_production_admission(
    controller: ScheduleAdmissionController,
) -> ScheduleAdmissionController:
    """Return ``controller`` unless it is development-only (then raise)."""
    if getattr(controller, "development_only", False):
        raise ValidationError(
            DEVELOPMENT_ONLY, "production scheduling refuses the allow-all admission controller"
        )
    return controller
