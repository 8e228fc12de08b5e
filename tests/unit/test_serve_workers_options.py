"""``serve --workers``'s count and each worker's instance id (ADR 2320)."""

from __future__ import annotations

import pytest

from scheduling.cli.edge import worker_instance_id
from scheduling.cli.http import worker_count
from scheduling.instance import valid_instance_id


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [(None, None, 1), ("2", None, 2), (None, "3", 3), ("4", "1", 4), ("1", "0", 1)],
)
def test_the_flag_then_the_environment_then_one(
    flag: str | None, env: str | None, expected: int
) -> None:
    assert worker_count(flag, env) == expected


@pytest.mark.parametrize(
    ("flag", "env", "named"),
    [
        ("0", None, "--workers"),
        ("-1", None, "--workers"),
        ("x", "2", "--workers"),
        (None, "0", "AGENT_SCHEDULE_API_WORKERS"),
        (None, "2.5", "AGENT_SCHEDULE_API_WORKERS"),
    ],
)
def test_not_a_positive_integer_is_refused_naming_its_source(
    flag: str | None, env: str | None, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert worker_count(flag, env) is None
    err = capsys.readouterr().err
    assert err.startswith("PROBLEM: schedule.config.unparseable: ")
    assert named in err


def test_a_configured_id_is_distinct_per_worker_and_stays_valid() -> None:
    assert worker_instance_id(None, 1) is None  # the default <host>-<pid> differs already
    assert worker_instance_id("node-a", None) == "node-a"  # not a worker: unchanged
    assert worker_instance_id("node-a", 0) != worker_instance_id("node-a", 1)
    longest = "n" * 40
    ids = {worker_instance_id(longest, i) for i in range(12)}
    assert len(ids) == 12
    assert all(valid_instance_id(i or "") for i in ids)
