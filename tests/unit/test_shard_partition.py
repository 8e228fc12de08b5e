"""The shard partition: disjoint, covering, order-free, balanced by recorded duration."""

import random

import pytest

from gates.runner.shard import (
    Shard,
    ShardError,
    parse_shard,
    partition,
    shard_checks,
    shipped_durations,
)

IDS = [f"src/gates/checks/test_{i % 7}.py::test_{i}" for i in range(40)]


@pytest.mark.parametrize("total", [1, 2, 3, 5, 40, 41])
def test_parts_are_disjoint_and_cover_every_check(total: int) -> None:
    parts = partition(IDS, total, {})
    assert len(parts) == total
    flat = [n for p in parts for n in p]
    assert sorted(flat) == sorted(IDS)
    assert len(flat) == len(set(flat))


def test_the_partition_does_not_depend_on_the_input_order() -> None:
    durations = {n: float(i % 5) for i, n in enumerate(IDS)}
    shuffled = IDS[:]
    random.Random(3).shuffle(shuffled)
    assert partition(shuffled, 3, durations) == partition(IDS, 3, durations)
    assert partition([*IDS, *IDS], 3, durations) == partition(IDS, 3, durations)


def test_recorded_durations_balance_the_parts() -> None:
    # One long check and many short ones: the long one gets a part to itself.
    durations = {IDS[0]: 30.0} | {n: 1.0 for n in IDS[1:31]}
    parts = partition(IDS[:31], 2, durations)
    loads = [sum(durations[n] for n in p) for p in parts]
    assert sorted(loads) == [30.0, 30.0]
    # Round-robin by name would have given 15.5 / 15 plus the long one on one side.
    assert IDS[0] in parts[0]


def test_unknown_checks_weigh_the_median() -> None:
    durations = {IDS[0]: 1.0, IDS[1]: 3.0, IDS[2]: 100.0}
    parts = partition(IDS[:6], 2, durations)
    assert sum(len(p) for p in parts) == 6
    assert any(IDS[2] in p and len(p) == 1 for p in parts), parts


def test_shard_k_of_n_is_the_kth_part_of_the_shipped_table() -> None:
    table = shipped_durations()
    assert table, "durations.json ships with the runner"
    ids = sorted(table)
    got = [shard_checks(ids, Shard(k, 3)) for k in (1, 2, 3)]
    assert got == partition(ids, 3, table)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2", "1/2/3", ""])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ShardError, match="not a shard"):
        parse_shard(text)


def test_a_shard_parses() -> None:
    assert parse_shard("2/3") == Shard(2, 3)
    assert str(Shard(2, 3)) == "2/3"
