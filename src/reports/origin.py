"""What ran, beyond the checks: the product source tree and the installed dependencies.

A run records a digest of the product's source tree (``src/scheduling``: every file's
path relative to the tree and its bytes, sorted by path, ``__pycache__`` and ``.pyc``
left out) and of the distributions installed in its environment (sorted
``name==version`` lines of ``importlib.metadata``, the installer ``pip`` left out).
``verify`` recomputes both: the tree from the checkout, the dependency set from the
environment it runs in (ADR 2150).
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from catalog.provenance import counted, git_lines, sha256_file

PRODUCT_RELATIVE = Path("src/scheduling")
"""Where a checkout keeps the product (relative to its root)."""

# The installer decides nothing a check observes; a reviewer's venv may carry another.
_NOT_DEPENDENCIES = frozenset({"pip"})


def product_tree_digest(root: Path) -> str:
    """SHA-256 over the product tree under ``root``: for each file in sorted path order,
    its relative path, a NUL, its SHA-256, a newline. An absent tree digests as empty."""
    tree = root / PRODUCT_RELATIVE
    files = sorted((p.relative_to(tree).as_posix(), p) for p in tree.rglob("*") if counted(p))
    digest = hashlib.sha256()
    for relative, path in files:
        digest.update(relative.encode("utf-8") + b"\0")
        digest.update(sha256_file(path).encode("ascii") + b"\n")
    return digest.hexdigest()


def _canonical_name(name: str) -> str:
    return "-".join(name.lower().replace("_", "-").replace(".", "-").split("-"))


def dependency_set() -> list[str]:
    """Sorted ``name==version`` of every distribution importable in this environment."""
    found = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or _canonical_name(name) in _NOT_DEPENDENCIES:
            continue
        found.add(f"{_canonical_name(name)}=={dist.version}")
    return sorted(found)


def dependency_digest(dependencies: list[str]) -> str:
    return hashlib.sha256("\n".join(dependencies).encode("utf-8")).hexdigest()


def dependency_changes(recorded: list[str], installed: list[str]) -> list[str]:
    """What differs between two dependency sets, as ``name: old -> new`` lines."""
    old = dict(line.split("==", 1) for line in recorded)
    new = dict(line.split("==", 1) for line in installed)
    changes = []
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            changes.append(f"{name}: {old.get(name, 'absent')} -> {new.get(name, 'absent')}")
    return changes


def tracked_changes(root: Path) -> list[str] | None:
    """``git status --porcelain`` lines for tracked files (untracked ignored); None
    without git or outside a repository."""
    return git_lines(root, "status", "--porcelain", "--untracked-files=no")
