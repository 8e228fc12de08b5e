"""Ledger invariants over plain rows of ``schedule_occurrences``, ``runs``, ``sessions``.

Rows are dicts keyed by column name (spec "Persistence"), so the checker works on any
query result before the materializer exists. Invariants:

- ``ledger.unique``: at most one occurrence per (schedule_id, nominal_fire_at), and
  with ``expected`` given, exactly one per expected instant (every due instant decided);
- ``ledger.not_early``: ``materialized_at >= nominal_fire_at``;
- ``ledger.not_partial``: a MATERIALIZED row has live links (session_id, run_id,
  materialized_at, authority_version; no links_erased_at) or the erased form (both ids
  null, links_erased_at set); any other disposition has no links and a reason_code;
  linked session and run rows exist;
- ``ledger.links``: one run belongs to at most one occurrence, the run's session is the
  occurrence's session, session metadata names its occurrence, and no session or run
  that claims a schedule is left without its occurrence (a partial crash leftover).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from simulation.engine.checkers.violation import Violation

Row = Mapping[str, Any]

MATERIALIZED = "MATERIALIZED"
DISPOSITIONS = frozenset(
    {MATERIALIZED, "MISSED", "SKIPPED_OVERLAP", "AUTHORIZATION_FAILED", "CONFIGURATION_FAILED"}
)


def _key(value: Any) -> str:
    return str(value)


def _metadata(session: Row) -> Mapping[str, Any]:
    meta = session.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def check_ledger(
    occurrences: Iterable[Row],
    runs: Iterable[Row] = (),
    sessions: Iterable[Row] = (),
    *,
    expected: Mapping[Any, Iterable[datetime]] | None = None,
) -> list[Violation]:
    """All ledger invariant violations; empty when the ledger is consistent."""
    occ = list(occurrences)
    runs_by_id = {_key(r["id"]): r for r in runs}
    sessions_by_id = {_key(s["id"]): s for s in sessions}
    found: list[Violation] = []
    found += _unique(occ, expected)
    for row in occ:
        found += _row_shape(row, runs_by_id, sessions_by_id)
    found += _links(occ, runs_by_id, sessions_by_id)
    return found


def _unique(occ: list[Row], expected: Mapping[Any, Iterable[datetime]] | None) -> list[Violation]:
    found = []
    groups: dict[tuple[str, datetime], list[Row]] = defaultdict(list)
    for row in occ:
        groups[(_key(row["schedule_id"]), row["nominal_fire_at"])].append(row)
    for (schedule, nominal), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if len(rows) > 1:
            found.append(
                Violation(
                    "ledger.unique",
                    f"{len(rows)} occurrences for schedule {schedule} at {nominal.isoformat()}",
                    {"occurrence_ids": sorted(_key(r["id"]) for r in rows)},
                )
            )
    for schedule, instants in (expected or {}).items():
        for nominal in instants:
            if not groups.get((_key(schedule), nominal)):
                found.append(
                    Violation(
                        "ledger.unique",
                        f"due instant {nominal.isoformat()} of schedule {schedule} undecided",
                        {"schedule_id": schedule, "nominal_fire_at": nominal},
                    )
                )
    return found


def _row_shape(row: Row, runs: Mapping[str, Row], sessions: Mapping[str, Row]) -> list[Violation]:
    found = []
    oid = _key(row["id"])
    disposition = row.get("disposition")
    materialized_at = row.get("materialized_at")
    nominal = row["nominal_fire_at"]
    if materialized_at is not None and materialized_at < nominal:
        found.append(
            Violation(
                "ledger.not_early",
                f"occurrence {oid} materialized at {materialized_at.isoformat()}, before its "
                f"nominal instant {nominal.isoformat()}",
                {"occurrence_id": oid},
            )
        )
    session_id, run_id = row.get("session_id"), row.get("run_id")
    erased = row.get("links_erased_at")
    problems: list[str] = []
    if disposition not in DISPOSITIONS:
        problems.append(f"unknown disposition {disposition!r}")
    elif disposition == MATERIALIZED:
        if materialized_at is None or row.get("authority_version") is None:
            problems.append("MATERIALIZED without materialized_at and authority_version")
        if erased is None:
            if session_id is None or run_id is None:
                problems.append("MATERIALIZED with a missing session or run link")
            if session_id is not None and _key(session_id) not in sessions:
                problems.append(f"linked session {session_id} does not exist")
            if run_id is not None and _key(run_id) not in runs:
                problems.append(f"linked run {run_id} does not exist")
        elif session_id is not None or run_id is not None:
            problems.append("erased MATERIALIZED row still holds a link")
    else:
        if session_id is not None or run_id is not None or erased is not None:
            problems.append(f"{disposition} row holds session/run links")
        if not row.get("reason_code"):
            problems.append(f"{disposition} row without a reason_code")
    found += [
        Violation("ledger.not_partial", f"occurrence {oid}: {p}", {"occurrence_id": oid})
        for p in problems
    ]
    return found


def _links(occ: list[Row], runs: Mapping[str, Row], sessions: Mapping[str, Row]) -> list[Violation]:
    found = []
    owners: dict[str, list[str]] = defaultdict(list)
    linked_sessions: set[str] = set()
    linked_runs: set[str] = set()
    for row in occ:
        oid = _key(row["id"])
        run_id, session_id = row.get("run_id"), row.get("session_id")
        if run_id is not None:
            owners[_key(run_id)].append(oid)
            linked_runs.add(_key(run_id))
        if session_id is not None:
            linked_sessions.add(_key(session_id))
        run = runs.get(_key(run_id)) if run_id is not None else None
        if (
            run is not None
            and "session_id" in run
            and session_id is not None
            and _key(run["session_id"]) != _key(session_id)
        ):
            found.append(
                Violation(
                    "ledger.links",
                    f"occurrence {oid}: run {run_id} belongs to session "
                    f"{run['session_id']}, not {session_id}",
                    {"occurrence_id": oid},
                )
            )
        session = sessions.get(_key(session_id)) if session_id is not None else None
        if session is not None:
            meta = _metadata(session)
            for field_name, want in (
                ("occurrence_id", row["id"]),
                ("schedule_id", row["schedule_id"]),
            ):
                if field_name in meta and _key(meta[field_name]) != _key(want):
                    found.append(
                        Violation(
                            "ledger.links",
                            f"occurrence {oid}: session {session_id} metadata {field_name} is "
                            f"{meta[field_name]}",
                            {"occurrence_id": oid},
                        )
                    )
    for run_id, oids in sorted(owners.items()):
        if len(oids) > 1:
            found.append(
                Violation(
                    "ledger.links",
                    f"run {run_id} is linked by {len(oids)} occurrences",
                    {"occurrence_ids": sorted(oids)},
                )
            )
    for sid, session in sorted(sessions.items()):
        if "schedule_id" in _metadata(session) and sid not in linked_sessions:
            found.append(
                Violation(
                    "ledger.links",
                    f"scheduled session {sid} has no occurrence (partial materialization)",
                    {"session_id": sid},
                )
            )
    for rid, run in sorted(runs.items()):
        run_session = run.get("session_id")
        if run_session is None or rid in linked_runs:
            continue
        session = sessions.get(_key(run_session))
        if session is not None and "schedule_id" in _metadata(session):
            found.append(
                Violation(
                    "ledger.links",
                    f"run {rid} of scheduled session {run_session} has no occurrence",
                    {"run_id": rid},
                )
            )
    return found
