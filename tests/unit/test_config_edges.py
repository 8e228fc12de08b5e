"""Only process edges construct the system clock and random ids, and the settings,
the composition root and the inner layers never read the process environment (spec
"Ports": no ambient time or ids; config.py parses an explicit mapping). Code is
inspected as syntax trees, so docstrings and comments do not count."""

from __future__ import annotations

import ast
from pathlib import Path

PRODUCT = Path(__file__).resolve().parents[2] / "src" / "scheduling"
EDGES = {"cli/preview.py", "cli/edge.py"}
DEFINITIONS = {"adapters/system_clock.py", "adapters/system_ids.py"}


def trees() -> dict[str, ast.Module]:
    return {
        path.relative_to(PRODUCT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PRODUCT.rglob("*.py"))
    }


def constructs_system_edge(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"SystemClock", "RandomIds"}
        for node in ast.walk(tree)
    )


def reads_environment(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        and node.attr in {"environ", "getenv"}
        for node in ast.walk(tree)
    )


def test_only_cli_edges_construct_the_system_clock_and_ids() -> None:
    constructing = {name for name, tree in trees().items() if constructs_system_edge(tree)}
    assert constructing, "the scan found no construction at all: the check is broken"
    assert constructing <= EDGES | DEFINITIONS, sorted(constructing - EDGES - DEFINITIONS)


def test_settings_bootstrap_and_inner_layers_never_read_the_environment() -> None:
    parsed = trees()
    assert reads_environment(parsed["cli/edge.py"]), "the check is broken"
    readers = {
        name
        for name, tree in parsed.items()
        if reads_environment(tree)
        and (
            name == "config.py"
            or name.startswith(("bootstrap/", "service/", "runtime/", "domain/", "ports/"))
        )
    }
    assert readers == set()
