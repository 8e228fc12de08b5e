"""What startup refuses: the stable ``schedule.bootstrap.*`` codes, ``StartupRefused`` and
the production checks every role applies to what it wired."""

from __future__ import annotations

from typing import NoReturn

from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.directories import DurablePrincipalDirectory
from scheduling.config import Settings, validate_release
from scheduling.domain.errors import UnavailableError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.admission import ScheduleAdmissionController
from scheduling.ports.directories import SchedulePrincipalDirectory
from scheduling.ports.runtime import QueueCapacity
from scheduling.service.admission import require_production_admission
from scheduling.storage import Storage

REFUSED = reason("schedule.bootstrap.refused", "Startup was refused; details list every problem")
MEMORY_REPOSITORIES = reason(
    "schedule.bootstrap.memory_repositories",
    "Production startup refuses in-memory repositories (or a run queue without PostgreSQL)",
)
DIRECTORY_NOT_DURABLE = reason(
    "schedule.bootstrap.principal_directory_not_durable",
    "Production startup refuses a principal directory that is not the durable one",
)
ALLOW_ALL_ADMISSION = reason(
    "schedule.bootstrap.allow_all_admission",
    "Production startup refuses the development allow-all admission controller",
)
WORKER_TOPOLOGY = reason(
    "schedule.bootstrap.worker_topology",
    "The run capacity lacks a reserve for either class, or its slot counts are invalid",
)
FEATURE_DISABLED = reason(
    "schedule.bootstrap.feature_disabled", "The role's schedule feature flag is off"
)
DATABASE_URL_MISSING = reason(
    "schedule.bootstrap.database_url_missing", "The role needs a database URL and has none"
)
DEVELOPMENT_IN_PRODUCTION = reason(
    "schedule.bootstrap.development_in_production",
    "The development builder was asked to start in production",
)


class StartupRefused(UnavailableError):
    """A role refused to start; ``problems`` lists every reason (``code: text``)."""

    def __init__(self, problems: list[str]) -> None:
        codes = [p.split(":", 1)[0] for p in problems]
        super().__init__(REFUSED, "startup refused: " + "; ".join(problems), {"codes": codes})
        self.problems = problems
        self.codes = codes


RETRY_SETTINGS = reason(
    "schedule.bootstrap.retry_settings",
    "The transient-error retry, failure backoff or drain settings are invalid for this role",
)


def production_problems(
    *,
    storage: Storage | None = None,
    principals: SchedulePrincipalDirectory | None = None,
    admission: ScheduleAdmissionController | None = None,
    capacity: QueueCapacity | None = None,
) -> list[str]:
    """What production refuses among the wired adapters (empty: acceptable)."""
    problems: list[str] = []
    if storage is not None and not storage.durable:
        problems.append(f"{MEMORY_REPOSITORIES}: {type(storage).__name__} is not PostgreSQL")
    if principals is not None and not isinstance(principals, DurablePrincipalDirectory):
        problems.append(f"{DIRECTORY_NOT_DURABLE}: {type(principals).__name__}")
    if admission is not None:
        try:
            require_production_admission(admission)
        except ValidationError:
            problems.append(f"{ALLOW_ALL_ADMISSION}: {type(admission).__name__}")
        else:
            if not isinstance(admission, PostgresAdmissionController):
                problems.append(
                    f"{ALLOW_ALL_ADMISSION}: {type(admission).__name__} is not the PostgreSQL"
                    " controller"
                )
    if capacity is not None:
        try:
            capacity.require_reserves()
        except ValidationError as exc:
            problems.append(f"{WORKER_TOPOLOGY}: {exc.message}")
    return problems


def refuse(problems: list[str]) -> NoReturn:
    raise StartupRefused(problems)


def release_problems(settings: Settings) -> list[str]:
    return validate_release(settings) if settings.production else []
