"""Source rules import-linter cannot express, checked on the syntax tree of ``src/``.

1. No import inside a function: an import placed in a function body to dodge a
   cycle hides the cycle from import-linter (which then cannot keep the layers).
   The only exception is an import of an optional third-party extra, listed below
   with its reason.
2. The harness (gates, simulation, reports) builds no worker, materializer, service or
   accountant by hand: every one comes from ``scheduling.bootstrap``'s builders, so
   the gates exercise production's wiring.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# (module path relative to src/, imported module): why it must stay lazy.
OPTIONAL_IMPORTS = {
    # The `docker` extra: testcontainers is installed only where a Docker engine is
    # wanted; the provider tries it last and must import without it.
    ("simulation/provider/_docker.py", "testcontainers.postgres"),
}
BUILT_BY_BOOTSTRAP = frozenset(
    {
        "ScheduleService",
        "ScheduleMaterializer",
        "ScheduleWorker",
        "RunWorker",
        "MaintenanceService",
        "RunAccountant",
    }
)
HARNESS = ("gates", "simulation", "reports")


def function_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import statement inside a function or method."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    found += [(inner.lineno, alias.name) for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom):
                    found.append((inner.lineno, "." * inner.level + (inner.module or "")))
    return sorted(set(found))


def hand_built(source: str) -> list[tuple[int, str]]:
    """(line, class) of every call constructing a class the composition root builds."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in BUILT_BY_BOOTSTRAP:
                found.append((node.lineno, name))
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_rules_see_what_they_forbid() -> None:
    """A test of the test: both checkers flag a planted violation, and only it."""
    planted = (
        "import os\n"
        "def f():\n"
        "    from catalog import load_catalog\n"
        "    return load_catalog()\n"
        "class C:\n"
        "    async def m(self):\n"
        "        import json\n"
        "        return ScheduleWorker(uow=None)\n"
        "w = RunWorker()\n"
    )
    assert function_imports(planted) == [(3, "catalog"), (7, "json")]
    assert hand_built(planted) == [(8, "ScheduleWorker"), (9, "RunWorker")]
    assert function_imports("import os\nclass C(ScheduleWorker):\n    pass\n") == []
    assert hand_built("class S(ScheduleWorker):\n    pass\n") == []


def test_no_import_inside_a_function() -> None:
    assert len(_modules()) > 150, "the walk found the source tree"
    offending = []
    for path in _modules():
        rel = path.relative_to(SRC).as_posix()
        for line, module in function_imports(path.read_text(encoding="utf-8")):
            if (rel, module) not in OPTIONAL_IMPORTS:
                offending.append(f"src/{rel}:{line}: import {module} inside a function")
    assert not offending, "\n".join(offending)


def test_the_allow_list_has_no_stale_entry() -> None:
    for rel, module in OPTIONAL_IMPORTS:
        source = (SRC / rel).read_text(encoding="utf-8")
        assert module in {m for _, m in function_imports(source)}, (rel, module)


def test_the_harness_builds_through_the_composition_root() -> None:
    harness = [p for p in _modules() if p.relative_to(SRC).parts[0] in HARNESS]
    assert harness
    offending = [
        f"src/{path.relative_to(SRC).as_posix()}:{line}: {name}(...) built by hand"
        " (use scheduling.bootstrap's builders)"
        for path in harness
        for line, name in hand_built(path.read_text(encoding="utf-8"))
    ]
    assert not offending, "\n".join(offending)
