"""Test of the test for the durable facet of materialize_atomic: a materializer that
commits the occurrence (with its session and run) in a transaction of its own before
the rest is caught by a server crash at the next write."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduling.service import materializer as m
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.worlds.durable import crash_before_commit_leaves_nothing

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def durable() -> Iterator[tuple[PrivateCluster, str]]:
    with private_cluster(durable=True) as private:
        yield private, migrated_template(private.server)


async def test_a_split_commit_materializer_leaves_a_partial_ledger_after_the_crash(
    durable: tuple[PrivateCluster, str],
) -> None:
    private, template = durable
    right = await crash_before_commit_leaves_nothing(private, template, m.STEP_ADVANCED)
    assert right == []
    wrong = await crash_before_commit_leaves_nothing(
        private, template, m.STEP_ADVANCED, split_commit=True
    )
    assert any("schedule_occurrences kept 1 row" in p for p in wrong), wrong
    assert any("runs kept 1 row" in p for p in wrong), wrong
    assert private.crashes == 2
