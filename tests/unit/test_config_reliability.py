"""Release validation of the reliability settings (issue 13): the transient retry, the
isolation backoff and the run worker's drain timeout, each refused alone."""

from __future__ import annotations

import pytest

from scheduling import config as c
from scheduling.config import Settings, problem_codes, validate_release
from testsupport.production_env import GOOD


def codes(**overrides: str) -> list[str]:
    env = dict(GOOD)
    env.update({"AGENT_SCHEDULE_" + k: v for k, v in overrides.items()})
    return problem_codes(validate_release(Settings.from_env(env)))


def test_defaults_are_prompt_and_bounded() -> None:
    s = Settings.from_env(GOOD)
    assert s.transient_retry_attempts == 4
    assert s.transient_retry_max_seconds < s.failure_backoff_seconds
    assert codes() == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"TRANSIENT_RETRY_ATTEMPTS": "-1"}, c.RETRY_INVALID),
        ({"TRANSIENT_RETRY_ATTEMPTS": str(c.MAX_TRANSIENT_RETRIES + 1)}, c.RETRY_INVALID),
        ({"TRANSIENT_RETRY_BASE_SECONDS": "0"}, c.RETRY_INVALID),
        (
            {"TRANSIENT_RETRY_BASE_SECONDS": "3", "TRANSIENT_RETRY_MAX_SECONDS": "2"},
            c.RETRY_INVALID,
        ),
        ({"TRANSIENT_RETRY_MAX_SECONDS": "inf"}, c.RETRY_INVALID),
        ({"FAILURE_BACKOFF_SECONDS": "0"}, c.FAILURE_BACKOFF_INVALID),
        ({"FAILURE_BACKOFF_SECONDS": "inf"}, c.FAILURE_BACKOFF_INVALID),
        ({"RUN_DRAIN_SECONDS": "0"}, c.DRAIN_INVALID),
        ({"RUN_DRAIN_SECONDS": "nan"}, c.DRAIN_INVALID),
    ],
)
def test_each_reliability_rule_fails_alone(overrides: dict[str, str], expected: str) -> None:
    assert codes(**overrides) == [expected]


@pytest.mark.parametrize(
    "overrides",
    [
        {"TRANSIENT_RETRY_ATTEMPTS": "0"},
        {"TRANSIENT_RETRY_ATTEMPTS": str(c.MAX_TRANSIENT_RETRIES)},
        {"TRANSIENT_RETRY_BASE_SECONDS": "2", "TRANSIENT_RETRY_MAX_SECONDS": "2"},
        {"FAILURE_BACKOFF_SECONDS": "0.5", "RUN_DRAIN_SECONDS": "0.5"},
    ],
)
def test_each_reliability_rule_passes_at_its_boundary(overrides: dict[str, str]) -> None:
    assert codes(**overrides) == []
