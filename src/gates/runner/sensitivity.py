"""The report's link to the latest sensitivity run (``scheduling-gates mutate``).

A gate run records where the latest mutate result file is, its SHA-256, when and on
which commit it ran and what it found, read from the file itself. Without a file the
report says there was no sensitivity run; it never invents one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.provenance import sha256_file
from reports.model import Sensitivity, SensitivityRun

LATEST = Path("reports/out/mutants.json")
"""Where the mutate lane (``.ci/mutate``, ``nox -s mutate``) writes its result."""


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def latest_sensitivity(path: Path | None, root: Path) -> Sensitivity:
    """What ``path`` (default ``reports/out/mutants.json`` under ``root``) says."""
    target = path if path is not None else root / LATEST
    shown = _shown(target, root)
    if not target.is_file():
        return Sensitivity(path=shown, run=None, note="no sensitivity run")
    digest = sha256_file(target)
    try:
        raw: Any = json.loads(target.read_text(encoding="utf-8"))
        run = SensitivityRun.model_validate(
            {
                "finished_at": raw.get("finished_at"),
                "commit": raw.get("commit"),
                "selection": raw.get("selection"),
                "killed": raw["killed"],
                "total": raw["total"],
                "untargeted": raw["untargeted"],
                "not_killed": [m["id"] for m in raw["mutants"] if m["verdict"] != "KILLED"],
            }
        )
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
        note = f"unreadable mutate result ({type(exc).__name__})"
        return Sensitivity(path=shown, sha256=digest, run=None, note=note)
    return Sensitivity(path=shown, sha256=digest, run=run, note=None)
