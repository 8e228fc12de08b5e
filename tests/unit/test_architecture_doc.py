"""docs/architecture.md stays true to the tree: every path in its tables exists, and
every contract it quotes is an import-linter contract in pyproject.toml (by name)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:src|tests|docs|bench)/[^`\s]+)`")
QUOTED = re.compile(r'^- "([^"]+)"\s*$', re.M)


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section (empty when there is none)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


def table_paths(text: str) -> list[str]:
    """Repository paths in the table rows of the document."""
    rows = (line for line in text.splitlines() if line.startswith("|"))
    return [path for row in rows for path in PATH.findall(row)]


def missing_paths(text: str, root: Path) -> list[str]:
    return [path for path in table_paths(text) if not (root / path).exists()]


def stated_contracts(text: str) -> list[str]:
    return QUOTED.findall(section(text, "Contracts"))


def contract_names(pyproject: str) -> set[str]:
    config = tomllib.loads(pyproject)
    return {c["name"] for c in config["tool"]["importlinter"]["contracts"]}


def unknown_contracts(text: str, names: set[str]) -> list[str]:
    return [name for name in stated_contracts(text) if name not in names]


def test_every_table_path_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = table_paths(section(text, "Where each rule lives"))
    assert len(paths) >= 30  # the rule table is there and names real files
    assert missing_paths(text, ROOT) == []


def test_every_stated_contract_is_an_import_linter_contract() -> None:
    text = DOC.read_text(encoding="utf-8")
    names = contract_names((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    stated = stated_contracts(text)
    assert len(stated) >= 15
    assert len(set(stated)) == len(stated)
    assert unknown_contracts(text, names) == []


# ------------------------------------------------------------------ tests of the tests

WRONG_DOC = """# x

## Where each rule lives

| rule | paths |
| --- | --- |
| real | `src/scheduling/domain/cadence.py` |
| gone | `src/scheduling/runtime/cancellation.py`, `src/scheduling/nowhere/` |

## Contracts

- "Ports depend only on the domain"
- "Edges never depend on each other"

## Next
- "Not a stated contract: outside the section"
"""


def test_a_moved_or_invented_path_is_reported() -> None:
    assert missing_paths(WRONG_DOC, ROOT) == [
        "src/scheduling/runtime/cancellation.py",
        "src/scheduling/nowhere/",
    ]


def test_a_contract_not_in_pyproject_is_reported() -> None:
    names = {"Ports depend only on the domain"}
    assert stated_contracts(WRONG_DOC) == [
        "Ports depend only on the domain",
        "Edges never depend on each other",
    ]
    assert unknown_contracts(WRONG_DOC, names) == ["Edges never depend on each other"]
