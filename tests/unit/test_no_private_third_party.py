"""Product code touches no private attribute of a third-party library (issue 24, ADR 2160).

Two scans of ``src/scheduling``:

* an AST scan: no ``x._name`` attribute access (one leading underscore) on anything
  but ``self`` or ``cls``, except the few underscore names SQLAlchemy documents as
  public API (``Row._mapping`` and friends, which carry an underscore only so they
  cannot collide with column names);
* a plain text scan, with no allowlist, for the private names of SQLAlchemy's asyncpg
  adapter and compiler the unit of work used to reach (also through ``getattr``).

Each scan is run on a plausible wrong snippet first, so it can fail.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PRODUCT = Path(__file__).resolve().parents[2] / "src" / "scheduling"

# Documented public API spelled with an underscore (SQLAlchemy's ``Row``; a named
# tuple's own methods): https://docs.sqlalchemy.org/en/20/core/connections.html#sqlalchemy.engine.Row
PUBLIC_UNDERSCORE = frozenset({"_mapping", "_fields", "_asdict", "_tuple", "_t", "_replace"})

# The private attributes of SQLAlchemy's asyncpg adapter, its compiler and asyncpg the
# hot path once reached (issue 24 counted 9 in uow.py plus ``_bind_processors``).
KNOWN_PRIVATE = (
    "_execute_mutex",
    "_started",
    "_transaction",
    "_handle_exception",
    "_start_transaction",
    "_adapt_connection",
    "_prepared_statement_cache",
    "_bind_processors",
    "_connection_record",
    "_isolation_setting",
    "_invalidate_schema_cache_asof",
    "_asyncpg_error_translate",
    "_top_xact",
    "_protocol",
    "_columns",
    "_on_connect_isolation_level",
)
_KNOWN = re.compile(r"[.\"'](" + "|".join(KNOWN_PRIVATE) + r")\b")


def _own_private_names(tree: ast.AST) -> dict[int, frozenset[str]]:
    """For every node inside a class body, the private attributes that class declares
    in its body (``_cadence: Cadence = PrivateAttr()``): an instance the class builds in
    its own validator is not another library's object."""
    owned: dict[int, frozenset[str]] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        names = frozenset(
            stmt.target.id
            for stmt in cls.body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        )
        for inner in ast.walk(cls):
            owned[id(inner)] = owned.get(id(inner), frozenset()) | names
    return owned


def private_accesses(source: str) -> list[str]:
    """``line: expression`` for every underscore attribute reached on another object."""
    found: list[tuple[int, int, str]] = []
    tree = ast.parse(source)
    own = _own_private_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in PUBLIC_UNDERSCORE:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if name in own.get(id(node), frozenset()):
            continue
        found.append((node.lineno, node.col_offset, f"{node.lineno}: {ast.unparse(node)}"))
    return [text for *_, text in sorted(found)]


def known_private(source: str) -> list[str]:
    """``line: text`` for every line naming one of ``KNOWN_PRIVATE`` after ``.`` or a
    quote (``self._started`` of a product class would be flagged too: pick another
    name rather than resemble the adapter's)."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(source.splitlines(), 1)
        if _KNOWN.search(line)
    ]


WRONG = """
async def begin(conn, compiled, driver):
    fairy = await conn.get_raw_connection()
    adapted = fairy.dbapi_connection
    async with adapted._execute_mutex:
        adapted._started = True
    processors = compiled._bind_processors
    state = getattr(adapted, "_transaction")
    return row._mapping, self._own, processors, state
"""


OWN = """
class Revision:
    _cadence: Cadence = PrivateAttr()

    @classmethod
    def build(cls, data):
        built = cls(data)
        built._cadence = parse(data)
        return built, other._cadence


def elsewhere(built):
    return built._cadence
"""


def test_a_class_reaches_its_own_declared_private_attribute_only_inside_itself() -> None:
    # Inside the class its own declared names are its own (Python's convention: private
    # to the class, not to one instance); outside it the same access is a reach.
    assert private_accesses(OWN) == ["13: built._cadence"]


def test_the_scans_find_a_private_reach() -> None:
    assert private_accesses(WRONG) == [
        "5: adapted._execute_mutex",
        "6: adapted._started",
        "7: compiled._bind_processors",
    ]
    assert [line.split(":")[0] for line in known_private(WRONG)] == ["5", "6", "7", "8"]


def _product_files() -> list[Path]:
    files = sorted(PRODUCT.rglob("*.py"))
    assert len(files) > 50, PRODUCT  # the scan really reads the product
    return files


def test_product_code_reaches_no_private_attribute_of_another_object() -> None:
    problems = [
        f"{path.relative_to(PRODUCT)}:{hit}"
        for path in _product_files()
        for hit in private_accesses(path.read_text(encoding="utf-8"))
    ]
    assert problems == [], (
        "product code reaches a private attribute of another object (SQLAlchemy's or "
        "asyncpg's internals change without notice; use their public API):\n" + "\n".join(problems)
    )


def test_product_code_names_no_known_private_attribute_of_sqlalchemy_or_asyncpg() -> None:
    problems = [
        f"{path.relative_to(PRODUCT)}:{hit}"
        for path in _product_files()
        for hit in known_private(path.read_text(encoding="utf-8"))
    ]
    assert problems == [], "\n".join(problems)
