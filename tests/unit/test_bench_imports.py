"""Every benchmark script still imports (the helper modules materialize_world and backend_cpu
have no ``main``): `nox -s bench` runs them only on demand, so a
moved harness module would otherwise break one silently (bench_database did, once)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
HELPERS = {"materialize_world", "backend_cpu"}
SCRIPTS = sorted(p for p in BENCH.glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_benchmark_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the scripts import their sibling modules
    spec = importlib.util.spec_from_file_location(f"bench_import_{script.stem}", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)  # runs only the imports and definitions (__main__ guard)
    assert callable(getattr(module, "main", None)) or script.stem in HELPERS
