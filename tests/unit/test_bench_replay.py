"""The drain replay's bookkeeping (ADR 2730): which recorded statements form a committed
decision, in what order the replay sends them, and what counts as a decision written.

The plausible wrong grouping is one that ignores the connection: with several slots in
flight, records of different decisions interleave, and splitting the global stream at
each BEGIN and COMMIT would send one decision's statements inside another's
transaction. A replay that did not check what it wrote could then report a rate for
less work than the drain did."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from testsupport.bench import load_bench

BEGIN = "BEGIN; SELECT set_config('a', 'b', true)"


def _replay(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "drain_replay.py", "bench_drain_replay")


def _records() -> list[tuple[int, int, str, tuple[Any, ...]]]:
    # Two connections (7 and 9) interleaved; 9 begins first; one rollback, one unfinished.
    stream = [
        (9, BEGIN, ()),
        (7, BEGIN, ()),
        (7, "lock", (1,)),
        (9, "lock", (2,)),
        (9, "decide", (2, "x")),
        (7, "decide", (1, "y")),
        (7, "COMMIT", ()),
        (9, "COMMIT", ()),
        (7, BEGIN, ()),
        (7, "lock", (3,)),
        (7, "ROLLBACK", ()),
        (9, BEGIN, ()),
        (9, "lock", (4,)),
    ]
    return [(i, conn, query, args) for i, (conn, query, args) in enumerate(stream)]


def test_committed_transactions_per_connection_in_begin_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replay = _replay(monkeypatch)
    records = _records()
    shuffled = records[::-1]  # the order handed in does not matter: the sequence does
    assert replay.transactions_of(shuffled) == [
        [(BEGIN, ()), ("lock", (2,)), ("decide", (2, "x")), ("COMMIT", ())],
        [(BEGIN, ()), ("lock", (1,)), ("decide", (1, "y")), ("COMMIT", ())],
    ]


def test_a_grouping_blind_to_connections_mixes_decisions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Test of the test: the wrong grouping gives another answer on the same records."""
    replay = _replay(monkeypatch)
    records = _records()
    blind = replay.transactions_of([(seq, 0, query, args) for seq, _, query, args in records])
    assert blind != replay.transactions_of(records)
    assert any(("lock", (2,)) in t and ("decide", (1, "y")) in t for t in blind)


def test_a_decision_counts_as_written_only_when_inserted_and_advanced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replay = _replay(monkeypatch)
    assert replay._wrote([{"inserted": 1, "advanced": 1}]) is True
    assert replay._wrote([{"inserted": 0, "advanced": 0}]) is False
    assert replay._wrote([{"inserted": 1, "advanced": 0}]) is False
    assert replay._wrote([{"id": 1}]) is None  # a lock or context row
    assert replay._wrote([]) is None  # a lock that found nothing due


def test_the_recorder_keeps_text_arguments_and_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replay = _replay(monkeypatch)
    recorder = replay.Recorder()

    class Logged:
        def __init__(self, query: str, args: tuple[Any, ...] | None) -> None:
            self.query, self.args = query, args

    recorder.logger(7)(Logged(BEGIN, None))
    recorder.logger(9)(Logged("lock", (1, "a")))
    assert recorder.records == [(0, 7, BEGIN, ()), (1, 9, "lock", (1, "a"))]


def test_the_bench_judges_the_drain_against_the_replay_at_its_concurrency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = load_bench(monkeypatch, "bench_materialize.py", "bench_replay_judge")
    in_flight = str(bench.IN_FLIGHT)
    replayed: dict[str, Any] = {
        "replay": {
            "1": {"rate_per_second": 500.0, "client_cpu_ms_per_materialization": 0.3},
            in_flight: {"rate_per_second": 1600.0, "client_cpu_ms_per_materialization": 0.25},
        }
    }
    drains = [{"workers": 1, "rate_per_second": 800.0, "client_cpu_ms_per_materialization": 0.85}]
    bench.judge_replay(replayed, drains, 1000.0)
    assert replayed["replay"]["1"]["ratio_to_pgbench"] == 0.5
    assert replayed["replay"][in_flight]["ratio_to_pgbench"] == 1.6
    assert replayed["drain_to_replay"] == 0.5  # against the matched concurrency, not 1
    assert replayed["drain_client_cpu_over_replay_ms"] == 0.6


def test_the_table_shows_the_replay_beside_the_drain_and_is_silent_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = load_bench(monkeypatch, "table.py", "bench_replay_table")
    ranged: dict[str, Any] = {
        "replay": {
            "4": {
                "rate_per_second": [1441.0, 1735.0],
                "client_cpu_ms_per_materialization": [0.256, 0.278],
                "ratio_to_pgbench": [1.061, 1.282],
            }
        },
        "drain_to_replay": [0.415, 0.555],
        "drain_client_cpu_over_replay_ms": [0.599, 0.721],
    }
    rows = table.replay_rows(ranged, 1, "provider server")
    assert len(rows) == 2
    assert "1441-1735/s" in rows[0]
    assert "1.061-1.282x" in rows[0]
    assert "0.415-0.555" in rows[1]
    assert "0.599-0.721 ms" in rows[1]
    assert table.replay_rows({}, 1, "provider server") == []  # a report from before 2730


def test_the_range_holds_the_replay_under_one_worker_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay is one worker's drain: shown under a 2-worker drain, it would be judged
    against pgbench(2) in the table."""
    bench = load_bench(monkeypatch, "bench_materialize.py", "bench_replay_range")
    figures = {
        "rate_per_second": 1600.0,
        "ratio_to_pgbench": 1.2,
        "client_cpu_ms_per_materialization": 0.27,
        "server_cpu_ms_per_materialization": 0.8,
    }
    replayed = {
        "replay": {"4": figures},
        "drain_to_replay": 0.5,
        "drain_client_cpu_over_replay_ms": 0.6,
    }
    drain = {
        "rate_per_second": 800.0,
        "ratio_to_pgbench": 0.6,
        "client_cpu_ms_per_materialization": 0.87,
        "client_system_cpu_ms_per_materialization": 0.1,
        "round_trips_per_materialization": 5.03,
        "server_cpu_ms_per_materialization": 0.85,
        "cpu_bound_ratio_to_pgbench": 0.8,
    }
    rounds = [
        {
            "load_average_before": [1.0],
            "load_average_after": [1.0],
            "tps": {1: 1400.0, 2: 2000.0},
            "drain": [{"workers": 1, **drain}, {"workers": 2, **drain}],
            "replay": replayed,
        }
    ]
    assert bench._range(rounds, 1)["replay"]["4"]["ratio_to_pgbench"] == [1.2, 1.2]
    assert bench._range(rounds, 1)["drain_to_replay"] == [0.5, 0.5]
    assert "replay" not in bench._range(rounds, 2)
    assert "drain_to_replay" not in bench._range(rounds, 2)
