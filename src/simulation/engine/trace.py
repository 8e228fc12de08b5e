"""Traces: the JSON record of one execution, keyed so it can be replayed exactly.

A trace holds no wall-clock time, process id or port: only the key (scenario, seed,
mode, commit, PostgreSQL and tzdata versions), the virtual start instant, the
interleaver's decisions and clock moves, faults, task outcomes, the history, coverage
and the verdict. Its canonical text is what replay compares, byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulation.engine.jsonable import dumps

FORMAT = "scheduling-sim/trace@1"


@dataclass(frozen=True)
class TraceKey:
    scenario: str
    seed: int
    mode: str
    commit: str
    postgres: str
    tzdata: str

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "mode": self.mode,
            "commit": self.commit,
            "postgres": self.postgres,
            "tzdata": self.tzdata,
        }


def trace_text(trace: dict[str, Any]) -> str:
    """The canonical text of a trace (one line, sorted keys), newline-terminated."""
    return dumps(trace) + "\n"


def write_trace(trace: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trace_text(trace), encoding="utf-8")
    return path


def read_trace(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} trace")
    return data


def differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths at which two traces differ (for a readable replay failure)."""
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        left, right = a.get(k), b.get(k)
        path = f"{prefix}{k}"
        if isinstance(left, dict) and isinstance(right, dict):
            out += differences(left, right, path + ".")
        elif dumps(left) != dumps(right):
            out.append(path)
    return out
