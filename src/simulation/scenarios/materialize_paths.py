"""Crash-sweep scenarios for the decisions that write no run (materialize_atomic).

``materialize.atomic`` sweeps the MATERIALIZED transaction. These sweep the other write
paths of the same transaction, each on its own fresh database:

* ``materialize.atomic_missed`` - five older instants and the latest one all beyond the
  misfire grace: one MISSED occurrence and one coalescing event (count 5);
* ``materialize.atomic_principal_disabled`` / ``materialize.atomic_scope_revoked`` -
  the owner is disabled / a requested scope is revoked after creation:
  AUTHORIZATION_FAILED;
* ``materialize.atomic_agent_missing`` - the pinned agent version is deleted, and two
  older instants are due within grace: CONFIGURATION_FAILED with a coalescing event
  (count 2).

A decision without a run writes the occurrence, advances the schedule (counting the
failure), appends its audit events and the offline-results outbox row, then commits.
A fault after any write and before COMMIT must leave the database exactly as the
setup left it (the schedule still due, unchanged); after COMMIT the whole decision must
be there. A retry without faults then decides it exactly once (``decided`` if nothing
committed, ``not_due`` if it had) and the final ledger is the one complete decision.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from scheduling.ports.probe import NullProbe
from scheduling.service import materializer as m
from scheduling.service.materializer import MaterializeResult
from scheduling.testing import open_storage
from simulation.engine.checkers.violation import Violation
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld
from simulation.scenarios import register
from simulation.scenarios.materialize import (
    ATOMIC,
    build_materializer,
    setup_at,
)
from simulation.worlds.service import definition

# The steps a decision without a run reaches, in order (no admission; the decision is
# one statement, ADR 2330).
NO_RUN_STEPS = (m.STEP_LOCKED, m.STEP_DECIDED, m.STEP_COMMITTED)
DECISION_TABLES = (
    "schedule_occurrences",
    "sessions",
    "session_events",
    "runs",
    "run_checkpoints",
    "process_events",
    "schedule_outbox",
)
GRACE = timedelta(seconds=int(definition().misfire_grace_seconds))


@dataclasses.dataclass(frozen=True)
class Path:
    """One decision path: how the setup breaks the firing and what it must decide."""

    name: str
    disposition: str
    reason_code: str
    skip_instants: int
    offset: timedelta
    breakage: tuple[str, ...] = ()
    """SQL run as the database owner after the schedule is created."""


PATHS = (
    Path(
        "missed",
        "MISSED",
        m.GRACE_EXPIRED,
        skip_instants=5,
        offset=GRACE + timedelta(seconds=60),
    ),
    Path(
        "principal_disabled",
        "AUTHORIZATION_FAILED",
        m.PRINCIPAL_DISABLED,
        skip_instants=0,
        offset=timedelta(seconds=30),
        breakage=("UPDATE principals SET enabled = false",),
    ),
    Path(
        "scope_revoked",
        "AUTHORIZATION_FAILED",
        m.SCOPE_REVOKED,
        skip_instants=0,
        offset=timedelta(seconds=30),
        breakage=("UPDATE principals SET scopes = array_remove(scopes, 'memory.read')",),
    ),
    Path(
        "agent_missing",
        "CONFIGURATION_FAILED",
        m.AGENT_VERSION_MISSING,
        skip_instants=2,
        offset=timedelta(seconds=30),
        breakage=("DELETE FROM agent_active_versions", "DELETE FROM agent_versions"),
    ),
)


def _setup(path: Path) -> Any:
    due = setup_at(path.offset, skip_instants=path.skip_instants)

    async def setup(world: ScenarioWorld) -> None:
        await due(world)
        conn = await world.connect()
        try:
            for statement in path.breakage:
                await conn.execute(statement)
        finally:
            await conn.close()
        world.vars["path"] = path
        world.vars["baseline"] = await rows(world)

    return setup


async def rows(world: ScenarioWorld) -> dict[str, list[dict[str, Any]]]:
    conn = await world.connect()
    try:
        out: dict[str, list[dict[str, Any]]] = {}
        for table in ("schedules", *DECISION_TABLES):
            out[table] = [dict(r) for r in await conn.fetch(f"SELECT * FROM {table}")]  # noqa: S608
        return out
    finally:
        await conn.close()


def _payload(event: dict[str, Any]) -> Any:
    value = event["payload"]
    return json.loads(value) if isinstance(value, str) else value


def decision_ledger(
    now: dict[str, list[dict[str, Any]]],
    baseline: dict[str, list[dict[str, Any]]],
    path: Path,
    sid: UUID,
    nominal: datetime,
) -> list[Violation]:
    """Exactly the one complete decision of ``path`` on top of the setup's rows."""
    found: list[Violation] = []
    added = {t: [r for r in now[t] if r not in baseline[t]] for t in DECISION_TABLES}
    occurrences = added["schedule_occurrences"]
    if len(occurrences) != 1:
        found.append(Violation("materialize.exactly_one", f"{len(occurrences)} occurrences"))
    for occ in occurrences:
        got = (occ["disposition"], occ["reason_code"], occ["nominal_fire_at"])
        want = (path.disposition, path.reason_code, nominal)
        if got != want or occ["session_id"] is not None or occ["run_id"] is not None:
            found.append(Violation("materialize.exactly_one", f"occurrence {got}, want {want}"))
    for table in ("sessions", "session_events", "runs", "run_checkpoints"):
        if added[table]:
            found.append(Violation("materialize.no_run", f"{len(added[table])} rows in {table}"))
    types = [str(e["event_type"]) for e in added["process_events"]]
    want_types = sorted(
        [f"schedule.occurrence.{path.disposition.lower()}"]
        + (["schedule.misfires_coalesced"] if path.skip_instants else [])
    )
    if sorted(types) != want_types:
        found.append(Violation("materialize.events", f"events {sorted(types)}, want {want_types}"))
    for event in added["process_events"]:
        if event["event_type"] == "schedule.misfires_coalesced":
            count = _payload(event).get("count")
            if count != path.skip_instants:
                found.append(
                    Violation("materialize.coalesced", f"count {count}, {path.skip_instants} due")
                )
    outbox = added["schedule_outbox"]
    if len(outbox) != 1 or (occurrences and outbox[0]["occurrence_id"] != occurrences[0]["id"]):
        found.append(Violation("materialize.outbox", f"{len(outbox)} outbox rows"))
    schedule = next(r for r in now["schedules"] if r["id"] == sid)
    if schedule["next_fire_at"] is None or schedule["next_fire_at"] <= nominal:
        found.append(Violation("materialize.advanced", "next_fire_at did not advance"))
    before = next(r for r in baseline["schedules"] if r["id"] == sid)
    if schedule["consecutive_failures"] != before["consecutive_failures"] + 1:
        found.append(
            Violation("materialize.advanced", f"failures {schedule['consecutive_failures']}")
        )
    return found


async def quiet(world: ScenarioWorld, view: ExecutionView) -> None:
    """Record what survived the faults, then retry once without them."""
    world.vars["after_crash"] = await rows(world)
    storage = open_storage(world.url, pool_size=2)
    try:
        retry = build_materializer(storage, world.clock, world.ids.fork("retry"), NullProbe())
        world.vars["retry"] = await retry.materialize(world.vars["schedule_id"])
    finally:
        await storage.close()


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    path: Path = world.vars["path"]
    sid, nominal = world.vars["schedule_id"], world.vars["nominal"]
    baseline = world.vars["baseline"]
    before = world.vars["after_crash"]
    fault_steps = [t.step for t, _ in view.faults_fired]
    committed = not fault_steps or fault_steps[0] == m.STEP_COMMITTED
    found: list[Violation] = []
    if committed:
        found += [
            Violation(v.invariant, "after commit: " + v.message, v.details)
            for v in decision_ledger(before, baseline, path, sid, nominal)
        ]
    else:
        survivors = {t: len(before[t]) - len(baseline[t]) for t in DECISION_TABLES}
        left = {t: n for t, n in survivors.items() if n}
        if left:
            found.append(
                Violation("materialize.atomic", f"crash at {fault_steps[0]} left rows: {left}")
            )
        if before["schedules"] != baseline["schedules"]:
            found.append(
                Violation("materialize.atomic", f"crash at {fault_steps[0]}: schedule changed")
            )
    result: MaterializeResult = world.vars["retry"]
    expected = "not_due" if committed else "decided"
    if result.status.value != expected or result.occurrence is None:
        found.append(
            Violation("materialize.retry", f"retry returned {result.status.value}, not {expected}")
        )
    final = await rows(world)
    found += decision_ledger(final, baseline, path, sid, nominal)
    stored = [r for r in final["schedule_occurrences"] if r not in baseline["schedule_occurrences"]]
    returned = None if result.occurrence is None else result.occurrence.id
    if returned is not None and len(stored) == 1 and stored[0]["id"] != returned:
        found.append(Violation("materialize.retry", "retry returned another occurrence"))
    return found


def _scenario(path: Path) -> Scenario:
    return register(
        dataclasses.replace(
            ATOMIC,
            name=f"materialize.atomic_{path.name}",
            summary=f"crash after every write of a {path.disposition} decision; retry recovers",
            setup=_setup(path),
            quiet=quiet,
            check=check,
            steps=NO_RUN_STEPS,
            fault_steps=NO_RUN_STEPS,
        )
    )


PATH_SCENARIOS: dict[str, Scenario] = {path.name: _scenario(path) for path in PATHS}
