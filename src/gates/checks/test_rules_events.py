"""rule.events.audit_payloads on PostgreSQL: every schedule event carries what the spec
lists, and each value is the ledger's.

One world lives through every event a schedule emits: created, paused, resumed, updated
(revision 2, another title and instruction), an occurrence materialized, one skipped for
overlap, one failed for authorization, a downtime that ends MISSED with a coalescing
event and the failure-limit auto-pause, resumed, one failed for configuration,
cancelled; and a one-time schedule materialized and completed. Then every process event
is checked against expectations written here from the spec's words, not the domain's
tables: its exact key set; the common values equal to the event row and the owner;
occurrence events naming an occurrence of the same schedule whose revision, nominal
instant and disposition they repeat, a materialized one with that occurrence's session
and run, the others with its reason; state events with the transition their type names
and the revision the schedule was at (1 before the update, 2 from it on); pause and
resume with the row's next_fire_at before and after; a coalescing event whose count
spans its first and last instant, all before the instant decided with it; every
occurrence audited exactly once; and no title or instruction in any payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import AGENT_ID, AGENT_VERSION, POLICY, START, definition

pytestmark = pytest.mark.postgres

RULE = "rule.events.audit_payloads"

COMMON = {"schedule_id", "revision", "tenant_id", "principal_id", "actor", "occurred_at"}
STATES = {"previous_state", "next_state"}
FIRE = {"previous_next_fire_at", "next_fire_at"}
OCCURRENCE = {"occurrence_id", "nominal_fire_at"}
KEYS: dict[str, set[str]] = {
    "schedule.created": COMMON | STATES,
    "schedule.updated": COMMON | STATES,
    "schedule.paused": COMMON | STATES | FIRE,
    "schedule.resumed": COMMON | STATES | FIRE,
    "schedule.cancelled": COMMON | STATES,
    "schedule.completed": COMMON | STATES,
    "schedule.auto_paused": COMMON | STATES,
    "schedule.occurrence.materialized": COMMON | OCCURRENCE | {"session_id", "run_id"},
    "schedule.occurrence.missed": COMMON | OCCURRENCE | {"reason_code"},
    "schedule.occurrence.skipped_overlap": COMMON | OCCURRENCE | {"reason_code"},
    "schedule.occurrence.authorization_failed": COMMON | OCCURRENCE | {"reason_code"},
    "schedule.occurrence.configuration_failed": COMMON | OCCURRENCE | {"reason_code"},
    "schedule.misfires_coalesced": COMMON | {"first_nominal_at", "last_nominal_at", "count"},
    "schedule.next_fire_repaired": COMMON | FIRE,
}
TRANSITIONS: dict[str, tuple[set[str | None], str]] = {
    "schedule.created": ({None}, "ACTIVE"),
    "schedule.paused": ({"ACTIVE"}, "PAUSED"),
    "schedule.resumed": ({"PAUSED"}, "ACTIVE"),
    "schedule.cancelled": ({"ACTIVE", "PAUSED"}, "CANCELLED"),
    "schedule.completed": ({"ACTIVE"}, "COMPLETED"),
    "schedule.auto_paused": ({"ACTIVE"}, "PAUSED"),
}
TITLE = "Quarterly plant census"
INSTRUCTION = "Count the ficus leaves and report the number to me."
RETITLED = "Quarterly fern census"
REWORDED = "Count the fern fronds and report the number to me."


def _text(value: Any) -> str | None:
    if isinstance(value, datetime):
        return format_instant(value)
    return None if value is None else str(value)


@dataclass
class Story:
    """The schedules of the story and what it saw them hold between the events."""

    daily: UUID
    once: UUID
    updated_at: datetime
    """When the daily schedule's revision 2 was written (state events before it name 1)."""
    fires: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    """(pause or resume, next_fire_at before, next_fire_at after), read from the row."""


async def live_through_every_event(h: MaterializeWorld) -> Story:
    """The story in the module docstring."""
    worker = h.worker(h.materializer())
    service = h.world.service
    daily = await h.create(title=TITLE, instruction=INSTRUCTION, key="daily")
    once_at = await h.next_fire(daily) - timedelta(seconds=1)
    once = await h.create(
        title=TITLE, instruction=INSTRUCTION, key="once", cadence={"kind": "ONCE", "at": once_at}
    )

    async def revision() -> int:
        return int((await h.schedule(daily))["current_revision"])

    async def fire(after: timedelta = timedelta(seconds=3)) -> None:
        h.clock.advance_to(await h.next_fire(daily) + after)
        assert (await worker.run_once()).errors == {}

    async def policy(profile: str) -> None:
        await h.sql(
            "UPDATE agent_versions SET policy_profile = :p WHERE agent_id = :a AND version = :v",
            p=profile,
            a=AGENT_ID,
            v=AGENT_VERSION,
        )

    fires: list[tuple[str, str | None, str | None]] = []

    async def next_fire() -> str | None:
        return _text((await h.schedule(daily))["next_fire_at"])

    async def transition(kind: str) -> None:
        h.clock.advance(1)  # one event per instant: the ledger's order is the story's
        before = await next_fire()
        if kind == "schedule.paused":
            await service.pause(WHO, daily, await revision())
        else:
            await service.resume(WHO, daily, await revision())
        fires.append((kind, before, await next_fire()))

    await transition("schedule.paused")
    await transition("schedule.resumed")
    # Revision 2 (another title and instruction): every later event names it.
    h.clock.advance(60)
    updated_at = h.clock.now()
    await service.update(
        WHO, daily, await revision(), definition(title=RETITLED, instruction=REWORDED)
    )
    await fire()  # MATERIALIZED; the one-time schedule too, then COMPLETED
    await fire()  # the run is still QUEUED: SKIPPED_OVERLAP
    await h.sql("UPDATE runs SET status = 'COMPLETED', finished_at = :t", t=h.clock.now())
    await h.set_principal(enabled=False)
    await fire()  # AUTHORIZATION_FAILED (one failure)
    await h.set_principal()
    # Four days down, past the grace: MISSED with three coalesced; the second failure
    # reaches max_consecutive_failures (2): auto-paused.
    await fire(timedelta(days=3, hours=1))
    assert (await h.schedule(daily))["state"] == "PAUSED"
    await transition("schedule.resumed")
    await policy("rotated")
    await fire()  # CONFIGURATION_FAILED
    await policy(POLICY)
    await service.cancel(WHO, daily, await revision())
    return Story(daily, once, updated_at, fires)


OWNER_KINDS = {
    "schedule.created",
    "schedule.updated",
    "schedule.paused",
    "schedule.resumed",
    "schedule.cancelled",
}
"""The events of the owner's own commands (every other one is the scheduler's)."""
STATE_KINDS = set(KEYS) - {k for k, keys in KEYS.items() if keys >= OCCURRENCE}
"""Events that are not an occurrence's: each names the revision the schedule was at."""


def payload_problems(
    event: dict[str, Any],
    occurrences: dict[str, dict[str, Any]],
    current: dict[str, int],
    revision_at: Any,
) -> list[str]:
    kind, payload = event["event_type"], event["payload"]
    label = f"{kind} {event['id']}"
    if kind not in KEYS:
        return [f"{label}: not a schedule event type"]
    problems = []
    if set(payload) != KEYS[kind]:
        problems.append(f"{label}: keys {sorted(payload)} are not {sorted(KEYS[kind])}")
        return problems
    common = {
        "schedule_id": str(event["schedule_id"]),
        "tenant_id": WHO.tenant_id,
        "principal_id": WHO.principal_id,
        "actor": event["actor"],
        "occurred_at": format_instant(event["occurred_at"]),
    }
    problems += [
        f"{label}: {k} is {payload[k]!r}, not {v!r}" for k, v in common.items() if payload[k] != v
    ]
    if event["tenant_id"] != WHO.tenant_id or event["principal_id"] != WHO.principal_id:
        problems.append(f"{label}: the row's owner is not the schedule's")
    revision = payload["revision"]
    if not isinstance(revision, int) or not 1 <= revision <= current[str(event["schedule_id"])]:
        problems.append(f"{label}: revision {revision!r}")
    elif kind in STATE_KINDS and revision != revision_at(event):
        problems.append(f"{label}: revision {revision}, the schedule was at {revision_at(event)}")
    if KEYS[kind] >= OCCURRENCE:
        occurrence = occurrences.get(str(payload["occurrence_id"]))
        if occurrence is None:
            return [*problems, f"{label}: names no occurrence"]
        disposition = kind.removeprefix("schedule.occurrence.").upper()
        expected = {
            "schedule_id": str(occurrence["schedule_id"]),
            "revision": occurrence["schedule_revision"],
            "nominal_fire_at": format_instant(occurrence["nominal_fire_at"]),
        }
        if disposition == "MATERIALIZED":
            expected["session_id"] = _text(occurrence["session_id"])
            expected["run_id"] = _text(occurrence["run_id"])
            if occurrence["run_id"] is None or occurrence["session_id"] is None:
                problems.append(f"{label}: the occurrence has no run")
        else:
            expected["reason_code"] = occurrence["reason_code"]
        problems += [
            f"{label}: {k} is {payload[k]!r}, the occurrence's is {v!r}"
            for k, v in expected.items()
            if payload[k] != v
        ]
        if occurrence["disposition"] != disposition:
            problems.append(f"{label}: the occurrence is {occurrence['disposition']}")
    if kind in TRANSITIONS:
        before, after = TRANSITIONS[kind]
        if payload["previous_state"] not in before or payload["next_state"] != after:
            problems.append(
                f"{label}: {payload['previous_state']} -> {payload['next_state']} for {kind}"
            )
    text = repr(payload)
    if any(words in text for words in (TITLE, INSTRUCTION, RETITLED, REWORDED, "ficus", "fern")):
        problems.append(f"{label}: the title or instruction is in the payload")
    return problems


def coalescing_problems(events: list[dict[str, Any]], daily_step: timedelta) -> list[str]:
    problems = []
    for event in events:
        if event["event_type"] != "schedule.misfires_coalesced":
            continue
        p = event["payload"]
        first, last = (
            datetime.fromisoformat(p["first_nominal_at"]),
            datetime.fromisoformat(p["last_nominal_at"]),
        )
        span = round((last - first) / daily_step) + 1
        if not (isinstance(p["count"], int) and p["count"] == span and first <= last):
            problems.append(f"coalesced {first}..{last} count {p['count']} (spans {span})")
        decided = [
            e
            for e in events
            if e["event_type"].startswith("schedule.occurrence.")
            and e["occurred_at"] == event["occurred_at"]
        ]
        if len(decided) != 1:
            problems.append(f"coalescing event beside {len(decided)} decisions")
        elif datetime.fromisoformat(decided[0]["payload"]["nominal_fire_at"]) <= last:
            problems.append("the coalesced instants are not all before the decided one")
    return problems


@pytest.mark.rule(RULE)
async def test_every_event_carries_the_spec_fields_with_the_ledgers_values(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        story = await live_through_every_event(h)
        daily, once = story.daily, story.once
        events = await h.sql("SELECT * FROM process_events ORDER BY occurred_at, id")
        occurrences = {str(o["id"]): o for o in await h.sql("SELECT * FROM schedule_occurrences")}
        schedules = await h.sql("SELECT id, current_revision FROM schedules")
        current = {str(s["id"]): s["current_revision"] for s in schedules}

        def revision_at(event: dict[str, Any]) -> int:
            later = event["schedule_id"] == daily and event["occurred_at"] >= story.updated_at
            return 2 if later else 1

        problems = [
            p for e in events for p in payload_problems(e, occurrences, current, revision_at)
        ]
        # Pause and resume carry the row's next_fire_at before and after the transition.
        moved = [
            (e["event_type"], e["payload"]["previous_next_fire_at"], e["payload"]["next_fire_at"])
            for e in events
            if e["event_type"] in ("schedule.paused", "schedule.resumed")
        ]
        if moved != story.fires:
            problems.append(f"pause/resume fire instants {moved} != the rows' {story.fires}")
        problems += coalescing_problems(events, timedelta(days=1))
        audited = [
            e["payload"]["occurrence_id"]
            for e in events
            if e["event_type"].startswith("schedule.occurrence.")
        ]
        if sorted(audited) != sorted(occurrences):
            problems.append(f"occurrences audited {sorted(audited)} != {sorted(occurrences)}")
        # The actor names who acted: the owner for its own commands, never for the
        # scheduler's decisions (an actor naming the tenant, or one fixed actor for
        # every event, passes the equality with the row above).
        for e in events:
            by_owner = e["event_type"] in OWNER_KINDS
            if (WHO.principal_id in e["actor"]) != by_owner:
                problems.append(f"{e['event_type']}: actor {e['actor']!r}")
        kinds = sorted({e["event_type"] for e in events})
        missing = set(KEYS) - set(kinds) - {"schedule.next_fire_repaired"}
        assert not missing, f"the story did not emit {sorted(missing)}"
        assert problems == [], problems
        assert {str(e["schedule_id"]) for e in events} == {str(daily), str(once)}
        gate_evidence.record("event_types", kinds)
        gate_evidence.record("events", len(events))
        gate_evidence.record("occurrences", len(occurrences))
    finally:
        await h.close()


def test_the_story_starts_where_the_world_does() -> None:
    """The one-time instant and the daily cadence's first days stay clear of DST (the
    coalescing count is read in whole days)."""
    assert definition().cadence["timezone"] == "Europe/Paris"
    assert START.month == 3
    assert START.day < 20
