"""rule.materialize.run_linkage on PostgreSQL: what a materialized occurrence's session
and run record about where they came from.

A schedule fires twice, with an update between (revision 2 has its own title and
instruction), so a value taken from the wrong revision, the schedule row or the
previous occurrence shows; revision 2 also binds a READY browser profile (the update
"can bind or unbind future occurrences"), so a binding dropped at firing, or carried
to the revision before it, shows. For each MATERIALIZED occurrence, written out here
from the spec's words: the session's metadata is exactly the schedule, revision,
occurrence and nominal instant (the platform's reserved keys, written by the
materializer) and, for the bound revision only, its ``browser_profile_id``; its agent
and version are the revision's, its title the revision's; its three events, in order,
are ``session.created`` with the same link, the instruction as a context-only user
message, and ``run.queued`` naming the run, the same link and the authority version
the occurrence recorded; the run's metadata holds the same link and version.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import AGENT_ID, AGENT_VERSION, definition

pytestmark = pytest.mark.postgres

RULE = "rule.materialize.run_linkage"
FIRST = {"title": "Morning garden round", "instruction": "List what needs watering today."}
SECOND = {"title": "Evening garden round", "instruction": "List what was watered today."}
PROFILE = UUID("5d0c6f1e-8a4b-4c2d-9e3f-1a2b3c4d5e6f")
"""The READY browser profile revision 2 binds (revision 1 binds none)."""


def link_of(occurrence: dict[str, Any]) -> dict[str, Any]:
    return {
        "schedule_id": str(occurrence["schedule_id"]),
        "schedule_revision": occurrence["schedule_revision"],
        "occurrence_id": str(occurrence["id"]),
        "nominal_fire_at": format_instant(occurrence["nominal_fire_at"]),
    }


def linkage_problems(
    occurrence: dict[str, Any],
    sessions: dict[Any, dict[str, Any]],
    events: list[dict[str, Any]],
    runs: dict[Any, dict[str, Any]],
    texts: dict[str, Any],
) -> list[str]:
    label = f"occurrence {occurrence['id']} (revision {occurrence['schedule_revision']})"
    session, run = sessions.get(occurrence["session_id"]), runs.get(occurrence["run_id"])
    if session is None or run is None:
        return [f"{label}: its session or run is missing"]
    link = link_of(occurrence)
    problems = []
    profile = texts.get("browser_profile_id")
    want_metadata = link if profile is None else {**link, "browser_profile_id": str(profile)}
    if session["metadata"] != want_metadata:
        problems.append(f"{label}: session metadata {session['metadata']} is not {want_metadata}")
    if (session["agent_id"], session["agent_version"]) != (AGENT_ID, AGENT_VERSION):
        problems.append(f"{label}: session agent {session['agent_id']} {session['agent_version']}")
    if session["title"] != texts["title"]:
        problems.append(f"{label}: session title {session['title']!r}")
    if (session["tenant_id"], session["principal_id"]) != (WHO.tenant_id, WHO.principal_id):
        problems.append(f"{label}: session owner")
    mine = sorted((e for e in events if e["session_id"] == session["id"]), key=lambda e: e["seq"])
    shape = [(e["seq"], e["event_type"], e["context_only"]) for e in mine]
    want_shape = [
        (1, "session.created", False),
        (2, "message.user", True),
        (3, "run.queued", False),
    ]
    if shape != want_shape:
        return [*problems, f"{label}: session events {shape} are not {want_shape}"]
    created, seed, queued = (e["payload"] for e in mine)
    if created != {"session_id": str(session["id"]), **link}:
        problems.append(f"{label}: session.created payload {created}")
    if seed != {"role": "user", "content": texts["instruction"]}:
        problems.append(f"{label}: the seed message is {seed}")
    want_queued = {
        "run_id": str(run["id"]),
        **link,
        "authority_version": occurrence["authority_version"],
    }
    if {k: queued.get(k) for k in want_queued} != want_queued:
        problems.append(f"{label}: run.queued payload {queued} lacks {want_queued}")
    if mine[2]["run_id"] != run["id"]:
        problems.append(f"{label}: run.queued is not on the run")
    want_run = {**link, "authority_version": occurrence["authority_version"]}
    if {k: run["metadata"].get(k) for k in want_run} != want_run:
        problems.append(f"{label}: run metadata {run['metadata']} lacks {want_run}")
    if run["session_id"] != session["id"]:
        problems.append(f"{label}: the run is not in the occurrence's session")
    return problems


@pytest.mark.rule(RULE)
async def test_each_materialized_run_records_its_origin(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        worker = h.worker(h.materializer())
        sid = await h.create(title=FIRST["title"], instruction=FIRST["instruction"])
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=3))
        assert (await worker.run_once()).errors == {}
        await h.sql("UPDATE runs SET status = 'COMPLETED', finished_at = :t", t=h.clock.now())
        row = await h.schedule(sid)
        h.world.profiles.put(
            BrowserProfile(
                PROFILE,
                WHO.tenant_id,
                WHO.principal_id,
                BrowserProfileState.READY,
                ("https://garden.example",),
            )
        )
        bound = definition(
            **SECOND,
            browser_profile_id=PROFILE,
            requested_scopes=frozenset({"memory.read", "browser.profile.read"}),
        )
        await h.world.service.update(
            WHO, sid, row["current_revision"], bound, idempotency_key="second"
        )
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=3))
        assert (await worker.run_once()).errors == {}
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == ["MATERIALIZED"] * 2
        assert [o["schedule_revision"] for o in ledger.occurrences] == [1, 2]
        sessions = {s["id"]: s for s in ledger.sessions}
        runs = {r["id"]: r for r in ledger.runs}
        problems = []
        pinned: tuple[dict[str, Any], ...] = (FIRST, {**SECOND, "browser_profile_id": PROFILE})
        for occurrence, texts in zip(ledger.occurrences, pinned, strict=True):
            problems += linkage_problems(occurrence, sessions, ledger.session_events, runs, texts)
        assert problems == [], problems
        gate_evidence.record("occurrences", [link_of(o) for o in ledger.occurrences])
    finally:
        await h.close()
