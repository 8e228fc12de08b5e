"""The parts of a trace key that come from the environment: commit and tzdata version."""

from __future__ import annotations

import subprocess
import zoneinfo
from functools import lru_cache
from importlib import metadata
from pathlib import Path


@lru_cache(maxsize=1)
def code_commit() -> str:
    """``git rev-parse HEAD`` of the tree this package is imported from (or "unknown")."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


@lru_cache(maxsize=1)
def tzdata_version() -> str:
    """The tz database zoneinfo reads: the system copy's version, else the wheel's."""
    for root in zoneinfo.TZPATH:
        marker = Path(root) / "tzdata.zi"
        try:
            first = marker.read_text(encoding="utf-8").splitlines()[0]
        except (OSError, IndexError):
            continue
        if first.startswith("# version"):
            return f"system {first.split()[-1]}"
    try:
        return f"tzdata {metadata.version('tzdata')}"
    except metadata.PackageNotFoundError:
        return "unknown"
