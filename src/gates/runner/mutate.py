"""``scheduling-gates mutate``: sensitivity as evidence.

Each shipped mutant (``mutants.toml``) is applied, one at a time, to a temporary copy
of the tree (``src``, ``tests`` for the contract suites, ``alembic.ini``,
``pyproject.toml``; the working tree is never touched); the mutant's check files run
against the copy (its ``src`` first on ``PYTHONPATH``) with one shared PostgreSQL
server; every bound check that fails or errors turns its gate or rule red. A mutant
is KILLED when every gate and rule it declares turned red, SURVIVED when none did,
PARTIAL otherwise, STALE when its snippet does not occur exactly once (the product
moved on: update the mutant), TIMEOUT when its checks did not finish within the
per-mutant limit (a mutant that makes a loop spin or a wait never end: its process is
killed and no gate is named red, so it counts as not killed; the lane goes on).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from simulation.provider import acquire_server

COPIED = ("src", "tests", "alembic.ini", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    snippet: str
    replacement: str
    kills: tuple[str, ...]
    checks: tuple[str, ...]


@dataclass
class MutantResult:
    id: str
    verdict: str  # KILLED, PARTIAL, SURVIVED, STALE, TIMEOUT, ERROR
    kills: list[str]
    red: list[str] = field(default_factory=list)
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "verdict": self.verdict,
            "kills": self.kills,
            "red": self.red,
            "detail": self.detail,
        }


def parse_mutants(text: str) -> list[Mutant]:
    mutants = [
        Mutant(
            id=m["id"],
            file=m["file"],
            snippet=m["snippet"],
            replacement=m["replacement"],
            kills=tuple(m["kills"]),
            checks=tuple(m["checks"]),
        )
        for m in tomllib.loads(text).get("mutant", [])
    ]
    ids = [m.id for m in mutants]
    if len(ids) != len(set(ids)):
        raise ValueError("duplicate mutant ids")
    return mutants


def load_mutants(path: Path | None = None) -> list[Mutant]:
    if path is None:
        text = resources.files("gates.runner").joinpath("mutants.toml").read_text(encoding="utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    return parse_mutants(text)


def apply(mutant: Mutant, root: Path) -> str | None:
    """Apply ``mutant`` in the tree at ``root``; the reason it cannot, else None."""
    target = root / mutant.file
    if not target.is_file():
        return f"{mutant.file} does not exist"
    text = target.read_text(encoding="utf-8")
    found = text.count(mutant.snippet)
    if found != 1:
        return f"the snippet occurs {found} times in {mutant.file} (must be exactly once)"
    target.write_text(text.replace(mutant.snippet, mutant.replacement), encoding="utf-8")
    return None


def copy_tree(source: Path, destination: Path) -> None:
    for name in COPIED:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, destination / name, ignore=IGNORED)
        elif path.is_file():
            shutil.copy2(path, destination / name)


DEFAULT_TIMEOUT_S = 1200.0
"""Per mutant: the whole check suite takes about 4 minutes on a 2-core machine."""


def run_mutant(
    mutant: Mutant,
    source: Path,
    env: dict[str, str],
    pytest_args: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> MutantResult:
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.id}-") as tmp:
        root = Path(tmp)
        copy_tree(source, root)
        problem = apply(mutant, root)
        if problem is not None:
            return MutantResult(mutant.id, "STALE", list(mutant.kills), detail=problem)
        results = root / "results.json"
        child_env = dict(env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(root / "src"), *filter(None, [env.get("PYTHONPATH")])]
        )
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--gate-results",
            str(results),
            *pytest_args,
            *mutant.checks,
        ]
        try:
            proc = subprocess.run(
                args, cwd=root, env=child_env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            detail = f"its checks did not finish within {timeout_s:g} s"
            return MutantResult(mutant.id, "TIMEOUT", list(mutant.kills), detail=detail)
        if not results.exists():
            tail = (proc.stdout + proc.stderr)[-2000:]
            return MutantResult(mutant.id, "ERROR", list(mutant.kills), detail=tail)
        data = json.loads(results.read_text(encoding="utf-8"))
    red = sorted({r["gate"] for r in data["results"] if r["outcome"] != "passed"})
    return MutantResult(mutant.id, verdict(mutant.kills, red), list(mutant.kills), red)


def verdict(kills: Iterable[str], red: Sequence[str]) -> str:
    wanted = set(kills)
    hit = wanted & set(red)
    if hit == wanted:
        return "KILLED"
    return "PARTIAL" if hit else "SURVIVED"


def coverage(mutants: Sequence[Mutant], ids: Iterable[str]) -> list[str]:
    """Gate and rule ids no shipped mutant declares it kills."""
    declared = {k for m in mutants for k in m.kills}
    return [i for i in ids if i not in declared]


def result_payload(
    results: Sequence[MutantResult],
    uncovered: Sequence[str],
    *,
    selection: Sequence[str],
    started_at: datetime,
    finished_at: datetime,
    commit: str | None,
) -> dict[str, Any]:
    """The ``--output`` file: what a gate report links as its latest sensitivity run."""
    return {
        "mutants": [r.as_dict() for r in results],
        "killed": sum(r.verdict == "KILLED" for r in results),
        "total": len(results),
        "untargeted": list(uncovered),
        "selection": list(selection) or None,
        "started_at": started_at.isoformat(),
        "finished_at": finished_at.isoformat(),
        "duration_s": round((finished_at - started_at).total_seconds(), 1),
        "commit": commit,
    }


def run_all(
    mutants: Sequence[Mutant],
    source: Path,
    pytest_args: Sequence[str] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[MutantResult]:
    """Every mutant against one PostgreSQL server shared through the environment."""
    env = dict(os.environ)
    with ExitStack() as stack:
        if "SCHEDULING_DATABASE_URL" not in env:
            server = acquire_server()
            stack.callback(server.close)
            env["SCHEDULING_DATABASE_URL"] = server.info.dsn
            env["SCHEDULING_DATABASE_INFO"] = json.dumps(server.info.to_dict())
        return [run_mutant(m, source, env, pytest_args, timeout_s) for m in mutants]
