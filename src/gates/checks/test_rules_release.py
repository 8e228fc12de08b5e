"""rule.config.release_validation: production release validation refuses every
configuration the spec's "Configuration and deployment" list does not allow, and the
scheduler login's privilege check (the one ``scheduling release-check`` runs) passes
exactly the allowlist.

* Settings (``scheduling.config``, what ``release-check`` validates first): a complete
  production environment, written here from the spec's list, passes; each requirement
  broken alone fails with its own stable code; flags other than ``0``/``1`` or that
  differ fail; with both flags off nothing else is required.
* Privileges, on PostgreSQL: a scheduler login created the way ``scheduling logins``
  creates it (``bootstrap.create_login``) passes ``bootstrap.scheduler_release_problems``;
  the same login given UPDATE on an event log, DELETE on a ledger table, BYPASSRLS, or
  membership in the API's group role fails it, and so does a superuser.
* Shipped values: an environment that does not set them runs with 30 retention days,
  a 3,600 s purge interval and a purge batch of 100 records.

Tests of the test: ``scheduling-gates mutate`` (``release.flags_may_differ``,
``release.zero_ceiling_accepted``, ``release.scheduler_may_be_the_owner``,
``release.bypassrls_accepted``, ``release.superuser_unnamed``,
``release.event_update_accepted``, ``release.infinite_ceiling_accepted``,
``config.retention_default_week``, ``config.purge_interval_default_day``,
``config.purge_batch_default_thousand``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.config import ConfigurationError, Settings, problem_codes, validate_release
from scheduling.testing import PostgresUnitOfWorkFactory

RULE = "rule.config.release_validation"
OWNER_URL = "postgresql://owner:pw@db:5432/scheduling"
SCHEDULER_URL = "postgresql://scheduler_login:pw@db:5432/scheduling"
RUN_WORKER_URL = "postgresql://run_worker_login:pw@db:5432/scheduling"
CEILINGS = {
    "TENANT_MAX_RUN_TIMEOUT_SECONDS": "3600",
    "TENANT_MAX_MISFIRE_GRACE_SECONDS": "7200",
    "TENANT_MAX_STEPS": "100",
    "TENANT_MAX_MODEL_CALLS": "100",
    "TENANT_MAX_TOOL_CALLS": "100",
    "TENANT_MAX_COST_PER_RUN": "10",
    "TENANT_MAX_ACTIVE_RUNS": "5",
    "TENANT_MAX_MATERIALIZATIONS_PER_MINUTE": "60",
    "TENANT_MAX_DAILY_COST": "100",
    "TENANT_MAX_MONTHLY_COST": "1000",
}
COMPLETE = {
    "ENVIRONMENT": "production",
    "API_ENABLED": "1",
    "WORKER_ENABLED": "1",
    "STORAGE": "postgres",
    "PRINCIPAL_DIRECTORY": "durable",
    "ADMISSION": "postgres",
    "DATABASE_URL": OWNER_URL,
    "SCHEDULER_DATABASE_URL": SCHEDULER_URL,
    # The run workers' own login (the deployment's least-privilege split).
    "RUN_WORKER_DATABASE_URL": RUN_WORKER_URL,
    "TOTAL_SLOTS": "4",
    "INTERACTIVE_RESERVED_SLOTS": "1",
    "ASYNC_RESERVED_SLOTS": "1",
    "ASYNC_SLOTS": "2",
    "INTERACTIVE_SLOTS": "2",
    "SCAN_BATCH": "100",
    "FALLBACK_POLL_SECONDS": "30",
    "ADMISSION_BACKOFF_SECONDS": "30",
    **CEILINGS,
}
UNSET = "<unset>"
C = "schedule.config."
# Each requirement of the spec's list, broken alone, and the code that must say so.
BROKEN: dict[str, tuple[dict[str, str], str]] = {
    "PostgreSQL storage": ({"STORAGE": "memory"}, C + "storage_not_postgres"),
    "a production environment": ({"ENVIRONMENT": "development"}, C + "not_production"),
    "a database URL": ({"DATABASE_URL": UNSET}, C + "database_url_missing"),
    "a scheduler login": ({"SCHEDULER_DATABASE_URL": UNSET}, C + "scheduler_login_missing"),
    "a scheduler login that is not the owner": (
        {"SCHEDULER_DATABASE_URL": OWNER_URL},
        C + "scheduler_login_missing",
    ),
    "a durable principal directory": (
        {"PRINCIPAL_DIRECTORY": "static"},
        C + "principal_directory_not_durable",
    ),
    "PostgreSQL admission": ({"ADMISSION": "allow_all"}, C + "admission_development_only"),
    "an async worker slot": ({"ASYNC_SLOTS": "0"}, C + "async_slots"),
    "an interactive reserved slot": (
        {"INTERACTIVE_RESERVED_SLOTS": "0"},
        C + "interactive_reserve",
    ),
    "an async reserved slot": ({"ASYNC_RESERVED_SLOTS": "0"}, C + "async_reserve"),
    "reserves within the fleet": ({"TOTAL_SLOTS": "1"}, C + "topology_invalid"),
    "a finite interactive claim bound": (
        {"INTERACTIVE_CLAIM_BOUND_SECONDS": "inf"},
        C + "claim_bound_invalid",
    ),
    "a positive scan batch": ({"SCAN_BATCH": "0"}, C + "scan_batch_invalid"),
    "a positive fallback poll": ({"FALLBACK_POLL_SECONDS": "0"}, C + "poll_invalid"),
    "a finite fallback poll": ({"FALLBACK_POLL_SECONDS": "inf"}, C + "poll_invalid"),
    "a positive admission backoff": (
        {"ADMISSION_BACKOFF_SECONDS": "0"},
        C + "backoff_invalid",
    ),
    "a bounded admission backoff": (
        {"ADMISSION_BACKOFF_SECONDS": "inf"},
        C + "backoff_invalid",
    ),
    "positive retention days": ({"TERMINAL_RETENTION_DAYS": "0"}, C + "retention_invalid"),
    "a positive purge interval": ({"PURGE_INTERVAL_SECONDS": "0"}, C + "retention_invalid"),
    "a positive purge batch": ({"TERMINAL_PURGE_BATCH": "0"}, C + "retention_invalid"),
    **{f"{name} set": ({name: UNSET}, C + "ceiling_missing") for name in CEILINGS},
    **{f"{name} positive": ({name: "0"}, C + "ceiling_invalid") for name in CEILINGS},
}


def codes(**overrides: str) -> list[str]:
    env = {f"AGENT_SCHEDULE_{k}": v for k, v in {**COMPLETE, **overrides}.items() if v != UNSET}
    return problem_codes(validate_release(Settings.from_env(env)))


@pytest.mark.rule(RULE)
def test_release_validation_requires_the_spec_list(gate_evidence: GateEvidence) -> None:
    assert codes() == [], "the complete production configuration is refused"
    wrong = {
        name: found
        for name, (overrides, expected) in BROKEN.items()
        if (found := codes(**overrides)) != [expected]
    }
    assert wrong == {}, wrong
    flags = {
        ("1", "0"): [C + "flags_split"],
        ("0", "1"): [C + "flags_split"],
        ("true", "true"): [C + "flag_invalid"] * 2,
        ("2", "1"): [C + "flag_invalid", C + "flags_split"],
    }
    for (api, worker), expected in flags.items():
        assert codes(API_ENABLED=api, WORKER_ENABLED=worker) == expected, (api, worker)
    # Finite: an infinite or NaN cost ceiling is refused, whether parsing already
    # refuses it (naming its variable) or release validation does.
    for value in ("inf", "Infinity", "NaN"):
        try:
            found = codes(TENANT_MAX_DAILY_COST=value)
        except ConfigurationError as refused:
            found = [refused.code]
        assert found in ([C + "unparseable"], [C + "ceiling_invalid"]), (value, found)
    # Off: nothing else is required, whatever else is set.
    off = codes(API_ENABLED="0", WORKER_ENABLED="0", STORAGE="memory", ADMISSION="allow_all")
    assert off == [], off
    gate_evidence.record("requirements", sorted(BROKEN))


SHIPPED = {
    "terminal_retention_days": 30,
    "purge_interval_seconds": 3600,
    "terminal_purge_batch": 100,
}
"""The spec's shipped retention values: "30 days, 3,600 seconds, and 100 records"."""


@pytest.mark.rule(RULE)
def test_the_shipped_retention_values(gate_evidence: GateEvidence) -> None:
    # The complete environment sets none of the three: what it runs with is shipped.
    env = {f"AGENT_SCHEDULE_{k}": v for k, v in COMPLETE.items()}
    assert not {"TERMINAL_RETENTION_DAYS", "PURGE_INTERVAL_SECONDS", "TERMINAL_PURGE_BATCH"} & set(
        COMPLETE
    )
    settings = Settings.from_env(env)
    shipped = {name: getattr(settings, name) for name in SHIPPED}
    assert shipped == SHIPPED, shipped
    gate_evidence.record("shipped", shipped)


def login_url(url: str, login: str, password: str) -> str:
    return make_url(url).set(username=login, password=password).render_as_string(False)


async def execute(url: str, *statements: str) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await admin.dispose()


@pytest.fixture
async def scheduler_login(pg_url: str) -> AsyncIterator[str]:
    """A scheduler login created as ``scheduling logins`` creates it; its URL."""
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    login, password = f"gate_sched_{secrets.token_hex(4)}", bootstrap.generate_password()
    await bootstrap.create_login(pg_url, roles, "scheduler", login, password)
    try:
        yield login_url(pg_url, login, password)
    finally:
        await execute(pg_url, f"DROP OWNED BY {login}", f"DROP ROLE {login}")


@pytest.mark.postgres
@pytest.mark.rule(RULE)
async def test_the_scheduler_login_holds_exactly_its_allowlist(
    pg_url: str, scheduler_login: str, gate_evidence: GateEvidence
) -> None:
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    login = make_url(scheduler_login).username
    assert await bootstrap.scheduler_release_problems(scheduler_login, roles) == []
    grants = {
        "UPDATE on an event log": (
            f"GRANT UPDATE ON session_events TO {login}",
            f"REVOKE UPDATE ON session_events FROM {login}",
        ),
        "DELETE on the ledger": (
            f"GRANT DELETE ON schedule_occurrences TO {login}",
            f"REVOKE DELETE ON schedule_occurrences FROM {login}",
        ),
        "BYPASSRLS": (f"ALTER ROLE {login} BYPASSRLS", f"ALTER ROLE {login} NOBYPASSRLS"),
        "the API's group role": (
            f"GRANT {roles.api} TO {login}",
            f"REVOKE {roles.api} FROM {login}",
        ),
    }
    refused: dict[str, int] = {}
    for name, (grant, revoke) in grants.items():
        await execute(pg_url, grant)
        try:
            problems = await bootstrap.scheduler_release_problems(scheduler_login, roles)
        finally:
            await execute(pg_url, revoke)
        assert problems != [], f"a scheduler login with {name} passes release validation"
        refused[name] = len(problems)
    assert await bootstrap.scheduler_release_problems(scheduler_login, roles) == []
    # The provider's own login is the cluster's superuser.
    superuser = await bootstrap.scheduler_release_problems(pg_url, roles)
    assert any("superuser" in p for p in superuser), superuser
    gate_evidence.record("refused", refused)
