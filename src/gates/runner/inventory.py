"""Which checks are bound to which gates: collected by pytest without running them."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gates

# The pytest plugins a gate run loads. Named explicitly on every pytest command line
# (they have no entry points, so pytest runs of other projects never load them).
PYTEST_PLUGINS = ("gates.runner.pytest_plugin", "simulation.provider.pytest_plugin")


def plugin_args() -> list[str]:
    """``-p name`` for each of ``PYTEST_PLUGINS`` (pytest ignores a repeated ``-p``)."""
    return [arg for name in PYTEST_PLUGINS for arg in ("-p", name)]


@dataclass(frozen=True)
class BoundCheck:
    nodeid: str
    gate: str
    facet: str


class CollectionError(RuntimeError):
    """pytest could not collect the gate checks (a broken check module, say)."""


def default_checks_dir() -> Path:
    return Path(gates.__file__).resolve().parent / "checks"


def project_root(checks_dir: Path) -> Path:
    """The nearest ancestor with a pyproject.toml (so pytest reads our configuration)."""
    for candidate in [checks_dir, *checks_dir.parents]:
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return checks_dir


def collect_inventory(checks_dir: Path) -> list[BoundCheck]:
    """Every gate check under ``checks_dir`` with its binding; raises CollectionError."""
    root = project_root(checks_dir)
    with tempfile.TemporaryDirectory(prefix="gate-inventory-") as tmp:
        out = Path(tmp) / "inventory.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                *plugin_args(),
                "--gate-inventory",
                str(out),
                str(checks_dir),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
        # 0: collected; 5: nothing to collect (every gate is then MISSING).
        if proc.returncode not in (0, 5) or (proc.returncode == 0 and not out.exists()):
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise CollectionError(f"pytest could not collect the gate checks:\n{tail}")
        if not out.exists():
            return []
        data = json.loads(out.read_text(encoding="utf-8"))
    return [BoundCheck(c["nodeid"], c["gate"], c["facet"]) for c in data["checks"]]
