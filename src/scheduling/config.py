"""Deployment settings, feature flags and release validation (spec "Configuration and
deployment", "Capacity, fairness, and cost").

``Settings.from_env(env)`` parses an explicit ``os.environ``-like mapping: nothing here
reads the process environment (the CLI passes ``os.environ``; tests pass a dict).
A value that does not parse raises ``ConfigurationError`` listing every such value.
``validate_release(settings)`` returns every problem that would make a production
release unsafe, each a line ``"<code>: <explanation>"`` with a stable
``schedule.config.*`` code; an empty list means the settings may be released.

Scheduling is default-off (both flags ``0``). Production validation accepts only
``0``/``1``, requires the two flags to change together, and when they are on requires
every item of the spec's "Enabling it requires" list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from scheduling.domain.admission import MAX_BACKOFF_SECONDS
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.tenancy import TenantCeilings
from scheduling.instance import INSTANCE_ID_PATTERN

UNPARSEABLE = reason(
    "schedule.config.unparseable", "A configuration value does not parse as its declared type"
)
FLAG_INVALID = reason(
    "schedule.config.flag_invalid", "A schedule feature flag is not exactly 0 or 1 in production"
)
FLAGS_SPLIT = reason(
    "schedule.config.flags_split",
    "AGENT_SCHEDULE_API_ENABLED and AGENT_SCHEDULE_WORKER_ENABLED differ; they change together",
)
NOT_PRODUCTION = reason(
    "schedule.config.not_production",
    "Scheduling is enabled but the environment is not production",
)
STORAGE_NOT_POSTGRES = reason(
    "schedule.config.storage_not_postgres", "Enabled scheduling needs PostgreSQL storage"
)
DATABASE_URL_MISSING = reason(
    "schedule.config.database_url_missing", "Enabled scheduling needs AGENT_SCHEDULE_DATABASE_URL"
)
SCHEDULER_LOGIN_MISSING = reason(
    "schedule.config.scheduler_login_missing",
    "Production needs a separate least-privilege scheduler login URL",
)
DIRECTORY_NOT_DURABLE = reason(
    "schedule.config.principal_directory_not_durable",
    "Enabled scheduling needs the durable principal directory",
)
ADMISSION_DEVELOPMENT_ONLY = reason(
    "schedule.config.admission_development_only",
    "Enabled scheduling needs the PostgreSQL admission controller, not allow-all",
)
ASYNC_SLOTS = reason("schedule.config.async_slots", "The async run worker needs at least one slot")
INTERACTIVE_RESERVE = reason(
    "schedule.config.interactive_reserve", "At least one slot must be reserved for interactive runs"
)
ASYNC_RESERVE = reason(
    "schedule.config.async_reserve", "At least one slot must be reserved for async runs"
)
TOPOLOGY_INVALID = reason(
    "schedule.config.topology_invalid",
    "The slot counts are inconsistent (non-positive, or the reserves exceed the total)",
)
CEILING_MISSING = reason(
    "schedule.config.ceiling_missing", "A tenant ceiling is not configured (it must be finite)"
)
CEILING_INVALID = reason(
    "schedule.config.ceiling_invalid", "A tenant ceiling is zero, negative or not finite"
)
SCAN_BATCH_INVALID = reason(
    "schedule.config.scan_batch_invalid", "The schedule worker's scan batch is not positive"
)
POLL_INVALID = reason(
    "schedule.config.poll_invalid", "The fallback poll interval is not finite and positive"
)
BACKOFF_INVALID = reason(
    "schedule.config.backoff_invalid",
    "The admission backoff is not positive or above the admission maximum",
)
CLAIM_BOUND_INVALID = reason(
    "schedule.config.claim_bound_invalid",
    "The interactive claim-latency bound is not finite and positive",
)
RETENTION_INVALID = reason(
    "schedule.config.retention_invalid",
    "Terminal retention days, purge interval or purge batch is not positive",
)

WORKER_CONCURRENCY_INVALID = reason(
    "schedule.config.worker_concurrency_invalid",
    "The schedule worker's in-flight materializations are not within 1..64",
)
MAX_WORKER_CONCURRENCY = 64
OUTAGE_LIMIT_SECONDS = 40.0
"""The run lease (60 s) less a heartbeat (20 s): a run worker still waiting out a
refusing server past this would lose the lease of the run it holds (ADR 2350)."""
MAX_ACCOUNTING_POLL_SECONDS = 60.0
"""Accounting lag after a run finishes is about the poll, and the failure-limit pause
waits for the accounting: a longer poll lets a failing schedule fire again (ADR 2350)."""
API_POOL_SIZE = 10
"""The API's connections per login: a pool of 5 served 8 concurrent requests by opening
and closing about one connection per 17 checkouts (ADR 2620)."""
MAX_API_POOL_SIZE = 100

PREFIX = "AGENT_SCHEDULE_"
_Model = TypeVar("_Model", bound=BaseModel)
RENAMED_ROLE_PREFIX = "SCHEDULING_ROLE_PREFIX"
"""The role prefix's former name: refused with the new one named (ADR 2202)."""


class Environment(StrEnum):
    DEVELOPMENT = "development"
    PRODUCTION = "production"


class ConfigurationError(ValidationError):
    """Values that do not parse; ``details["problems"]`` lists every one."""


# Environment variable (after PREFIX) -> TenantCeilings field.
CEILING_FIELDS: dict[str, str] = {
    "TENANT_MAX_RUN_TIMEOUT_SECONDS": "max_run_timeout_seconds",
    "TENANT_MAX_MISFIRE_GRACE_SECONDS": "max_misfire_grace_seconds",
    "TENANT_MAX_STEPS": "max_steps",
    "TENANT_MAX_MODEL_CALLS": "max_model_calls",
    "TENANT_MAX_TOOL_CALLS": "max_tool_calls",
    "TENANT_MAX_COST_PER_RUN": "max_cost_per_run",
    "TENANT_MAX_ACTIVE_RUNS": "max_active_runs",
    "TENANT_MAX_MATERIALIZATIONS_PER_MINUTE": "max_materializations_per_minute",
    "TENANT_MAX_DAILY_COST": "max_daily_cost",
    "TENANT_MAX_MONTHLY_COST": "max_monthly_cost",
}


class CeilingSettings(BaseModel):
    """Tenant ceilings; ``None`` is "not configured" (which production refuses)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_run_timeout_seconds: int | None = None
    max_misfire_grace_seconds: int | None = None
    max_steps: int | None = None
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_cost_per_run: Decimal | None = None
    max_active_runs: int | None = None
    max_materializations_per_minute: int | None = None
    max_daily_cost: Decimal | None = None
    max_monthly_cost: Decimal | None = None

    def problems(self) -> list[str]:
        out: list[str] = []
        env_of = {field: PREFIX + name for name, field in CEILING_FIELDS.items()}
        for field, value in self:
            if value is None:
                out.append(f"{CEILING_MISSING}: {env_of[field]} is not set")
            elif (isinstance(value, Decimal) and not value.is_finite()) or value <= 0:
                out.append(f"{CEILING_INVALID}: {env_of[field]} must be finite and positive")
        return out

    def to_ceilings(self) -> TenantCeilings | None:
        """The domain value, or ``None`` while any ceiling is missing or invalid."""
        if self.problems():
            return None
        return TenantCeilings.model_validate(self.model_dump())


class Topology(BaseModel):
    """Fleet run capacity and the slots of each run-worker process (spec "Capacity").

    ``total_slots`` is the fleet-wide number of concurrently leased runs; the two
    reserves keep slots for each class; ``async_slots`` and ``interactive_slots`` are
    the claim loops one async or interactive run-worker process runs.
    ``interactive_claim_bound_seconds`` is the service level the reserve buys: the
    longest an interactive run may wait for a claim while async load saturates its
    share (and the longest async work may go unclaimed under an interactive flood).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total_slots: int = 4
    interactive_reserved_slots: int = 1
    async_reserved_slots: int = 1
    async_slots: int = 2
    interactive_slots: int = 2
    interactive_claim_bound_seconds: float = 10.0

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.async_slots < 1:
            out.append(f"{ASYNC_SLOTS}: {PREFIX}ASYNC_SLOTS must be at least 1")
        if self.interactive_reserved_slots < 1:
            out.append(
                f"{INTERACTIVE_RESERVE}: {PREFIX}INTERACTIVE_RESERVED_SLOTS must be at least 1"
            )
        if self.async_reserved_slots < 1:
            out.append(f"{ASYNC_RESERVE}: {PREFIX}ASYNC_RESERVED_SLOTS must be at least 1")
        if self.total_slots < 1 or self.interactive_slots < 1:
            out.append(f"{TOPOLOGY_INVALID}: total and interactive worker slots must be positive")
        elif self.interactive_reserved_slots + self.async_reserved_slots > self.total_slots:
            out.append(f"{TOPOLOGY_INVALID}: the two reserves exceed {PREFIX}TOTAL_SLOTS")
        return out


class Settings(BaseModel):
    """Every setting of a scheduling deployment (no credential other than database URLs).

    Database URLs: ``database_url`` is the migration/trusted login (run workers use it
    too, as no runtime role exists yet); the API, scheduler and maintenance roles use
    their own login URL when given, otherwise ``SET LOCAL ROLE`` over ``database_url``
    (development only for the scheduler: production requires its own login).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    environment: Environment = Environment.DEVELOPMENT
    api_flag: str = "0"
    worker_flag: str = "0"
    storage: Literal["postgres", "memory"] = "postgres"
    principal_directory: Literal["durable", "static"] = "durable"
    admission: Literal["postgres", "allow_all"] = "postgres"
    database_url: str | None = None
    api_database_url: str | None = None
    scheduler_database_url: str | None = None
    maintenance_database_url: str | None = None
    role_prefix: str | None = None
    tenants: tuple[str, ...] = ()
    topology: Topology = Field(default_factory=Topology)
    ceilings: CeilingSettings = Field(default_factory=CeilingSettings)
    scan_batch: int = 100
    fallback_poll_seconds: float = 30.0
    admission_backoff_seconds: float = 30.0
    terminal_retention_days: int = 30
    purge_interval_seconds: int = 3600
    terminal_purge_batch: int = 100
    worker_concurrency: int = 1
    """Materializations one schedule worker keeps in flight (ADR 1701)."""
    # Reliability (issue 13): prompt retries of transient database errors, the
    # isolation backoff of a deterministically failing definition, the run worker's
    # bounded drain.
    transient_retry_attempts: int = 4
    transient_retry_base_seconds: float = 0.1
    transient_retry_max_seconds: float = 2.0
    transient_retry_outage_seconds: float = Field(default=30.0, ge=0, lt=OUTAGE_LIMIT_SECONDS)
    """``RetrySettings.outage_seconds`` (ADR 2220): how long a refusing server is waited
    out (0: a refusal counts as an attempt). Bounds hold in every environment."""
    accounting_poll_seconds: float = Field(default=1.0, gt=0, le=MAX_ACCOUNTING_POLL_SECONDS)
    """The schedule worker's longest sleep between accounting sweeps (ADR 2221)."""
    failure_backoff_seconds: float = 60.0
    run_drain_seconds: float = 30.0
    run_worker_database_url: str | None = None
    # The scheduler's and run worker's Prometheus port (ADR 1510); 0 serves none.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=0, ge=0, le=65535)
    api_pool_size: int = Field(default=API_POOL_SIZE, ge=1, le=MAX_API_POOL_SIZE)
    """Connections an API process keeps for its steady load per login it uses (ADR
    2620); a burst may open up to ``BURST_HEADROOM`` (10) more, which are kept too, and
    a request beyond both waits for a connection (ADR 2720)."""

    # ---------------------------------------------------------------- flags

    @property
    def api_enabled(self) -> bool:
        return _truthy(self.api_flag)

    @property
    def worker_enabled(self) -> bool:
        return _truthy(self.worker_flag)

    @property
    def production(self) -> bool:
        return self.environment is Environment.PRODUCTION

    # ---------------------------------------------------------------- parsing

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Parse ``AGENT_SCHEDULE_*`` from ``env`` (the product reads no other prefix)."""
        raw: dict[str, Any] = {}
        scalars = {
            "ENVIRONMENT": "environment",
            "API_ENABLED": "api_flag",
            "WORKER_ENABLED": "worker_flag",
            "STORAGE": "storage",
            "PRINCIPAL_DIRECTORY": "principal_directory",
            "ADMISSION": "admission",
            "DATABASE_URL": "database_url",
            "API_DATABASE_URL": "api_database_url",
            "SCHEDULER_DATABASE_URL": "scheduler_database_url",
            "MAINTENANCE_DATABASE_URL": "maintenance_database_url",
            "SCAN_BATCH": "scan_batch",
            "FALLBACK_POLL_SECONDS": "fallback_poll_seconds",
            "ADMISSION_BACKOFF_SECONDS": "admission_backoff_seconds",
            "TERMINAL_RETENTION_DAYS": "terminal_retention_days",
            "PURGE_INTERVAL_SECONDS": "purge_interval_seconds",
            "TERMINAL_PURGE_BATCH": "terminal_purge_batch",
            "WORKER_CONCURRENCY": "worker_concurrency",
            "TRANSIENT_RETRY_ATTEMPTS": "transient_retry_attempts",
            "TRANSIENT_RETRY_BASE_SECONDS": "transient_retry_base_seconds",
            "TRANSIENT_RETRY_MAX_SECONDS": "transient_retry_max_seconds",
            "TRANSIENT_RETRY_OUTAGE_SECONDS": "transient_retry_outage_seconds",
            "ACCOUNTING_POLL_SECONDS": "accounting_poll_seconds",
            "FAILURE_BACKOFF_SECONDS": "failure_backoff_seconds",
            "RUN_DRAIN_SECONDS": "run_drain_seconds",
            "RUN_WORKER_DATABASE_URL": "run_worker_database_url",
            "METRICS_HOST": "metrics_host",
            "METRICS_PORT": "metrics_port",
            "API_POOL_SIZE": "api_pool_size",
        }
        topology = {
            "TOTAL_SLOTS": "total_slots",
            "INTERACTIVE_RESERVED_SLOTS": "interactive_reserved_slots",
            "ASYNC_RESERVED_SLOTS": "async_reserved_slots",
            "ASYNC_SLOTS": "async_slots",
            "INTERACTIVE_SLOTS": "interactive_slots",
            "INTERACTIVE_CLAIM_BOUND_SECONDS": "interactive_claim_bound_seconds",
        }
        for name, field in scalars.items():
            value = _value(env, PREFIX + name)
            if value is not None:
                raw[field] = value
        raw["topology"] = {
            field: value
            for name, field in topology.items()
            if (value := _value(env, PREFIX + name)) is not None
        }
        raw["ceilings"] = {
            field: value
            for name, field in CEILING_FIELDS.items()
            if (value := _value(env, PREFIX + name)) is not None
        }
        tenants = _value(env, PREFIX + "TENANTS")
        if tenants is not None:
            raw["tenants"] = tuple(t.strip() for t in tenants.split(",") if t.strip())
        if _value(env, RENAMED_ROLE_PREFIX) is not None:
            # The product reads only AGENT_SCHEDULE_* (ADR 2202); a deployment still setting
            # the old name is told, not silently run with the default prefix.
            raise ConfigurationError(
                UNPARSEABLE,
                "a setting was renamed",
                {"problems": [f"{UNPARSEABLE}: {RENAMED_ROLE_PREFIX} is now {PREFIX}ROLE_PREFIX"]},
            )
        prefix = _value(env, PREFIX + "ROLE_PREFIX")
        if prefix is not None:
            raw["role_prefix"] = prefix
        return _parsed(cls, raw)


def _parsed(model: type[_Model], raw: dict[str, Any]) -> _Model:
    """``model`` validated from ``raw``, else ``ConfigurationError`` naming the variable
    of every value that does not parse."""
    try:
        return model.model_validate(raw)
    except PydanticValidationError as exc:
        problems = [
            f"{UNPARSEABLE}: {_env_name(error['loc'])}: {error['msg']}" for error in exc.errors()
        ]
        raise ConfigurationError(
            UNPARSEABLE, "configuration values do not parse", {"problems": problems}
        ) from None


def _value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def parse_port(raw: str, name: str, *, lowest: int = 1) -> int:
    """A TCP port to listen on (``lowest``..65535; ``lowest=0`` where 0 means "a free
    one" or "none") from ``raw``, the value of ``name`` (a flag or an
    ``AGENT_SCHEDULE_*`` variable); else ``ConfigurationError`` (``UNPARSEABLE``)
    naming it. ASCII digits only: ``int()`` would also take ``+80``, ``8_080`` and
    non-ASCII digits, and raises its own error past 4300 digits."""
    text = raw.strip()
    port = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else -1
    if not lowest <= port <= 65535:
        shown = raw if len(raw) <= 32 else raw[:32] + "..."  # repr escapes a NUL
        raise ConfigurationError(
            UNPARSEABLE,
            "a port does not parse",
            {
                "problems": [
                    f"{UNPARSEABLE}: {name}={shown!r} must be an integer in {lowest}..65535"
                ]
            },
        )
    return port


def _truthy(flag: str) -> bool:
    return flag.strip().lower() in {"1", "true", "yes", "on"}


def _env_name(loc: tuple[int | str, ...]) -> str:
    """The environment variable behind a pydantic error location."""
    field = str(loc[-1]) if loc else "?"
    if len(loc) >= 2 and loc[0] == "ceilings":
        names = {v: k for k, v in CEILING_FIELDS.items()}
        return PREFIX + names.get(field, field.upper())
    return PREFIX + field.upper().replace("_FLAG", "_ENABLED")


# -------------------------------------------------------------------- validation


def flag_problems(settings: Settings) -> list[str]:
    """Production flag rules: exactly ``0``/``1``, and both equal."""
    problems = [
        f"{FLAG_INVALID}: {PREFIX}{name}={value!r} (only '0' or '1')"
        for name, value in (
            ("API_ENABLED", settings.api_flag),
            ("WORKER_ENABLED", settings.worker_flag),
        )
        if value not in ("0", "1")
    ]
    if settings.api_enabled != settings.worker_enabled:
        problems.append(
            f"{FLAGS_SPLIT}: {PREFIX}API_ENABLED={settings.api_flag!r} but"
            f" {PREFIX}WORKER_ENABLED={settings.worker_flag!r}"
        )
    return problems


def validate_release(settings: Settings) -> list[str]:
    """Every problem that blocks releasing ``settings`` to production (empty: none)."""
    problems = flag_problems(settings)
    if not (settings.api_enabled or settings.worker_enabled):
        return problems  # scheduling stays off: nothing else is required
    if not settings.production:
        problems.append(f"{NOT_PRODUCTION}: {PREFIX}ENVIRONMENT is {settings.environment.value}")
    if settings.storage != "postgres":
        problems.append(f"{STORAGE_NOT_POSTGRES}: {PREFIX}STORAGE is {settings.storage}")
    if not settings.database_url:
        problems.append(f"{DATABASE_URL_MISSING}: {PREFIX}DATABASE_URL is not set")
    if not settings.scheduler_database_url or (
        settings.scheduler_database_url == settings.database_url
    ):
        problems.append(
            f"{SCHEDULER_LOGIN_MISSING}: {PREFIX}SCHEDULER_DATABASE_URL must name the"
            " scheduler login, distinct from the migration login"
        )
    if settings.principal_directory != "durable":
        problems.append(
            f"{DIRECTORY_NOT_DURABLE}: {PREFIX}PRINCIPAL_DIRECTORY is"
            f" {settings.principal_directory}"
        )
    if settings.admission != "postgres":
        problems.append(f"{ADMISSION_DEVELOPMENT_ONLY}: {PREFIX}ADMISSION is {settings.admission}")
    problems += settings.topology.problems()
    if not 0 < settings.topology.interactive_claim_bound_seconds < math.inf:
        problems.append(
            f"{CLAIM_BOUND_INVALID}: {PREFIX}INTERACTIVE_CLAIM_BOUND_SECONDS must be finite"
            " and positive"
        )
    problems += settings.ceilings.problems()
    if settings.scan_batch <= 0:
        problems.append(f"{SCAN_BATCH_INVALID}: {PREFIX}SCAN_BATCH must be positive")
    if not 0 < settings.fallback_poll_seconds < math.inf:
        problems.append(
            f"{POLL_INVALID}: {PREFIX}FALLBACK_POLL_SECONDS must be finite and positive"
        )
    if not 0 < settings.admission_backoff_seconds <= MAX_BACKOFF_SECONDS:
        problems.append(
            f"{BACKOFF_INVALID}: {PREFIX}ADMISSION_BACKOFF_SECONDS must be within"
            f" (0, {MAX_BACKOFF_SECONDS:g}]"
        )
    for name, value in (
        ("TERMINAL_RETENTION_DAYS", settings.terminal_retention_days),
        ("PURGE_INTERVAL_SECONDS", settings.purge_interval_seconds),
        ("TERMINAL_PURGE_BATCH", settings.terminal_purge_batch),
    ):
        if value <= 0:
            problems.append(f"{RETENTION_INVALID}: {PREFIX}{name} must be positive")
    problems += worker_problems(settings)
    problems += reliability_problems(settings)
    return problems


def worker_problems(settings: Settings) -> list[str]:
    """The schedule worker's throughput settings (ADR 1701)."""
    if not 0 < settings.worker_concurrency <= MAX_WORKER_CONCURRENCY:
        return [
            f"{WORKER_CONCURRENCY_INVALID}: {PREFIX}WORKER_CONCURRENCY must be within"
            f" 1..{MAX_WORKER_CONCURRENCY}"
        ]
    return []


def problem_codes(problems: list[str]) -> list[str]:
    """The reason codes of ``problems`` (each line starts with its code)."""
    return [problem.split(":", 1)[0] for problem in problems]


# -------------------------------------------------------------------- reliability

RETRY_INVALID = reason(
    "schedule.config.retry_invalid",
    "The transient-error retry is negative, unbounded, or its delays are not ordered",
)
FAILURE_BACKOFF_INVALID = reason(
    "schedule.config.failure_backoff_invalid",
    "The isolation backoff of a failing definition is not finite and positive",
)
RUN_WORKER_LOGIN_SHARED = reason(
    "schedule.config.run_worker_login_shared",
    "The run-worker login URL is the migration or the scheduler login; it must be its own",
)
RUN_WORKER_LOGIN_MISSING = reason(
    "schedule.config.run_worker_login_missing",
    "The run-worker login URL is not set; run workers need their own least-privilege login",
)
DRAIN_INVALID = reason(
    "schedule.config.drain_invalid", "The run worker's drain timeout is not finite and positive"
)
MAX_TRANSIENT_RETRIES = 20


def reliability_problems(settings: Settings) -> list[str]:
    """Retry, backoff and drain settings, and the run worker's own login."""
    problems: list[str] = []
    base, ceiling = settings.transient_retry_base_seconds, settings.transient_retry_max_seconds
    if not (
        0 <= settings.transient_retry_attempts <= MAX_TRANSIENT_RETRIES
        and 0 < base <= ceiling < math.inf
    ):
        problems.append(
            f"{RETRY_INVALID}: {PREFIX}TRANSIENT_RETRY_ATTEMPTS must be within"
            f" [0, {MAX_TRANSIENT_RETRIES}] and 0 < {PREFIX}TRANSIENT_RETRY_BASE_SECONDS"
            f" <= {PREFIX}TRANSIENT_RETRY_MAX_SECONDS < inf"
        )
    if not 0 < settings.failure_backoff_seconds < math.inf:
        problems.append(
            f"{FAILURE_BACKOFF_INVALID}: {PREFIX}FAILURE_BACKOFF_SECONDS must be finite and"
            " positive"
        )
    if not 0 < settings.run_drain_seconds < math.inf:
        problems.append(f"{DRAIN_INVALID}: {PREFIX}RUN_DRAIN_SECONDS must be finite and positive")
    if not settings.run_worker_database_url:
        # Required like the scheduler's (ADR 1914): a run worker on the migration
        # login would hold every privilege of the schema.
        problems.append(
            f"{RUN_WORKER_LOGIN_MISSING}: {PREFIX}RUN_WORKER_DATABASE_URL must name the"
            " run-worker login"
        )
    elif settings.run_worker_database_url in (
        settings.database_url,
        settings.scheduler_database_url,
    ):
        problems.append(
            f"{RUN_WORKER_LOGIN_SHARED}: {PREFIX}RUN_WORKER_DATABASE_URL must name the"
            " run-worker login, distinct from the migration and scheduler logins"
        )
    return problems


# ------------------------------------------------------- process identity and logs

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_LOG_REPEAT_WINDOW_SECONDS = 3600.0


class ProcessSettings(BaseModel):
    """How a process names itself and writes its log (ADRs 2270, 2271), read by the
    process edge before anything else (``scheduling.cli.edge.configure_logging``):
    ``AGENT_SCHEDULE_INSTANCE_ID`` (default ``<short hostname>-<pid>``),
    ``AGENT_SCHEDULE_LOG_FORMAT`` (``text`` or ``json``), ``AGENT_SCHEDULE_LOG_LEVEL``
    and ``AGENT_SCHEDULE_LOG_REPEAT_WINDOW_SECONDS`` (identical failures within it are
    written once, then counted)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_id: str | None = Field(default=None, pattern=INSTANCE_ID_PATTERN)
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    log_repeat_window_seconds: float = Field(default=60.0, gt=0, le=MAX_LOG_REPEAT_WINDOW_SECONDS)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProcessSettings:
        """Parse the four variables from ``env``; ``ConfigurationError`` lists every one
        that does not parse (``schedule.config.unparseable``)."""
        raw: dict[str, Any] = {}
        for name in ("INSTANCE_ID", "LOG_FORMAT", "LOG_LEVEL", "LOG_REPEAT_WINDOW_SECONDS"):
            value = _value(env, PREFIX + name)
            if value is not None:
                raw[name.lower()] = value
        if "log_level" in raw:
            raw["log_level"] = raw["log_level"].upper()
        if "log_format" in raw:
            raw["log_format"] = raw["log_format"].lower()
        return _parsed(cls, raw)
