"""Every benchmark script still imports (the helper modules materialize_world, backend_cpu and
drain_replay have no ``main``): `nox -s bench` runs them only on demand, so a
moved harness module would otherwise break one silently (bench_database did, once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testsupport.bench import BENCH, load_bench

HELPERS = {"materialize_world", "backend_cpu", "drain_replay"}
SCRIPTS = sorted(p for p in BENCH.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_bench(monkeypatch, script, f"bench_import_{script.stem}")
    assert callable(getattr(module, "main", None)) or script.stem in HELPERS
