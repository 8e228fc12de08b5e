"""Where a gate report came from: digests of what decided its verdicts.

A run records the SHA-256 of the catalog and of the milestone file it used, of every file
under the check directory (checks, their support modules, conftest), the files there
that git does not track (they were collected, so the commit alone does not describe
the run: the report counts them as dirty), and the inventory of bound checks pytest
collected. ``verify`` compares a report's checks and selection with that record, and
``verify --checkout DIR`` recomputes the digests and the markers from a checkout.
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from catalog.milestones import SHIPPED_FILE

SHIPPED_CATALOG = "catalog.toml"
SHIPPED_MILESTONES = SHIPPED_FILE
CATALOG_RELATIVE = Path("src/catalog")
"""Where a checkout keeps the catalog and the shipped milestone file."""
LEGACY_RELATIVE = {
    SHIPPED_CATALOG: Path("src/gates/catalog/catalog.toml"),
    SHIPPED_MILESTONES: Path("src/gates/catalog/ledger.toml"),
}
"""Where a checkout from before ADR 2210 kept them (``gates.catalog``, the milestone
file then named ``ledger.toml``)."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shipped_text(name: str) -> str:
    return resources.files("catalog").joinpath(name).read_text(encoding="utf-8")


def milestones_digest(path: Path | None) -> str:
    """The digest of the milestone file at ``path``, or of the shipped one."""
    text = shipped_text(SHIPPED_MILESTONES) if path is None else path.read_text(encoding="utf-8")
    return sha256_text(text)


def shipped_file_in(checkout: Path, name: str) -> Path:
    """The shipped catalog file ``name`` in ``checkout``: under ``src/catalog/``, or
    where a checkout from before the move kept it when only that exists."""
    current = checkout / CATALOG_RELATIVE / name
    legacy = checkout / LEGACY_RELATIVE[name] if name in LEGACY_RELATIVE else current
    return legacy if not current.exists() and legacy.is_file() else current


def counted(path: Path) -> bool:
    """Whether a digest counts ``path``: a file, not bytecode or a cache."""
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def git_lines(root: Path, *args: str) -> list[str] | None:
    """The non-empty lines ``git ARGS`` prints with ``root`` as its working directory;
    None without git, outside a repository, on a failure or after 10 s."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return [line for line in proc.stdout.splitlines() if line]


def head_commit(root: Path) -> str | None:
    """The commit checked out at ``root``; None without git or outside a repository."""
    lines = git_lines(root, "rev-parse", "HEAD")
    return lines[0] if lines else None


def check_file_digests(checks_dir: Path, root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``checks_dir``, keyed by its path relative to
    ``root`` (the form pytest node ids use)."""
    files = sorted(p for p in checks_dir.rglob("*") if counted(p))
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in files}


def untracked_files(checks_dir: Path, root: Path) -> list[str] | None:
    """Files under ``checks_dir`` git does not track (ignored ones included); None
    without git."""
    found = git_lines(root, "ls-files", "--others", "--", str(checks_dir))
    return None if found is None else sorted(f for f in found if counted(root / f))


@dataclass(frozen=True)
class Marker:
    """A test function marked ``@pytest.mark.gate(id)`` (or ``rule(id)``) in a check
    file; ``gate`` holds the gate or rule id."""

    path: str
    function: str
    gate: str


def gate_markers(path: Path, relative: str) -> set[Marker]:
    """Statically, the gate each test function of ``path`` is bound to (a decorator
    ``pytest.mark.gate("id", ...)`` or a module-level ``pytestmark`` naming one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id: node.value.value for t in targets if isinstance(t, ast.Name)}
    module_gate = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module_gate = next(iter(_gates_in(node.value, names)), module_gate)
    found: set[Marker] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not fn.name.startswith("test"):
            continue
        gates = [g for d in fn.decorator_list for g in _gates_in(d, names)] or (
            [module_gate] if module_gate else []
        )
        found |= {Marker(relative, fn.name, g) for g in gates}
    return found


def _gates_in(node: ast.AST, names: dict[str, str]) -> list[str]:
    """Gate and rule ids in ``pytest.mark.gate(...)``/``rule(...)`` calls within
    ``node`` (a string literal, or a module-level name bound to one)."""
    out = []
    for sub in ast.walk(node):
        if not (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("gate", "rule")
            and sub.args
        ):
            continue
        first = sub.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.append(first.value)
        elif isinstance(first, ast.Name) and first.id in names:
            out.append(names[first.id])
    return out


def nodeid_function(nodeid: str) -> tuple[str, str]:
    """(file, test function) of a pytest node id ``path::func[params]``."""
    path, _, rest = nodeid.partition("::")
    return path, rest.split("::")[-1].split("[", 1)[0]
