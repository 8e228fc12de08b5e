"""The bench reaches the product through its front door (ADR 2171).

``gates``, ``simulation`` and ``reports`` are import-linter root packages (the contract
"The harness reaches the product through its front door" in pyproject.toml); the bench
scripts are not a package, so this test holds them to the same rule: no import of
``scheduling.adapters`` (use ``scheduling.bootstrap``, ``scheduling.storage`` and
``scheduling.testing``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def adapter_imports(source: str) -> list[str]:
    """Every module under ``scheduling.adapters`` that ``source`` imports."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [
            n for n in names if n == "scheduling.adapters" or n.startswith("scheduling.adapters.")
        ]
    return found


def test_the_bench_imports_no_adapter() -> None:
    scripts = sorted(BENCH.glob("*.py"))
    assert scripts, "no bench script found"
    offenders = {
        p.name: found for p in scripts if (found := adapter_imports(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_scan_finds_each_form_of_adapter_import() -> None:
    # Test of the test: every spelling of an adapter import is caught; the front door is not.
    source = (
        "import scheduling.adapters.postgres.tables as t\n"
        "from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory\n"
        "from scheduling.adapters import memory\n"
        "from scheduling.testing import storage_over\n"
        "from scheduling.storage import PostgresStorage\n"
    )
    assert adapter_imports(source) == [
        "scheduling.adapters.postgres.tables",
        "scheduling.adapters.postgres.uow",
        "scheduling.adapters",
    ]
