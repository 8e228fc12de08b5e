"""The model-tool gate checks as functions over a ``ToolWorld`` (not a test module).

Each ``*_check(world)`` drives scripted model turns through the ordinary pipeline on
PostgreSQL and returns a ``Verdict``: the problems it found (empty: the gate's
statement held) and the evidence it measured. The gate checks in
``test_model_*.py`` assert no problems; the tests of the tests run the same
functions on worlds with a plausible wrong implementation swapped in and assert that
problems are found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from gates.checks.service_support import AGENT_ID, AGENT_VERSION, LIMITS, POLICY, principal
from gates.checks.tool_support import WHO, ToolWorld
from scheduling.domain.cadence import format_instant
from scheduling.runtime.tool_pipeline import ApprovalRequest, ToolResult, ToolStatus

Row = dict[str, Any]


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    def expect(self, condition: bool, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return condition


def expect_code(v: Verdict, result: ToolResult, code: str, label: str) -> None:
    v.expect(
        result.status is not ToolStatus.SUCCEEDED and result.reason_code == code,
        f"{label}: expected failure {code}, got {result.status} {result.reason_code}",
    )
    v.expect(not result.retryable, f"{label}: {code} must not be retryable")


def changed_tables(before: dict[str, list[Row]], after: dict[str, list[Row]]) -> list[str]:
    return sorted(t for t in before if before[t] != after[t])


async def unchanged(world: ToolWorld, v: Verdict, before: dict[str, list[Row]], label: str) -> None:
    changed = changed_tables(before, await world.snapshot())
    v.expect(not changed, f"{label}: changed {changed}")


def derived_limits() -> dict[str, Any]:
    """The spec's derivation for the seeded agent (LIMITS) under the gate ceilings, by hand:
    steps/model/tool calls min(20, 100) = 20; cost min(2, 10) = 2; reserves 2, 2, 1 are
    each strictly below their totals, so all kept."""
    return {
        "max_steps": min(LIMITS.max_steps, 100),
        "max_model_calls": min(LIMITS.max_model_calls, 100),
        "max_tool_calls": min(LIMITS.max_tool_calls, 100),
        "max_cost": "2",
        "reserve_steps": 2,
        "reserve_model_calls": 2,
        "reserve_cost": "1",
    }


def pinned_problems(definition: dict[str, Any], label: str) -> list[str]:
    """The revision pins the active agent and its policy, delegates no scope and carries
    the derived bounds (timeout min(300, 3600), grace min(3600, 7200), two failures)."""
    want = {
        "agent_id": str(AGENT_ID),
        "agent_version": AGENT_VERSION,
        "policy_profile": POLICY,
        "requested_scopes": [],
        "run_timeout_seconds": 300,
        "misfire_grace_seconds": 3600,
        "max_consecutive_failures": 2,
    }
    problems = [
        f"{label}: {k} is {definition.get(k)!r}, expected {w!r}"
        for k, w in want.items()
        if definition.get(k) != w
    ]
    limits = {k: str(v) if k.endswith("cost") else v for k, v in definition["limits"].items()}
    expected_limits = {k: str(v) for k, v in derived_limits().items()}
    if {k: str(v) for k, v in limits.items()} != expected_limits:
        problems.append(f"{label}: limits {limits} are not the derived {expected_limits}")
    if definition.get("browser_profile_id") is not None:
        problems.append(f"{label}: a browser profile is bound")
    return problems


# ---------------------------------------------------------------------- M19


async def create_happy_path_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    at = world.later(days=1)
    seen: dict[str, Any] = {}

    async def during_approval(request: ApprovalRequest) -> None:
        seen["schedules_while_waiting"] = (await world.counts())["schedules"]

    world.approvals.on_request = during_approval
    args = {"title": "Ball for Marzipan", "instruction": "Remind me to throw the ball.", "at": at}
    result = await world.call("schedule.create", args, "create-1")
    world.approvals.on_request = None
    if not v.expect(result.ok, f"create failed: {result.reason_code} {result.details}"):
        return v
    assert result.output is not None
    v.expect(len(world.approvals.requests) == 1, "not exactly one approval request")
    v.expect(seen.get("schedules_while_waiting") == 0, "a schedule existed before approval")
    exact = format_instant(datetime.fromisoformat(at))
    view = world.approvals.requests[0].view
    want_view = {
        **{k: args[k] for k in ("title", "instruction")},
        "at": exact,
        "requested_scopes": [],
    }
    v.expect(view == want_view, f"approval view {view} is not {want_view}")
    rows = await world.sql("SELECT * FROM schedules")
    v.expect(len(rows) == 1, f"{len(rows)} schedules persisted")
    sid = result.output["schedule_id"]
    row = await world.schedule(sid)
    v.expect(row["state"] == "ACTIVE", f"state {row['state']}")
    v.expect(row["next_fire_at"] == datetime.fromisoformat(at), "next_fire_at is not the instant")
    revisions = await world.revisions(sid)
    v.expect(len(revisions) == 1, f"{len(revisions)} revisions")
    definition = revisions[0]["definition"]
    v.expect(definition["cadence"] == {"kind": "ONCE", "at": exact}, "not a one-time definition")
    v.problems += pinned_problems(definition, "create")
    want_out = {"schedule_id": sid, "state": "ACTIVE", "next_fire_at": exact, "replayed": False}
    v.expect(result.output == want_out, f"output {result.output}")
    v.expect(await world.events(sid) == ["schedule.created"], "events are not one creation")
    v.evidence.update(approval_view=view, definition=definition, output=result.output)
    return v


async def create_authorization_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    before = await world.snapshot()
    cases = {
        "no schedule.write": principal(
            WHO.principal_id, scopes={"schedule.read", "schedule.cancel"}
        ),
        "no scopes": principal(WHO.principal_id, scopes=()),
    }
    for label, who in cases.items():
        args = {
            "title": "Briefing",
            "instruction": "Summarize the news.",
            "at": world.later(hours=2),
        }
        result = await world.call(
            "schedule.create", args, f"auth-{label.replace(' ', '-')}", who=who
        )
        v.expect(result.status is ToolStatus.DENIED, f"{label}: status {result.status}")
        v.expect(
            result.reason_code == "schedule.auth.scope_required", f"{label}: {result.reason_code}"
        )
    v.expect(not world.approvals.requests, "a denied call reached approval")
    await unchanged(world, v, before, "denied create")
    v.evidence["denied"] = sorted(cases)
    return v


async def create_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    before = await world.snapshot()
    now = world.clock.now()
    no_future, naive = "schedule.validation.no_future_occurrence", "schedule.cadence.naive_instant"
    cases = {
        "past": ((now - timedelta(minutes=1)).isoformat(), no_future),
        "now": (now.isoformat(), no_future),
        "naive": ((now + timedelta(days=1)).replace(tzinfo=None).isoformat(), naive),
        "not an instant": ("tomorrow at nine", "schedule.cadence.invalid_instant"),
    }
    for label, (at, code) in cases.items():
        args = {"title": "Reminder", "instruction": "Stretch.", "at": at}
        expect_code(
            v,
            await world.call("schedule.create", args, f"val-{label.replace(' ', '-')}"),
            code,
            label,
        )
    v.expect(not world.approvals.requests, "an invalid instant reached approval")
    await unchanged(world, v, before, "invalid create")
    v.evidence["rejected"] = {k: c for k, (_, c) in cases.items()}
    return v


async def create_retry_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    args = {"title": "Water plants", "instruction": "Remind me.", "at": world.later(days=2)}
    first = await world.call("schedule.create", args, "retry-1")
    if not v.expect(first.ok, f"first create failed: {first.reason_code}"):
        return v
    assert first.output is not None
    world.clock.advance(30)
    reordered = dict(reversed(list(args.items())))
    again = await world.call("schedule.create", reordered, "retry-1")
    v.expect(again.ok and again.replayed, f"replay: {again.status} replayed={again.replayed}")
    v.expect(
        again.output is not None and again.output["schedule_id"] == first.output["schedule_id"],
        "the replay names another schedule",
    )
    v.expect(again.output is not None and again.output.get("replayed") is True, "replayed flag")
    counts = await world.counts()
    v.expect(counts["schedules"] == 1, f"{counts['schedules']} schedules after replay")
    v.expect(len(world.approvals.requests) == 1, "the replay asked for approval again")
    sid = first.output["schedule_id"]
    v.expect(await world.events(sid) == ["schedule.created"], "a second creation event")
    # Crash after the effect committed, before the tool recorded its result.
    crash_args = {
        "title": "Call mum",
        "instruction": "Remind me to call.",
        "at": world.later(days=3),
    }
    crashed = await crash_after_effect(world, "schedule.create", crash_args, "retry-crash")
    recovered = await world.call("schedule.create", crash_args, "retry-crash")
    v.expect(recovered.ok, f"recovery failed: {recovered.reason_code}")
    v.expect(
        recovered.output is not None and recovered.output["schedule_id"] == crashed,
        "recovery created another schedule",
    )
    v.expect(recovered.output is not None and recovered.output["replayed"] is True, "not replayed")
    v.expect((await world.counts())["schedules"] == 2, "recovery duplicated the schedule")
    v.evidence.update(schedules=2, approvals=len(world.approvals.requests))
    return v


class CrashAfterEffect(Exception):
    """The simulated process death between the effect's commit and the tool's record."""


async def crash_after_effect(
    world: ToolWorld, tool: str, args: dict[str, Any], key: str
) -> str | None:
    """Run one call whose ledger ``finish`` dies; returns the schedule id the effect wrote."""
    ledger = world.pipeline.governance.ledger if world.pipeline.governance else None
    assert ledger is not None
    original = ledger.finish

    async def dying(*a: Any, **k: Any) -> None:
        raise CrashAfterEffect

    ledger.finish = dying  # type: ignore[method-assign]
    try:
        await world.call(tool, args, key)
    except CrashAfterEffect:
        pass
    finally:
        ledger.finish = original  # type: ignore[method-assign]
    rows = await world.sql("SELECT id FROM schedules ORDER BY created_at DESC, id LIMIT 1")
    return str(rows[0]["id"]) if rows else None


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def uuid(value: Any) -> UUID:
    return UUID(str(value))
