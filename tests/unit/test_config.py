"""Settings parsing and release validation: every rule of the spec's "Enabling it
requires" list, each shown failing alone and passing at its boundary."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling import config as c
from scheduling.config import (
    CEILING_FIELDS,
    ConfigurationError,
    Environment,
    Settings,
    problem_codes,
    validate_release,
)
from scheduling.domain.reasons import all_reasons
from scheduling.domain.tenancy import TenantCeilings
from testsupport.production_env import ADMIN, GOOD, SCHEDULER


def codes(env: dict[str, str]) -> list[str]:
    return problem_codes(validate_release(Settings.from_env(env)))


def with_(**overrides: str) -> dict[str, str]:
    env = dict(GOOD)
    for key, value in overrides.items():
        name = "AGENT_SCHEDULE_" + key
        if value == "<unset>":
            env.pop(name, None)
        else:
            env[name] = value
    return env


def test_the_complete_production_configuration_passes() -> None:
    assert validate_release(Settings.from_env(GOOD)) == []


def test_defaults_are_off_with_the_shipped_retention_values() -> None:
    settings = Settings.from_env({})
    assert (settings.api_flag, settings.worker_flag) == ("0", "0")
    assert not settings.api_enabled
    assert not settings.worker_enabled
    assert settings.environment is Environment.DEVELOPMENT
    assert (
        settings.terminal_retention_days,
        settings.purge_interval_seconds,
        settings.terminal_purge_batch,
    ) == (30, 3600, 100)
    # Off: nothing else is required, so the default environment is releasable.
    assert validate_release(settings) == []


def test_parsing_reads_only_the_mapping_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SCHEDULE_API_ENABLED", "1")
    monkeypatch.setenv("AGENT_SCHEDULE_SCAN_BATCH", "7")
    settings = Settings.from_env({})
    assert settings.api_flag == "0"
    assert settings.scan_batch == 100


def test_every_problem_is_a_registered_config_code() -> None:
    env = {
        "AGENT_SCHEDULE_API_ENABLED": "yes",
        "AGENT_SCHEDULE_WORKER_ENABLED": "0",
        "AGENT_SCHEDULE_STORAGE": "memory",
        "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "static",
        "AGENT_SCHEDULE_ADMISSION": "allow_all",
        "AGENT_SCHEDULE_ASYNC_SLOTS": "0",
        "AGENT_SCHEDULE_INTERACTIVE_RESERVED_SLOTS": "0",
        "AGENT_SCHEDULE_ASYNC_RESERVED_SLOTS": "0",
        "AGENT_SCHEDULE_SCAN_BATCH": "0",
        "AGENT_SCHEDULE_FALLBACK_POLL_SECONDS": "0",
        "AGENT_SCHEDULE_ADMISSION_BACKOFF_SECONDS": "0",
        "AGENT_SCHEDULE_TERMINAL_PURGE_BATCH": "0",
    }
    found = codes(env)
    registered = all_reasons()
    assert all(code.startswith("schedule.config.") and code in registered for code in found)
    # Every problem is reported at once, not only the first.
    assert len(set(found)) >= 14, found


# ---------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("api", "worker", "expected"),
    [
        ("0", "0", []),
        ("1", "1", []),
        ("1", "0", [c.FLAGS_SPLIT]),
        ("0", "1", [c.FLAGS_SPLIT]),
        ("true", "true", [c.FLAG_INVALID, c.FLAG_INVALID]),
        ("yes", "1", [c.FLAG_INVALID]),
        ("2", "0", [c.FLAG_INVALID]),
    ],
)
def test_flags_are_exactly_0_or_1_and_change_together(
    api: str, worker: str, expected: list[str]
) -> None:
    assert codes(with_(API_ENABLED=api, WORKER_ENABLED=worker)) == expected


def test_a_split_flag_still_requires_everything_else() -> None:
    found = codes(with_(API_ENABLED="1", WORKER_ENABLED="0", STORAGE="memory"))
    assert found == [c.FLAGS_SPLIT, c.STORAGE_NOT_POSTGRES]


def test_disabled_scheduling_requires_nothing_else() -> None:
    env = {"AGENT_SCHEDULE_STORAGE": "memory", "AGENT_SCHEDULE_ADMISSION": "allow_all"}
    assert codes(env) == []


# -------------------------------------------------------- one rule at a time


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"ENVIRONMENT": "development"}, c.NOT_PRODUCTION),
        ({"STORAGE": "memory"}, c.STORAGE_NOT_POSTGRES),
        ({"DATABASE_URL": "<unset>"}, c.DATABASE_URL_MISSING),
        ({"SCHEDULER_DATABASE_URL": "<unset>"}, c.SCHEDULER_LOGIN_MISSING),
        ({"SCHEDULER_DATABASE_URL": ADMIN}, c.SCHEDULER_LOGIN_MISSING),
        ({"PRINCIPAL_DIRECTORY": "static"}, c.DIRECTORY_NOT_DURABLE),
        ({"ADMISSION": "allow_all"}, c.ADMISSION_DEVELOPMENT_ONLY),
        ({"ASYNC_SLOTS": "0"}, c.ASYNC_SLOTS),
        ({"INTERACTIVE_RESERVED_SLOTS": "0"}, c.INTERACTIVE_RESERVE),
        ({"ASYNC_RESERVED_SLOTS": "0"}, c.ASYNC_RESERVE),
        ({"TOTAL_SLOTS": "1"}, c.TOPOLOGY_INVALID),
        ({"TOTAL_SLOTS": "0"}, c.TOPOLOGY_INVALID),
        ({"INTERACTIVE_SLOTS": "0"}, c.TOPOLOGY_INVALID),
        ({"SCAN_BATCH": "0"}, c.SCAN_BATCH_INVALID),
        ({"SCAN_BATCH": "-5"}, c.SCAN_BATCH_INVALID),
        ({"FALLBACK_POLL_SECONDS": "0"}, c.POLL_INVALID),
        ({"FALLBACK_POLL_SECONDS": "inf"}, c.POLL_INVALID),
        ({"INTERACTIVE_CLAIM_BOUND_SECONDS": "0"}, c.CLAIM_BOUND_INVALID),
        ({"INTERACTIVE_CLAIM_BOUND_SECONDS": "-1"}, c.CLAIM_BOUND_INVALID),
        ({"INTERACTIVE_CLAIM_BOUND_SECONDS": "inf"}, c.CLAIM_BOUND_INVALID),
        ({"INTERACTIVE_CLAIM_BOUND_SECONDS": "nan"}, c.CLAIM_BOUND_INVALID),
        ({"ADMISSION_BACKOFF_SECONDS": "0"}, c.BACKOFF_INVALID),
        ({"ADMISSION_BACKOFF_SECONDS": "300.5"}, c.BACKOFF_INVALID),
        ({"TERMINAL_RETENTION_DAYS": "0"}, c.RETENTION_INVALID),
        ({"PURGE_INTERVAL_SECONDS": "0"}, c.RETENTION_INVALID),
        ({"TERMINAL_PURGE_BATCH": "-1"}, c.RETENTION_INVALID),
        ({"WORKER_CONCURRENCY": "0"}, c.WORKER_CONCURRENCY_INVALID),
        ({"WORKER_CONCURRENCY": "65"}, c.WORKER_CONCURRENCY_INVALID),
    ],
)
def test_each_requirement_fails_alone(overrides: dict[str, str], expected: str) -> None:
    assert codes(with_(**overrides)) == [expected]


@pytest.mark.parametrize(
    "overrides",
    [
        {"TOTAL_SLOTS": "2"},  # the two reserves exactly fill the fleet
        {"ASYNC_SLOTS": "1", "INTERACTIVE_RESERVED_SLOTS": "1", "ASYNC_RESERVED_SLOTS": "1"},
        {"SCAN_BATCH": "1"},
        {"FALLBACK_POLL_SECONDS": "0.5"},
        {"INTERACTIVE_CLAIM_BOUND_SECONDS": "0.5"},
        {"ADMISSION_BACKOFF_SECONDS": "300"},
        {"ADMISSION_BACKOFF_SECONDS": "0.001"},
        {
            "TERMINAL_RETENTION_DAYS": "1",
            "PURGE_INTERVAL_SECONDS": "1",
            "TERMINAL_PURGE_BATCH": "1",
        },
        {"SCHEDULER_DATABASE_URL": SCHEDULER, "API_DATABASE_URL": ADMIN},
    ],
)
def test_each_requirement_passes_at_its_boundary(overrides: dict[str, str]) -> None:
    assert codes(with_(**overrides)) == []


@pytest.mark.parametrize("name", sorted(CEILING_FIELDS))
def test_every_tenant_ceiling_is_required(name: str) -> None:
    assert codes(with_(**{name: "<unset>"})) == [c.CEILING_MISSING]


@pytest.mark.parametrize("name", sorted(CEILING_FIELDS))
@pytest.mark.parametrize("value", ["0", "-3"])
def test_every_tenant_ceiling_is_positive(name: str, value: str) -> None:
    assert codes(with_(**{name: value})) == [c.CEILING_INVALID]


def test_complete_ceilings_build_the_domain_value() -> None:
    ceilings = Settings.from_env(GOOD).ceilings.to_ceilings()
    assert isinstance(ceilings, TenantCeilings)
    assert ceilings.max_daily_cost == Decimal("100")
    assert Settings.from_env(with_(TENANT_MAX_STEPS="<unset>")).ceilings.to_ceilings() is None


# -------------------------------------------------------------------- parsing


def test_unparseable_values_are_all_reported_with_their_variable() -> None:
    env = with_(SCAN_BATCH="many", TENANT_MAX_STEPS="1.5", STORAGE="sqlite")
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env(env)
    assert caught.value.code == c.UNPARSEABLE
    problems = caught.value.details["problems"]
    assert len(problems) == 3
    assert all(p.startswith(c.UNPARSEABLE + ": ") for p in problems)
    joined = "\n".join(problems)
    for variable in (
        "AGENT_SCHEDULE_SCAN_BATCH",
        "AGENT_SCHEDULE_TENANT_MAX_STEPS",
        "AGENT_SCHEDULE_STORAGE",
    ):
        assert variable in joined


def test_infinite_cost_ceilings_do_not_parse() -> None:
    with pytest.raises(ConfigurationError):
        Settings.from_env(with_(TENANT_MAX_DAILY_COST="Infinity"))


def test_tenants_and_role_prefix_are_parsed() -> None:
    settings = Settings.from_env(
        {"AGENT_SCHEDULE_TENANTS": " a, b ,,c ", "AGENT_SCHEDULE_ROLE_PREFIX": "acme"}
    )
    assert settings.tenants == ("a", "b", "c")
    assert settings.role_prefix == "acme"


def test_the_role_prefix_former_name_is_refused_naming_the_new_one() -> None:
    # A deployment still setting the old name must not run with the default prefix.
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env({"SCHEDULING_ROLE_PREFIX": "acme"})
    assert "AGENT_SCHEDULE_ROLE_PREFIX" in str(refused.value.details)


def test_settings_name_no_credential_other_than_database_logins() -> None:
    suspicious = ("token", "secret", "password", "key", "credential", "bearer")
    names = set(Settings.model_fields)
    assert not [n for n in names if any(word in n for word in suspicious)]
