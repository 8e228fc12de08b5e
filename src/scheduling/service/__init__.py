"""Application services: schedule lifecycle, maintenance (purge, next_fire repair)."""

from scheduling.service.maintenance import MaintenanceService, Repair, RetentionSettings
from scheduling.service.schedules import SCHEDULE_NOT_FOUND, ScheduleService
from scheduling.service.validation import PLATFORM_SCOPES, DefinitionValidator
from scheduling.service.values import (
    OccurrenceView,
    RunView,
    ScheduleDefinition,
    ScheduleDetail,
    SchedulePatch,
    ScheduleResult,
    ScheduleSummary,
)

__all__ = [
    "PLATFORM_SCOPES",
    "SCHEDULE_NOT_FOUND",
    "DefinitionValidator",
    "MaintenanceService",
    "OccurrenceView",
    "Repair",
    "RetentionSettings",
    "RunView",
    "ScheduleDefinition",
    "ScheduleDetail",
    "SchedulePatch",
    "ScheduleResult",
    "ScheduleService",
    "ScheduleSummary",
]
