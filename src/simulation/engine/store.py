"""Saved failing traces, replayed first on the next run (like Hypothesis' example DB).

Default root: ``.simulation/failures`` under the working directory (git-ignored), or
``$SCHEDULING_SIM_FAILURES``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from simulation.engine.trace import trace_text, write_trace

DEFAULT_ROOT = Path(".simulation") / "failures"


def default_store_root() -> Path:
    return Path(os.environ.get("SCHEDULING_SIM_FAILURES", str(DEFAULT_ROOT)))


class FailureStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_store_root()

    def path_for(self, trace: dict[str, Any]) -> Path:
        key = trace["key"]
        digest = hashlib.sha256(trace_text(trace).encode("utf-8")).hexdigest()[:12]
        name = f"{key['mode']}-seed{key['seed']}-x{trace['execution']}-{digest}.json"
        return self.root / str(key["scenario"]) / name

    def save(self, trace: dict[str, Any]) -> Path:
        return write_trace(trace, self.path_for(trace))

    def entries(self, scenario: str) -> list[Path]:
        folder = self.root / scenario
        return sorted(folder.glob("*.json")) if folder.is_dir() else []

    @staticmethod
    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)
