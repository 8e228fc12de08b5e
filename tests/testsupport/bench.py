"""Load a ``bench/`` script as a module for a test (the scripts are not a package).

``bench/`` goes on ``sys.path`` for the test (the scripts import their siblings) and the
module is registered under ``name`` in ``sys.modules`` for the test only, so its
dataclasses resolve and two tests loading the same script do not share its state.
Running it executes only its imports and definitions (the ``__main__`` guard)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(monkeypatch: pytest.MonkeyPatch, script: str | Path, name: str) -> ModuleType:
    """``bench/<script>`` (a file name, or a path) as the module ``name``."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
