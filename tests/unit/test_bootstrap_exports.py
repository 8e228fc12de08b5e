"""The composition root's three lists of names agree (ADR 2350): the ``TYPE_CHECKING``
imports mypy reads, the lazy table ``_HOME`` the runtime reads, and ``__all__`` (derived
from the table). A name in one and not the other is either invisible to mypy or an
``AttributeError`` at run time."""

from __future__ import annotations

import ast
import importlib
import inspect

import scheduling.bootstrap as bootstrap

PACKAGE = "scheduling.bootstrap"


def type_checking_imports(source: str) -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block imports, mapped to its submodule; a
    name imported without ``as`` itself is not an explicit re-export and is left out."""
    homes: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    if alias.asname == alias.name:
                        homes[alias.name] = statement.module.removeprefix(f"{PACKAGE}.")
    return homes


def disagreements(source: str, table: dict[str, str], exported: list[str]) -> list[str]:
    problems = []
    imports = type_checking_imports(source)
    for name in sorted(set(imports) | set(table)):
        if imports.get(name) != table.get(name):
            problems.append(f"{name}: TYPE_CHECKING {imports.get(name)}, table {table.get(name)}")
    if sorted(exported) != sorted(table):
        problems.append(f"__all__ differs from the table: {sorted(set(exported) ^ set(table))}")
    return problems


def test_the_imports_the_table_and_all_agree() -> None:
    source = inspect.getsource(bootstrap)
    assert disagreements(source, bootstrap._HOME, bootstrap.__all__) == []


def test_every_name_is_defined_where_the_table_says() -> None:
    for name, home in bootstrap._HOME.items():
        module = importlib.import_module(f"{PACKAGE}.{home}")
        assert hasattr(module, name), f"{name} is not in {PACKAGE}.{home}"
        assert getattr(bootstrap, name) is getattr(module, name)


def test_the_check_sees_a_missing_or_misplaced_import() -> None:
    """The test of the test: a source whose block drops one name, imports one from
    the wrong submodule, or imports one without ``as`` fails the agreement."""
    source = inspect.getsource(bootstrap)
    table = bootstrap._HOME
    dropped = source.replace(
        "    from scheduling.bootstrap.api import build_api as build_api\n", ""
    )
    misplaced = source.replace(
        "from scheduling.bootstrap.api import build_api as build_api",
        "from scheduling.bootstrap.tools import build_api as build_api",
    )
    implicit = source.replace("import build_api as build_api", "import build_api")
    for wrong in (dropped, misplaced, implicit):
        assert wrong != source
        assert disagreements(wrong, table, bootstrap.__all__) != []
    assert disagreements(source, {**table, "extra": "api"}, bootstrap.__all__) != []
