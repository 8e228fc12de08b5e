"""The drain bench's server share and CPU-bound ceiling (ADR 2670): the ceiling counts the
client's and the server's CPU per decision over this machine's cores, and a worker whose
server CPU could not be read makes both figures ``None`` rather than a number that left
the server out (the plausible wrong one: a ceiling from the client CPU alone)."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace

import pytest

from testsupport.bench import load_bench


def _bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "bench_materialize.py", "bench_share")


def test_the_ceiling_counts_client_and_server(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench(monkeypatch)
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    results = [
        SimpleNamespace(cpu_seconds=1.5, server_cpu_seconds=2.5),
        SimpleNamespace(cpu_seconds=0.5, server_cpu_seconds=1.5),
    ]
    share = bench.server_share(results, 2000)
    # client 1.0 ms + server 2.0 ms per decision; 2 cores: 2,000 ms/s / 3 ms.
    assert share == {"server_cpu_ms_per_materialization": 2.0, "cpu_bound_rate_per_second": 666.7}
    client_only = round(1000 * 2 / 1.0, 1)
    assert share["cpu_bound_rate_per_second"] != client_only


def test_an_unreadable_server_is_not_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench(monkeypatch)
    results = [
        SimpleNamespace(cpu_seconds=1.0, server_cpu_seconds=1.0),
        SimpleNamespace(cpu_seconds=1.0, server_cpu_seconds=None),
    ]
    unknown = {"server_cpu_ms_per_materialization": None, "cpu_bound_rate_per_second": None}
    assert bench.server_share(results, 100) == unknown
    assert bench.span_known([1.0, None]) is None
    assert bench.span_known([2.0, 1.0]) == [1.0, 2.0]
