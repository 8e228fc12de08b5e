"""``AGENT_SCHEDULE_TRANSIENT_RETRY_OUTAGE_SECONDS`` and
``AGENT_SCHEDULE_ACCOUNTING_POLL_SECONDS`` (ADR 2350): parsed, bounded in every
environment, and what the roles are built with."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduling import bootstrap as b
from scheduling import config as c
from scheduling.bootstrap.choices import retry_settings, retry_values
from scheduling.config import ConfigurationError, Settings, problem_codes, validate_release
from scheduling.ports.retry import RetrySettings
from scheduling.runtime.worker import WorkerSettings as RunWorkerSettings
from scheduling.service.schedule_worker import WorkerSettings
from scheduling.storage import MemoryStorage
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from testsupport.production_env import GOOD

OUTAGE = "AGENT_SCHEDULE_TRANSIENT_RETRY_OUTAGE_SECONDS"
POLL = "AGENT_SCHEDULE_ACCOUNTING_POLL_SECONDS"
ON = {"AGENT_SCHEDULE_API_ENABLED": "1", "AGENT_SCHEDULE_WORKER_ENABLED": "1"}


def test_the_defaults_are_the_ports_defaults() -> None:
    s = Settings.from_env({})
    assert s.transient_retry_outage_seconds == RetrySettings().outage_seconds
    assert s.accounting_poll_seconds == WorkerSettings().accounting_poll_seconds
    assert b.SchedulerSettings.of(s).transient_retry == retry_values(s)
    assert problem_codes(validate_release(Settings.from_env(GOOD))) == []


def test_the_outage_limit_is_the_run_lease_less_a_heartbeat() -> None:
    run = RunWorkerSettings()
    assert run.lease_seconds - run.heartbeat_seconds == c.OUTAGE_LIMIT_SECONDS
    assert RetrySettings().outage_seconds < c.OUTAGE_LIMIT_SECONDS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (OUTAGE, "-1"),
        (OUTAGE, str(c.OUTAGE_LIMIT_SECONDS)),
        (OUTAGE, "inf"),
        (OUTAGE, "nan"),
        (OUTAGE, "soon"),
        (POLL, "0"),
        (POLL, "-0.5"),
        (POLL, str(c.MAX_ACCOUNTING_POLL_SECONDS + 1)),
        (POLL, "inf"),
        (POLL, "nan"),
    ],
)
@pytest.mark.parametrize("base", [{}, GOOD], ids=["development", "production"])
def test_an_out_of_bounds_value_is_refused_naming_its_variable(
    name: str, value: str, base: dict[str, str]
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env({**base, name: value})
    problems = refused.value.details["problems"]
    assert len(problems) == 1
    assert problems[0].startswith(f"{c.UNPARSEABLE}: {name}: ")


@pytest.mark.parametrize(
    ("name", "value"),
    [(OUTAGE, "0"), (OUTAGE, "39.5"), (POLL, "0.01"), (POLL, str(c.MAX_ACCOUNTING_POLL_SECONDS))],
)
def test_a_value_at_its_bound_is_accepted(name: str, value: str) -> None:
    assert problem_codes(validate_release(Settings.from_env({**GOOD, name: value}))) == []


def test_the_roles_are_built_with_the_settings() -> None:
    """Values other than the defaults, so a builder that ignores either setting fails."""
    settings = Settings.from_env({**ON, OUTAGE: "12.5", POLL: "0.25"})
    assert (RetrySettings().outage_seconds, WorkerSettings().accounting_poll_seconds) != (
        12.5,
        0.25,
    )
    role = b.build_scheduler(
        b.SchedulerSettings.of(settings),
        clock=VirtualClock(datetime(2026, 1, 1, tzinfo=UTC)),
        ids=SeededIds("settings"),
        storage=MemoryStorage(),
    )
    worker = role.worker_args["settings"]
    assert worker.transient_retry.outage_seconds == 12.5
    assert worker.accounting_poll_seconds == 0.25
    # The run worker's retry is built by the same two calls (it refuses memory storage).
    retry = retry_settings(retry_values(settings))
    assert isinstance(retry, RetrySettings)
    assert retry.outage_seconds == 12.5
