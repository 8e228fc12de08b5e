"""Released migration revisions are frozen (issue 24 item 4, ADR 2161).

* every revision file's SHA-256 is the one ``migrations/released.toml`` records (a
  changed, vanished or unlisted revision file fails with what to do instead);
* no revision module imports product code (or anything but the standard library's
  ``re``/``typing``/``collections.abc``, SQLAlchemy and Alembic), so editing
  ``adapters/postgres/roles.py`` or ``tables.py`` cannot rewrite history;
* ``env.py`` imports only the runner's helpers and the metadata autogenerate compares
  with, never the role helpers, and names the role-prefix parameter the revisions read.

Each check is run against a plausible wrong tree first, so it can fail.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import tomllib
from pathlib import Path

from scheduling.adapters.postgres import migrations as runner
from scheduling.adapters.postgres import roles

CHAIN = Path(__file__).resolve().parents[2] / "src" / "scheduling" / "migrations"
FROZEN = "revision files are frozen once released; add a new revision"

ALLOWED_IMPORTS = ("__future__", "re", "typing", "collections.abc", "sqlalchemy", "alembic")
ENV_PRODUCT_IMPORTS = frozenset(
    {"scheduling.adapters.postgres.migrations", "scheduling.adapters.postgres.tables"}
)


def frozen_problems(chain: Path) -> list[str]:
    """What differs between ``chain/versions`` and ``chain/released.toml``."""
    released: dict[str, str] = tomllib.loads((chain / "released.toml").read_text())["revisions"]
    present = {p.name: p for p in sorted((chain / "versions").glob("*.py"))}
    problems = []
    for name, digest in sorted(released.items()):
        path = present.get(name)
        if path is None:
            problems.append(f"{name}: released but missing ({FROZEN})")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name}: changed after release ({FROZEN})")
    for name in sorted(set(present) - set(released)):
        problems.append(
            f"{name}: not in released.toml (add its SHA-256 there when the revision ships)"
        )
    return problems


def imported_modules(source: str) -> list[str]:
    """Every module ``source`` imports (``import a.b``, ``from a.b import c``), plus
    a dynamic ``importlib``/``__import__`` as the module ``importlib``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            found.append("importlib")
    return found


def revision_import_problems(source: str) -> list[str]:
    return [
        module
        for module in imported_modules(source)
        if not any(module == ok or module.startswith(ok + ".") for ok in ALLOWED_IMPORTS)
    ]


def test_the_manifest_check_catches_a_changed_a_missing_and_an_unlisted_revision(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "migrations"
    shutil.copytree(CHAIN, copy)
    assert frozen_problems(copy) == []
    versions = copy / "versions"
    changed = versions / "0005_run_worker_role.py"
    changed.write_text(changed.read_text().replace("NOBYPASSRLS ", ""))
    (versions / "0007_run_queued_notify.py").unlink()
    (versions / "0099_later.py").write_text('"""A later revision."""\n')
    assert frozen_problems(copy) == [
        f"0005_run_worker_role.py: changed after release ({FROZEN})",
        f"0007_run_queued_notify.py: released but missing ({FROZEN})",
        "0099_later.py: not in released.toml (add its SHA-256 there when the revision ships)",
    ]


def test_released_revision_files_are_unchanged() -> None:
    problems = frozen_problems(CHAIN)
    assert problems == [], "\n".join(problems)
    assert len(list((CHAIN / "versions").glob("*.py"))) >= 8


def test_the_import_check_catches_live_product_code() -> None:
    wrong = (
        "from __future__ import annotations\n"
        "import sqlalchemy as sa\n"
        "from alembic import op\n"
        "from scheduling.adapters.postgres.roles import role_names\n"
        "import scheduling.ports.records\n"
        "from . import helpers\n"
        "roles = __import__('scheduling.adapters.postgres.roles')\n"
    )
    assert revision_import_problems(wrong) == [
        "scheduling.adapters.postgres.roles",
        "scheduling.ports.records",
        ".",
        "importlib",
    ]


def test_no_revision_imports_product_code() -> None:
    problems = {
        path.name: revision_import_problems(path.read_text())
        for path in sorted((CHAIN / "versions").glob("*.py"))
    }
    assert len(problems) >= 8
    assert all(not found for found in problems.values()), problems


def _env_literal(name: str) -> str:
    for node in ast.parse((CHAIN / "env.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Constant)
            return str(node.value.value)
    raise AssertionError(f"env.py assigns no {name}")


def test_env_imports_only_the_runner_and_the_metadata_and_names_the_parameter() -> None:
    product = {
        m for m in imported_modules((CHAIN / "env.py").read_text()) if m.startswith("scheduling")
    }
    assert product <= ENV_PRODUCT_IMPORTS, product
    # The prefix's source stays the deployment's documented setting.
    assert _env_literal("ROLE_PREFIX_ENV") == roles.ROLE_PREFIX_ENV
    assert _env_literal("DEFAULT_ROLE_PREFIX") == roles.DEFAULT_ROLE_PREFIX
    attribute = _env_literal("ROLE_PREFIX_ATTRIBUTE")
    assert attribute == runner.ROLE_PREFIX_ATTRIBUTE
    # Every revision that names roles reads that very parameter.
    readers = [
        path.name
        for path in sorted((CHAIN / "versions").glob("*.py"))
        if re.search(r"\{(owner|api|scheduler|maintenance|run_worker)\}", path.read_text())
    ]
    assert len(readers) == 6, readers
    for name in readers:
        assert f'_ROLE_PREFIX = "{attribute}"' in (CHAIN / "versions" / name).read_text(), name
