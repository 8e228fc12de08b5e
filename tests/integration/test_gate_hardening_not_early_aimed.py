"""Tests of the tests for seed-stable coverage (issue 10) in the materializer facet of
gate.schedule.not_early, on PostgreSQL.

* The eight aimed examples alone check every kind and a gap and a fold occurrence:
  with generation narrowed to UTC and no DST targets, the guard is met.
* The guard is as strict as before: the same narrowed generation without the aimed
  examples genuinely checks no gap and no fold occurrence, and the guard says so.
"""

from __future__ import annotations

import pytest

import gates.checks.test_not_early as not_early
from simulation.provider import DatabaseServer

pytestmark = pytest.mark.postgres

# UTC only, never started before a transition: no gap or fold can occur.
NARROWED = not_early.examples(zones=("UTC",), targeted=False)


def test_aimed_examples_cover_every_kind_and_both_dst_cases(
    pg_server: DatabaseServer, pg_template: str
) -> None:
    aimed = not_early.aimed_examples()
    assert {(e.defs[0]["kind"], e.target.case) for e in aimed if e.target} == {
        (k, c) for k in not_early.KINDS[1:] for c in not_early.CIVIL_CASES
    }
    tally = not_early.Tally()
    not_early.run_property(pg_server, pg_template, tally, aimed, NARROWED, 1)
    assert tally.aimed == len(aimed) == tally.examples - 1
    assert not_early.missing_coverage(tally) == []
    # Each aimed example's own DST case was checked: one occurrence of each per kind.
    assert tally.civil_cases["gap"] >= 4
    assert tally.civil_cases["fold"] >= 4


def test_guard_still_reports_a_run_that_misses_gaps_and_folds(
    pg_server: DatabaseServer, pg_template: str
) -> None:
    tally = not_early.Tally()
    not_early.run_property(pg_server, pg_template, tally, [], NARROWED, 6)
    assert tally.examples > 0
    assert tally.occurrences > 0
    missing = not_early.missing_coverage(tally)
    assert "no gap occurrence checked" in missing
    assert "no fold occurrence checked" in missing
