"""``python -m simulation.scenarios.behind_pgbouncer`` keeps its default selection (the
materialization gates) unless an argument names a test path (ADR 2370)."""

from __future__ import annotations

from simulation.scenarios.behind_pgbouncer import DEFAULT_SELECTION, pytest_command


def test_options_alone_keep_the_default_selection() -> None:
    # Options alone once replaced the selection with the whole suite (testpaths).
    assert pytest_command(["-q", "-k", "race"]) == ["-q", "-k", "race", *DEFAULT_SELECTION]


def test_a_named_test_path_replaces_it() -> None:
    named = ["src/gates/checks/test_materialize_race.py::test_crash_after_every_write", "-x"]
    assert pytest_command(named) == named
    assert pytest_command([]) == list(DEFAULT_SELECTION)
