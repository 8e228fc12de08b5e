"""The complete production environment that passes release validation."""

ADMIN = "postgresql://owner:pw@db:5432/scheduling"
SCHEDULER = "postgresql://sched_worker:pw@db:5432/scheduling"
RUN_WORKER = "postgresql://run_worker:pw@db:5432/scheduling"

GOOD: dict[str, str] = {
    "AGENT_SCHEDULE_ENVIRONMENT": "production",
    "AGENT_SCHEDULE_API_ENABLED": "1",
    "AGENT_SCHEDULE_WORKER_ENABLED": "1",
    "AGENT_SCHEDULE_STORAGE": "postgres",
    "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "durable",
    "AGENT_SCHEDULE_ADMISSION": "postgres",
    "AGENT_SCHEDULE_DATABASE_URL": ADMIN,
    "AGENT_SCHEDULE_SCHEDULER_DATABASE_URL": SCHEDULER,
    "AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL": RUN_WORKER,
    "AGENT_SCHEDULE_TOTAL_SLOTS": "4",
    "AGENT_SCHEDULE_INTERACTIVE_RESERVED_SLOTS": "1",
    "AGENT_SCHEDULE_ASYNC_RESERVED_SLOTS": "1",
    "AGENT_SCHEDULE_ASYNC_SLOTS": "2",
    "AGENT_SCHEDULE_INTERACTIVE_SLOTS": "2",
    "AGENT_SCHEDULE_TENANT_MAX_RUN_TIMEOUT_SECONDS": "3600",
    "AGENT_SCHEDULE_TENANT_MAX_MISFIRE_GRACE_SECONDS": "7200",
    "AGENT_SCHEDULE_TENANT_MAX_STEPS": "100",
    "AGENT_SCHEDULE_TENANT_MAX_MODEL_CALLS": "100",
    "AGENT_SCHEDULE_TENANT_MAX_TOOL_CALLS": "100",
    "AGENT_SCHEDULE_TENANT_MAX_COST_PER_RUN": "10",
    "AGENT_SCHEDULE_TENANT_MAX_ACTIVE_RUNS": "5",
    "AGENT_SCHEDULE_TENANT_MAX_MATERIALIZATIONS_PER_MINUTE": "60",
    "AGENT_SCHEDULE_TENANT_MAX_DAILY_COST": "100",
    "AGENT_SCHEDULE_TENANT_MAX_MONTHLY_COST": "1000",
    "AGENT_SCHEDULE_SCAN_BATCH": "100",
    "AGENT_SCHEDULE_FALLBACK_POLL_SECONDS": "30",
    "AGENT_SCHEDULE_ADMISSION_BACKOFF_SECONDS": "30",
}

TENANT_CEILINGS: dict[str, str] = {
    k: v for k, v in GOOD.items() if k.startswith("AGENT_SCHEDULE_TENANT_MAX_")
}
"""The tenant ceilings of ``GOOD`` alone, for an environment with real URLs."""


def production_env_at(
    admin_url: str, scheduler_url: str, run_worker_url: str, tenant: str
) -> dict[str, str]:
    """A production process's settings against real URLs: both roles enabled, one
    tenant with ``TENANT_CEILINGS``."""
    return {
        "AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL": run_worker_url,
        "AGENT_SCHEDULE_ENVIRONMENT": "production",
        "AGENT_SCHEDULE_API_ENABLED": "1",
        "AGENT_SCHEDULE_WORKER_ENABLED": "1",
        "AGENT_SCHEDULE_DATABASE_URL": admin_url,
        "AGENT_SCHEDULE_SCHEDULER_DATABASE_URL": scheduler_url,
        "AGENT_SCHEDULE_TENANTS": tenant,
        **TENANT_CEILINGS,
    }
