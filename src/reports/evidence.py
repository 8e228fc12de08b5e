"""The part of a check's evidence that its seed determines, and a digest of it.

Under one seed, profile, tzdata and dependency set a check explores the same examples,
interleavings and crash points, so counts, seeds, statuses, steps reached, faults fired,
cases and tallies reproduce exactly (the simulator schedules every step from the seed;
Hypothesis draws from ``--hypothesis-seed``). What depends on the machine or the moment
does not: wall-clock durations, server addresses and versions, temporary paths of
saved traces, traces replayed first from the local failure store, counts of races between
real threads or servers outside the simulator. Those keys are left
out, at any depth, by their names (``VOLATILE_KEYS`` and ``VOLATILE_SUFFIXES``);
``verify --rerun`` compares the digest of what remains (ADR 2150).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

VOLATILE_KEYS = frozenset(
    {
        # where the run's server was, and what it was
        "server",
        "database",
        "postgres",
        "postgres_version",
        "url",
        "dsn",
        "host",
        "port",
        "pid",
        # files the simulator saved or replayed from the local failure store
        "saved_traces",
        "replayed_first",
        "replay",
        "path",
        "paths",
        "durability",
        "replication",
        # counts of real races (threads, backends killed, wall-clock timing), not
        # scheduled by the simulator: decisions_per_worker measured differing under one
        # seed; the others read off the checks that race real workers or servers
        "decisions_per_worker",
        "committed_before_kill",
        "decided_after_kill",
        "transient_retries",
        "workers_continued",
        "heartbeats_after_schedule_cancel",
        "concurrent_batches",
        "recoveries",
        "clock_jumps",
        "async_runs_claimed",
        "log_lines_searched",
        "log_records_searched",
    }
)
VOLATILE_SUFFIXES = ("seconds", "_s", "_ms", "duration", "elapsed", "_at", "_pid", "_xid")
# Lines of product code a tracer counted: warm caches (which checks ran earlier in the
# process) change them; server backend pids and transaction ids. Both measured
# differing between a run and a re-run of one check.
VOLATILE_PARTS = ("lines_measured", "backend_xid")


# Top-level keys of one check file's evidence that real races decide (names too generic
# to leave out everywhere): test_lifecycle races real concurrent batches, so which
# operation wins, and the dispositions, vary under one seed (measured).
VOLATILE_BY_FILE: dict[str, frozenset[str]] = {
    "src/gates/checks/test_lifecycle.py": frozenset({"outcomes", "dispositions"}),
}


def volatile(key: str) -> bool:
    lowered = key.lower()
    return (
        lowered in VOLATILE_KEYS
        or lowered.endswith(VOLATILE_SUFFIXES)
        or any(part in lowered for part in VOLATILE_PARTS)
    )


def deterministic(value: Any) -> Any:
    """``value`` without its volatile keys (recursively through dicts and lists)."""
    if isinstance(value, dict):
        return {k: deterministic(v) for k, v in value.items() if not volatile(str(k))}
    if isinstance(value, list):
        return [deterministic(v) for v in value]
    return value


def of_check(evidence: dict[str, Any], nodeid: str = "") -> dict[str, Any]:
    """The deterministic part of a check's evidence (``nodeid`` names its file)."""
    dropped = VOLATILE_BY_FILE.get(nodeid.split("::", 1)[0], frozenset())
    kept: dict[str, Any] = deterministic(evidence)
    return {k: v for k, v in kept.items() if k not in dropped}


def evidence_digest(evidence: dict[str, Any], nodeid: str = "") -> str:
    """SHA-256 of the deterministic part of ``evidence`` in canonical JSON."""
    text = json.dumps(of_check(evidence, nodeid), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def differing_keys(recorded: dict[str, Any], rerun: dict[str, Any], nodeid: str = "") -> list[str]:
    """Top-level keys whose deterministic values differ between two evidence dicts."""
    a, b = of_check(recorded, nodeid), of_check(rerun, nodeid)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
