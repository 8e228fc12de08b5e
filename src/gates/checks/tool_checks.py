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

from gates.checks.tool_support import OTHER, WHO, ToolWorld
from scheduling.domain.cadence import format_instant
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.runtime.tool_pipeline import (
    ApprovalRequest,
    AskUser,
    Proposal,
    ProposedCall,
    ScriptedModel,
    ToolResult,
    ToolStatus,
)
from scheduling.service.values import ScheduleDefinition, SchedulePatch
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    LIMITS,
    POLICY,
    definition,
    principal,
)

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
    view = last_view(world)
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


def last_view(world: ToolWorld) -> dict[str, Any]:
    """The view of the latest approval request ({} when none was asked)."""
    return world.approvals.requests[-1].view if world.approvals.requests else {}


def out_id(result: ToolResult) -> str | None:
    """The schedule id a successful result names (None otherwise)."""
    return None if result.output is None else result.output.get("schedule_id")


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def uuid(value: Any) -> UUID:
    return UUID(str(value))


# ---------------------------------------------------------------------- M20

RECURRING: dict[str, dict[str, Any]] = {
    "daily": {"kind": "DAILY", "local_time": "07:30", "timezone": "Europe/Paris"},
    "weekly": {
        "kind": "WEEKLY",
        "local_time": "08:00:00",
        "weekdays": [5, 1, 3],
        "timezone": "America/Los_Angeles",
    },
    "monthly": {
        "kind": "MONTHLY",
        "local_time": "18:00:00",
        "days_of_month": [],
        "last_day": True,
        "timezone": "America/Los_Angeles",
    },
    "yearly": {
        "kind": "YEARLY",
        "local_time": "09:00",
        "dates": [{"month": 2, "day": 29}, {"month": 12, "day": 31}],
        "timezone": "Asia/Tokyo",
    },
}
# The canonical form of each, written out by hand (the domain's canonicalization:
# HH:MM:SS, sorted unique selectors, month-end flag explicit).
CANONICAL = {
    "daily": {"kind": "DAILY", "local_time": "07:30:00", "timezone": "Europe/Paris"},
    "weekly": {
        "kind": "WEEKLY",
        "local_time": "08:00:00",
        "weekdays": [1, 3, 5],
        "timezone": "America/Los_Angeles",
    },
    "monthly": {
        "kind": "MONTHLY",
        "local_time": "18:00:00",
        "days_of_month": [],
        "last_day": True,
        "timezone": "America/Los_Angeles",
    },
    "yearly": {
        "kind": "YEARLY",
        "local_time": "09:00:00",
        "dates": [{"month": 2, "day": 29}, {"month": 12, "day": 31}],
        "timezone": "Asia/Tokyo",
    },
}
# First firing strictly after START (2026-03-02T08:00Z), worked out by hand:
# Paris is UTC+1 until 29 March -> 03-03 06:30Z (07:30 on 03-02 is already past);
# Los Angeles is PST (UTC-8) until 8 March: Monday 03-02 08:00 PST = 16:00Z;
# 31 March 2026 18:00 PDT (UTC-7) = 04-01 01:00Z; 2026 is not a leap year, so
# 31 December 09:00 JST (UTC+9) = 12-31 00:00Z.
FIRST_FIRING = {
    "daily": "2026-03-03T06:30:00Z",
    "weekly": "2026-03-02T16:00:00Z",
    "monthly": "2026-04-01T01:00:00Z",
    "yearly": "2026-12-31T00:00:00Z",
}


async def create_recurring_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    for label, cadence in RECURRING.items():
        args = {
            "title": f"{label} review",
            "instruction": f"Do the {label} review.",
            "cadence": cadence,
        }
        result = await world.call("schedule.create", args, f"rec-{label}")
        if not v.expect(result.ok, f"{label}: {result.reason_code} {result.details}"):
            continue
        assert result.output is not None
        view = last_view(world)
        want_view = {
            "title": args["title"],
            "instruction": args["instruction"],
            "cadence": CANONICAL[label],
            "requested_scopes": [],
        }
        v.expect(view == want_view, f"{label}: approval view {view}")
        v.expect(
            result.output["next_fire_at"] == FIRST_FIRING[label],
            f"{label}: next firing {result.output['next_fire_at']}",
        )
        revisions = await world.revisions(result.output["schedule_id"])
        v.expect(len(revisions) == 1, f"{label}: {len(revisions)} revisions")
        definition = revisions[0]["definition"]
        v.expect(
            definition["cadence"] == CANONICAL[label], f"{label}: cadence {definition['cadence']}"
        )
        v.problems += pinned_problems(definition, label)
    v.expect(len(world.approvals.requests) == len(RECURRING), "not one approval per call")
    v.expect((await world.counts())["schedules"] == len(RECURRING), "not one schedule per call")
    v.evidence.update(kinds=sorted(RECURRING), first_firings=FIRST_FIRING)
    return v


def _cal(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "local_time": "09:00", "timezone": "UTC", **fields}


_IMPOSSIBLE, _BAD_ARGS = (
    "schedule.cadence.yearly_date_impossible",
    "schedule.tool.invalid_arguments",
)
INVALID_CALENDARS: dict[str, tuple[dict[str, Any], str]] = {
    "february 30": (_cal("YEARLY", dates=[{"month": 2, "day": 30}]), _IMPOSSIBLE),
    "april 31": (_cal("YEARLY", dates=[{"month": 4, "day": 31}]), _IMPOSSIBLE),
    "duplicate date": (
        _cal("YEARLY", dates=[{"month": 1, "day": 1}, {"month": 1, "day": 1}]),
        "schedule.cadence.yearly_date_duplicate",
    ),
    "duplicate weekday": (_cal("WEEKLY", weekdays=[2, 2]), "schedule.cadence.weekday_duplicate"),
    "empty month": (
        _cal("MONTHLY", days_of_month=[], last_day=False),
        "schedule.cadence.monthly_selector_empty",
    ),
    "duplicate day": (_cal("MONTHLY", days_of_month=[5, 5]), "schedule.cadence.day_duplicate"),
    "unknown zone": (
        {"kind": "DAILY", "local_time": "09:00", "timezone": "Mars/Olympus"},
        "schedule.cadence.invalid_timezone",
    ),
    "weekday 8": (_cal("WEEKLY", weekdays=[8]), _BAD_ARGS),
    "day 32": (_cal("MONTHLY", days_of_month=[32]), _BAD_ARGS),
    "cron text": ({"kind": "CRON", "expression": "0 9 * * *"}, _BAD_ARGS),
    "interval": (_cal("DAILY", every=2), _BAD_ARGS),
}


async def create_recurring_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    before = await world.snapshot()
    daily = RECURRING["daily"]
    shapes: dict[str, dict[str, Any]] = {
        "both": {"title": "t", "instruction": "i", "at": world.later(days=1), "cadence": daily},
        "neither": {"title": "t", "instruction": "i"},
    }
    for label, args in shapes.items():
        expect_code(
            v,
            await world.call("schedule.create", args, f"shape-{label}"),
            "schedule.tool.invalid_arguments",
            label,
        )
    for label, (cadence, code) in INVALID_CALENDARS.items():
        args = {"title": "t", "instruction": "i", "cadence": cadence}
        key = "cal-" + label.replace(" ", "-")
        expect_code(v, await world.call("schedule.create", args, key), code, label)
    v.expect(not world.approvals.requests, "an invalid calendar reached approval")
    await unchanged(world, v, before, "invalid recurring create")
    args = {
        "title": "Weekly sync",
        "instruction": "Prepare the sync.",
        "cadence": RECURRING["weekly"],
    }
    first = await world.call("schedule.create", args, "rec-key")
    v.expect(first.ok, f"weekly create failed: {first.reason_code}")
    after_first = await world.snapshot()
    changed = {**args, "cadence": {**RECURRING["weekly"], "weekdays": [2]}}
    reused = await world.call("schedule.create", changed, "rec-key")
    expect_code(v, reused, "schedule.idempotency.key_reused", "key reused with other recurrence")
    await unchanged(world, v, after_first, "key reuse")
    again = await world.call("schedule.create", args, "rec-key")
    v.expect(again.ok and again.replayed, "identical retry did not replay")
    v.expect(out_id(again) is not None and out_id(again) == out_id(first), "other schedule")
    await unchanged(world, v, after_first, "identical retry")
    v.evidence.update(rejected={k: c for k, (_, c) in INVALID_CALENDARS.items()})
    return v


# ---------------------------------------------------------------------- M23 helpers

SCHEDULE_TABLES = ("schedules", "schedule_revisions", "schedule_occurrences", "process_events")
# The spec's summary allow-list, transcribed ("Model-callable lifecycle").
SUMMARY_ALLOW_LIST = frozenset(
    {"schedule_id", "title", "state", "pause_reason", "current_revision", "next_fire_at", "cadence"}
)
MUTATION_OUTPUT = frozenset(
    {"schedule_id", "current_revision", "state", "pause_reason", "next_fire_at"}
)
DAILY_PARIS = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}


async def schedule_rows(world: ToolWorld) -> dict[str, list[Row]]:
    snap = await world.snapshot()
    return {t: snap[t] for t in SCHEDULE_TABLES}


async def create_via_tool(
    world: ToolWorld, title: str, key: str, cadence: dict[str, Any] | None = None, **extra: Any
) -> str:
    args: dict[str, Any] = {"title": title, "instruction": f"Handle {title}.", **extra}
    if "at" not in extra:
        args["cadence"] = cadence or DAILY_PARIS
    result = await world.call("schedule.create", args, key)
    assert result.ok, (result.reason_code, result.details)
    assert result.output is not None
    return str(result.output["schedule_id"])


def resolve_then(title: str, tool: str, key: str, **patch: Any) -> ScriptedModel:
    """A model that lists, resolves ``title`` to exactly one summary, then proposes
    ``tool`` on it with the summary's revision; it asks the user on zero or several."""

    def model(results: list[ToolResult]) -> Proposal:
        if not results:
            return ProposedCall("schedule.list", {}, f"{key}-list")
        if len(results) > 1:
            return None
        listed = results[0].output or {}
        matches = [i for i in listed.get("items", []) if i["title"] == title]
        if len(matches) != 1:
            return AskUser(f"{len(matches)} schedules are called {title!r}: which one?")
        item = matches[0]
        args = {"schedule_id": item["schedule_id"], "expected_revision": item["current_revision"]}
        return ProposedCall(tool, {**args, **patch}, key)

    return model


# ---------------------------------------------------------------------- M23 lifecycle

ALL_DATES = [
    {"month": m, "day": d}
    for m in range(1, 13)
    for d in range(1, 32)
    if d <= (29 if m == 2 else 30 if m in (4, 6, 9, 11) else 31)
]
DISCOVERY_COUNT = 55  # more than one page of fifty


async def lifecycle_discovery_check(world: ToolWorld) -> Verdict:
    """Fifty-five schedules, each with the largest legal yearly selector (all 366
    month/day pairs, February 29 included), a maximal two-byte-character title and a
    marked instruction; another principal's schedules must stay invisible."""
    v = Verdict()
    v.expect(len(ALL_DATES) == 366, f"{len(ALL_DATES)} yearly pairs")
    yearly = {
        "kind": "YEARLY",
        "local_time": "23:59:59",
        "timezone": "America/North_Dakota/New_Salem",
        "dates": ALL_DATES,
    }
    markers = []
    for i in range(DISCOVERY_COUNT):
        marker = f"instruction-marker-{i:03d}"
        markers.append(marker)
        title = f"{i:03d} " + "\u03a9" * 196
        await world.service.create(WHO, f"seed-{i}", definition_for(title, marker, yearly))
        world.clock.advance(1)
    for i in range(2):
        await world.service.create(
            OTHER, f"other-{i}", definition_for(f"other {i}", "foreign", yearly)
        )
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    seen_ids: list[str] = []
    for _ in range(5):
        args: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        result = await world.call("schedule.list", args, f"list-{len(pages)}")
        if not v.expect(result.ok, f"list failed: {result.reason_code} {result.details}"):
            return v
        assert result.output is not None
        pages.append(result.output)
        seen_ids += [item["schedule_id"] for item in result.output["items"]]
        cursor = result.output["next_cursor"]
        if cursor is None:
            break
    sizes = [len(json.dumps(p, separators=(",", ":"), ensure_ascii=False).encode()) for p in pages]
    v.expect(
        [len(p["items"]) for p in pages] == [50, 5],
        f"page sizes {[len(p['items']) for p in pages]}",
    )
    v.expect(max(sizes) <= 524_288, f"a page of {max(sizes)} bytes exceeds 524,288")
    v.expect(len(set(seen_ids)) == len(seen_ids) == DISCOVERY_COUNT, "pages overlap or miss")
    own = {
        str(r["id"])
        for r in await world.sql(
            "SELECT id FROM schedules WHERE principal_id = :p", p=WHO.principal_id
        )
    }
    v.expect(set(seen_ids) == own, "the listing is not exactly the caller's schedules")
    text = json.dumps(pages, ensure_ascii=False)
    for item in (i for p in pages for i in p["items"]):
        v.expect(set(item) == SUMMARY_ALLOW_LIST, f"summary fields {sorted(item)}")
        v.expect(len(item["cadence"]["dates"]) == 366, "the yearly selector was cut")
        v.expect(isinstance(item["current_revision"], int), "no revision")
    leaked = [m for m in markers if m in text]
    v.expect(not leaked, f"instructions leaked: {leaked[:3]}")
    v.expect(WHO.principal_id not in text, "the principal identity appears in a summary")
    for key in (
        "instruction",
        "instruction_preview",
        "policy_profile",
        "requested_scopes",
        "limits",
        "agent_id",
        "agent_version",
        "principal_id",
        "tenant_id",
        "created_at",
        "updated_at",
        "run_timeout_seconds",
        "browser_profile_id",
    ):
        v.expect(f'"{key}"' not in text, f"{key!r} appears in a summary")
    first = pages[0]["next_cursor"] or ""
    v.expect(isinstance(first, str) and "updated_at" not in first, "cursor is not opaque text")
    for label, args, code in (
        ("limit 0", {"limit": 0}, "schedule.tool.invalid_arguments"),
        ("limit 51", {"limit": 51}, "schedule.tool.invalid_arguments"),
        ("extra field", {"state": "ACTIVE"}, "schedule.tool.invalid_arguments"),
        ("tampered cursor", {"cursor": first[:-2] + "xx"}, "schedule.page.invalid_cursor"),
        (
            "foreign cursor",
            {"cursor": "WyJzY2hlZHVsZXMiLCJ4IiwieSJd"},
            "schedule.page.invalid_cursor",
        ),
    ):
        expect_code(v, await world.call("schedule.list", args, f"bad-{label}"), code, label)
    small = await world.call("schedule.list", {"limit": 1}, "list-small")
    v.expect(small.ok and small.output is not None and len(small.output["items"]) == 1, "limit 1")
    v.expect(not world.approvals.requests, "a read asked for approval")
    v.evidence.update(page_bytes=sizes, ceiling=524_288, items=DISCOVERY_COUNT, yearly_pairs=366)
    return v


def definition_for(title: str, instruction: str, cadence: dict[str, Any]) -> ScheduleDefinition:
    return definition(title=title, instruction=instruction, cadence=cadence)


async def pause_resume_check(world: ToolWorld) -> Verdict:
    """Discover "Morning briefing" among others, pause it after one approval, let three
    days pass, resume it after one approval at the first strictly future 09:00 Paris."""
    v = Verdict()
    sid = await create_via_tool(world, "Morning briefing", "c-1")
    await create_via_tool(world, "Evening digest", "c-2")
    await create_via_tool(world, "Gym reminder", "c-3")
    await create_via_tool(world, "Gym reminder", "c-4")
    asked = len(world.approvals.requests)
    chat = world.conversation()
    ambiguous = await chat.play(resolve_then("Gym reminder", "schedule.pause", "p-gym"))
    v.expect(
        len(ambiguous) == 1 and bool(chat.questions), "an ambiguous reference was not asked about"
    )
    results = await chat.play(resolve_then("Morning briefing", "schedule.pause", "p-1"))
    v.expect([r.tool for r in results] == ["schedule.list", "schedule.pause"], "turns")
    paused = results[-1]
    v.expect(paused.ok, f"pause: {paused.reason_code}")
    v.expect(len(world.approvals.requests) == asked + 1, "pause is not exactly one approval")
    view = last_view(world)
    v.expect(
        view == {"action": "pause", "schedule_id": sid, "expected_revision": 1}, f"view {view}"
    )
    row = await world.schedule(sid)
    v.expect(row["state"] == "PAUSED" and row["next_fire_at"] is None, "not paused")
    v.expect(row["pause_reason"] == "user", f"pause reason {row['pause_reason']}")
    gyms = [r for r in await world.sql("SELECT * FROM schedules WHERE state <> 'ACTIVE'")]
    v.expect(len(gyms) == 1, "another schedule changed state")
    # START is 2026-03-02T08:00Z; three days and two hours later it is 11:00 in Paris
    # (UTC+1) on 5 March, so the first strictly future 09:00 is 6 March 08:00Z.
    world.clock.advance(3 * 86400 + 7200)
    resumed = (
        await world.conversation().play(resolve_then("Morning briefing", "schedule.resume", "r-1"))
    )[-1]
    v.expect(resumed.ok, f"resume: {resumed.reason_code}")
    v.expect(len(world.approvals.requests) == asked + 2, "resume is not exactly one approval")
    want_next = "2026-03-06T08:00:00Z"
    v.expect(
        resumed.output is not None and resumed.output.get("next_fire_at") == want_next,
        f"resumed output {resumed.output}",
    )
    v.expect(
        resumed.output is not None and set(resumed.output) == MUTATION_OUTPUT,
        "mutation output fields",
    )
    made = await world.materializer().materialize(uuid(sid))
    v.expect(made.status.value == "not_due", f"a backfill scan decided {made.status}")
    occ = await world.sql("SELECT * FROM schedule_occurrences WHERE schedule_id = :i", i=uuid(sid))
    v.expect(not occ, f"{len(occ)} occurrences backfilled")
    events = await world.events(sid)
    v.expect(events == ["schedule.created", "schedule.paused", "schedule.resumed"], f"{events}")
    v.evidence.update(resumed_next_fire_at=want_next, events=events, questions=chat.questions)
    return v


async def cancel_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    sid = await create_via_tool(world, "Daily digest", "c-1")
    fire = (await world.schedule(sid))["next_fire_at"]
    world.clock.advance_to(fire + timedelta(seconds=1))
    made = await world.materializer().materialize(uuid(sid))
    if not v.expect(made.run_id is not None, f"no run materialized: {made.status}"):
        return v
    run_before = await world.sql("SELECT * FROM runs WHERE id = :i", i=made.run_id)
    occ_before = await world.sql(
        "SELECT * FROM schedule_occurrences WHERE schedule_id = :i", i=uuid(sid)
    )
    result = (
        await world.conversation().play(resolve_then("Daily digest", "schedule.cancel", "x-1"))
    )[-1]
    v.expect(result.ok, f"cancel: {result.reason_code} {result.details}")
    view = last_view(world)
    v.expect(view["action"] == "cancel" and view["schedule_id"] == sid, f"view {view}")
    row = await world.schedule(sid)
    v.expect(row["state"] == "CANCELLED" and row["next_fire_at"] is None, "not cancelled")
    v.expect(
        await world.sql("SELECT * FROM runs WHERE id = :i", i=made.run_id) == run_before,
        "the materialized run changed",
    )
    v.expect(len(await world.revisions(sid)) == 1, "the record or its revision is gone")
    world.clock.advance(3 * 86400)
    later = await world.materializer().materialize(uuid(sid))
    v.expect(later.status.value == "not_due", f"a cancelled schedule decided {later.status}")
    occ_after = await world.sql(
        "SELECT * FROM schedule_occurrences WHERE schedule_id = :i", i=uuid(sid)
    )
    v.expect(occ_after == occ_before, "the occurrence ledger changed")
    v.expect((await world.events(sid)).count("schedule.cancelled") == 1, "not one cancel event")
    v.evidence.update(run_status=run_before[0]["status"], occurrences=len(occ_after))
    return v


async def lifecycle_authorization_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    a = await create_via_tool(world, "Alpha", "c-a")
    b = await create_via_tool(world, "Beta", "c-b")
    asked = len(world.approvals.requests)
    before = await world.snapshot()
    mutate = {"schedule_id": a, "expected_revision": 1}
    lacking = {
        ("schedule.list", "schedule.read"): {},
        ("schedule.pause", "schedule.write"): mutate,
        ("schedule.resume", "schedule.write"): mutate,
        ("schedule.cancel", "schedule.cancel"): mutate,
    }
    everything = {"schedule.read", "schedule.write", "schedule.cancel"}
    for (tool, scope), args in lacking.items():
        who = principal(WHO.principal_id, scopes=everything - {scope})
        result = await world.call(tool, args, f"deny-{tool}", who=who)
        v.expect(result.status is ToolStatus.DENIED, f"{tool} without {scope}: {result.status}")
        v.expect(
            result.reason_code == "schedule.auth.scope_required", f"{tool}: {result.reason_code}"
        )
        v.expect(result.details.get("missing_scopes") == [scope], f"{tool}: {result.details}")
    v.expect(len(world.approvals.requests) == asked, "a denied call reached approval")
    await unchanged(world, v, before, "denied lifecycle calls")
    exact = {
        "schedule.list": ({}, "schedule.read"),
        "schedule.pause": ({"schedule_id": b, "expected_revision": 1}, "schedule.write"),
        "schedule.cancel": ({"schedule_id": a, "expected_revision": 1}, "schedule.cancel"),
    }
    for tool, (args, scope) in exact.items():
        who = principal(WHO.principal_id, scopes={scope})
        result = await world.call(tool, args, f"exact-{tool}", who=who)
        v.expect(result.ok, f"{tool} with exactly {scope} failed: {result.reason_code}")
    v.evidence.update(denied=[f"{t} without {s}" for t, s in lacking], exact=sorted(exact))
    return v


async def lifecycle_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    a = await create_via_tool(world, "Alpha", "c-a")
    await create_via_tool(world, "Beta", "c-b")
    gone = await create_via_tool(world, "Gone", "c-g")
    once = await create_via_tool(world, "Once", "c-o", at=world.later(hours=1))
    foreign = str((await world.service.create(OTHER, "o-1", definition())).schedule.id)
    assert (
        await world.call("schedule.cancel", {"schedule_id": gone, "expected_revision": 1}, "k-g")
    ).ok
    assert (
        await world.call("schedule.pause", {"schedule_id": once, "expected_revision": 1}, "k-o")
    ).ok
    await world.service.patch(WHO, uuid(a), 1, SchedulePatch(title="Alpha 2"), "k-a")
    world.clock.advance(7200)
    before = await schedule_rows(world)
    bad, nf = "schedule.tool.invalid_arguments", "schedule.not_found"
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("malformed id", "schedule.pause", {"schedule_id": "alpha", "expected_revision": 1}, bad),
        (
            "id with braces",
            "schedule.pause",
            {"schedule_id": "{" + a + "}", "expected_revision": 2},
            bad,
        ),
        ("revision 0", "schedule.pause", {"schedule_id": a, "expected_revision": 0}, bad),
        ("revision text", "schedule.pause", {"schedule_id": a, "expected_revision": "2"}, bad),
        ("revision missing", "schedule.cancel", {"schedule_id": a}, bad),
        ("title as key", "schedule.pause", {"title": "Alpha 2", "expected_revision": 2}, bad),
        (
            "extra field",
            "schedule.resume",
            {"schedule_id": a, "expected_revision": 2, "force": True},
            bad,
        ),
        (
            "unknown",
            "schedule.pause",
            {"schedule_id": str(UUID(int=7)), "expected_revision": 1},
            nf,
        ),
        ("foreign", "schedule.cancel", {"schedule_id": foreign, "expected_revision": 1}, nf),
        (
            "stale",
            "schedule.pause",
            {"schedule_id": a, "expected_revision": 1},
            "schedule.lifecycle.stale_revision",
        ),
        (
            "ahead",
            "schedule.cancel",
            {"schedule_id": a, "expected_revision": 3},
            "schedule.lifecycle.stale_revision",
        ),
        (
            "resume cancelled",
            "schedule.resume",
            {"schedule_id": gone, "expected_revision": 1},
            "schedule.lifecycle.illegal_transition",
        ),
        (
            "pause cancelled",
            "schedule.pause",
            {"schedule_id": gone, "expected_revision": 1},
            "schedule.lifecycle.illegal_transition",
        ),
        (
            "resume past one-time",
            "schedule.resume",
            {"schedule_id": once, "expected_revision": 1},
            "schedule.validation.no_future_occurrence",
        ),
    ]
    for label, tool, args, code in cases:
        key = "v-" + label.replace(" ", "-")
        expect_code(v, await world.call(tool, args, key), code, label)
        after = await schedule_rows(world)
        v.expect(after == before, f"{label}: changed {changed_tables(before, after)}")
    v.evidence["failures"] = {label: code for label, _, _, code in cases}
    return v


async def lifecycle_retry_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    a = await create_via_tool(world, "Alpha", "c-a")
    b = await create_via_tool(world, "Beta", "c-b")
    ref = {"schedule_id": a, "expected_revision": 1}
    steps = [
        ("schedule.pause", "p-1"),
        ("schedule.pause", "p-1"),
        ("schedule.pause", "p-2"),
        ("schedule.resume", "r-1"),
        ("schedule.resume", "r-1"),
        ("schedule.resume", "r-2"),
        ("schedule.cancel", "x-1"),
        ("schedule.cancel", "x-1"),
        ("schedule.cancel", "x-2"),
        ("schedule.pause", "p-1"),
    ]
    states = []
    for tool, key in steps:
        result = await world.call(tool, ref, key)
        v.expect(result.ok, f"{tool} {key}: {result.reason_code}")
        states.append((await world.schedule(a))["state"])
    v.expect(states[-1] == "CANCELLED", f"a replay moved the schedule to {states[-1]}")
    events = await world.events(a)
    want = ["schedule.created", "schedule.paused", "schedule.resumed", "schedule.cancelled"]
    v.expect(events == want, f"events {events}")
    crashed = await crash_after_effect(
        world, "schedule.pause", {"schedule_id": b, "expected_revision": 1}, "p-b"
    )
    del crashed
    recovered = await world.call(
        "schedule.pause", {"schedule_id": b, "expected_revision": 1}, "p-b"
    )
    v.expect(recovered.ok, f"recovery: {recovered.reason_code}")
    v.expect((await world.events(b)).count("schedule.paused") == 1, "recovery paused twice")
    v.evidence.update(states=states, events=events)
    return v


# ---------------------------------------------------------------------- M23 update

HIDDEN_FIELDS = (
    "agent_id",
    "agent_version",
    "policy_profile",
    "requested_scopes",
    "browser_profile_id",
    "limits",
    "run_timeout_seconds",
    "misfire_grace_seconds",
    "max_consecutive_failures",
)
FORBIDDEN_INPUTS = (*HIDDEN_FIELDS, "state", "revision", "authority_version", "use_website")
WEEKLY_WED = {
    "kind": "WEEKLY",
    "local_time": "08:00",
    "weekdays": [3],
    "timezone": "America/Los_Angeles",
}
WEEKLY_WED_CANONICAL = {**WEEKLY_WED, "local_time": "08:00:00"}


async def update_contract_inputs_check(world: ToolWorld) -> Verdict:
    """Only a stable ID, expected revision and title/instruction/at/cadence get through."""
    v = Verdict()
    sid = await create_via_tool(world, "Alpha", "c-a")
    asked = len(world.approvals.requests)
    before = await world.snapshot()
    for name in FORBIDDEN_INPUTS:
        args = {"schedule_id": sid, "expected_revision": 1, "title": "Alpha 2", name: "x"}
        result = await world.call("schedule.update", args, f"f-{name}")
        expect_code(v, result, "schedule.tool.invalid_arguments", f"input {name}")
    v.expect(len(world.approvals.requests) == asked, "a forbidden input reached approval")
    await unchanged(world, v, before, "forbidden update inputs")
    v.evidence["refused_inputs"] = list(FORBIDDEN_INPUTS)
    return v


async def update_happy_path_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    sid = await create_via_tool(world, "News digest", "c-1")
    rev1 = await world.revisions(sid)
    world.clock.advance(3600)
    instruction = "Summarize only security and infrastructure news."
    model = resolve_then(
        "News digest", "schedule.update", "u-1", instruction=instruction, cadence=WEEKLY_WED
    )
    result = (await world.conversation().play(model))[-1]
    if not v.expect(result.ok, f"update: {result.reason_code} {result.details}"):
        return v
    view = last_view(world)
    want_view = {
        "schedule_id": sid,
        "expected_revision": 1,
        "patch": {"instruction": instruction, "cadence": WEEKLY_WED_CANONICAL},
        "unchanged": ["title"],
    }
    v.expect(view == want_view, f"view {view}")
    revisions = await world.revisions(sid)
    v.expect(len(revisions) == 2, f"{len(revisions)} revisions")
    v.expect(revisions[0] == rev1[0], "revision 1 changed")
    new = revisions[-1]["definition"]
    v.expect(new["instruction"] == instruction and new["title"] == "News digest", "content")
    v.expect(new["cadence"] == WEEKLY_WED_CANONICAL, f"cadence {new['cadence']}")
    row = await world.schedule(sid)
    v.expect(row["current_revision"] == 2 and row["state"] == "ACTIVE", "not revision 2, active")
    # Updated at ~09:00Z on Monday 2 March; Wednesday 08:00 PST (UTC-8) is 4 March 16:00Z.
    want_next = "2026-03-04T16:00:00Z"
    v.expect(format_instant(row["next_fire_at"]) == want_next, f"next {row['next_fire_at']}")
    v.expect(result.output is not None and result.output["next_fire_at"] == want_next, "output")
    v.expect(
        result.output is not None and set(result.output) == {*MUTATION_OUTPUT, "replayed"},
        "output fields",
    )
    v.expect(await world.events(sid) == ["schedule.created", "schedule.updated"], "events")
    v.evidence.update(approval_view=view, next_fire_at=want_next)
    return v


async def update_preserves_authority_check(world: ToolWorld) -> Verdict:
    """A definition with non-default hidden fields (scopes, website binding, limits,
    timeout, grace, failure policy) keeps every one through content and cadence patches;
    a paused schedule stays paused with no next firing and resumes on the new cadence."""
    v = Verdict()
    profile = UUID("0e4b7d5c-3a2f-4e1d-9c8b-7a6f5e4d3c2b")
    world.profiles.put(
        BrowserProfile(
            profile,
            WHO.tenant_id,
            WHO.principal_id,
            BrowserProfileState.READY,
            ("https://news.example",),
        )
    )
    custom = definition(
        requested_scopes=frozenset({"memory.read", "browser.profile.read"}),
        browser_profile_id=profile,
        run_timeout_seconds=1200,
        misfire_grace_seconds=600,
        max_consecutive_failures=4,
    )
    sid = str((await world.service.create(WHO, "seed", custom)).schedule.id)
    first = (await world.revisions(sid))[0]["definition"]
    r = await world.call(
        "schedule.update",
        {
            "schedule_id": sid,
            "expected_revision": 1,
            "title": "Renamed",
            "instruction": "New words.",
        },
        "u-1",
    )
    v.expect(r.ok, f"content update: {r.reason_code}")
    paused = await world.call("schedule.pause", {"schedule_id": sid, "expected_revision": 2}, "p-1")
    v.expect(paused.ok, f"pause: {paused.reason_code}")
    r2 = await world.call(
        "schedule.update",
        {"schedule_id": sid, "expected_revision": 2, "cadence": WEEKLY_WED},
        "u-2",
    )
    v.expect(r2.ok, f"paused update: {r2.reason_code}")
    row = await world.schedule(sid)
    v.expect(row["state"] == "PAUSED" and row["next_fire_at"] is None, "paused update unpaused")
    v.expect(row["current_revision"] == 3, f"revision {row['current_revision']}")
    for rev in (await world.revisions(sid))[1:]:
        d = rev["definition"]
        for name in HIDDEN_FIELDS:
            v.expect(
                d.get(name) == first.get(name),
                f"revision {rev['revision']}: {name} {d.get(name)!r} != {first.get(name)!r}",
            )
    for out in (r.output, r2.output):
        v.expect(out is not None and not set(out) & set(HIDDEN_FIELDS), "hidden fields in output")
    resumed = await world.call(
        "schedule.resume", {"schedule_id": sid, "expected_revision": 3}, "r-1"
    )
    # Resumed at ~08:00Z Monday 2 March: the new cadence's first firing is Wednesday.
    v.expect(
        resumed.output is not None and resumed.output["next_fire_at"] == "2026-03-04T16:00:00Z",
        f"resume did not use the new cadence: {resumed.output}",
    )
    v.evidence.update(preserved=list(HIDDEN_FIELDS), revisions=3)
    return v


def secret_token() -> str:
    # Built at run time so no credential-shaped literal sits in the source.
    return "ghp_" + "".join("a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")


async def update_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    sid = await create_via_tool(world, "Alpha", "c-a")
    gone = await create_via_tool(world, "Gone", "c-g")
    assert (
        await world.call("schedule.cancel", {"schedule_id": gone, "expected_revision": 1}, "k-g")
    ).ok
    before = await schedule_rows(world)
    asked = len(world.approvals.requests)
    token = secret_token()
    ref = {"schedule_id": sid, "expected_revision": 1}
    no_write = principal(WHO.principal_id, scopes={"schedule.read", "schedule.cancel"})
    denied = await world.call("schedule.update", {**ref, "title": "x"}, "d-1", who=no_write)
    v.expect(
        denied.status is ToolStatus.DENIED and denied.reason_code == "schedule.auth.scope_required",
        f"no schedule.write: {denied.status} {denied.reason_code}",
    )
    pre_approval = [
        ("empty patch", ref, "schedule.patch.empty"),
        (
            "at and cadence",
            {**ref, "at": world.later(days=1), "cadence": DAILY_PARIS},
            "schedule.patch.at_and_cadence",
        ),
        (
            "bad cadence",
            {
                **ref,
                "cadence": {
                    "kind": "YEARLY",
                    "local_time": "09:00",
                    "timezone": "UTC",
                    "dates": [{"month": 2, "day": 30}],
                },
            },
            "schedule.cadence.yearly_date_impossible",
        ),
        ("naive at", {**ref, "at": "2026-05-01T09:00:00"}, "schedule.cadence.naive_instant"),
        ("empty title", {**ref, "title": ""}, "schedule.tool.invalid_arguments"),
        (
            "secret instruction",
            {**ref, "instruction": f"sync with {token}"},
            "schedule.secret_detected",
        ),
        ("secret title", {**ref, "title": f"token {token}"}, "schedule.secret_detected"),
    ]
    for label, args, code in pre_approval:
        expect_code(
            v,
            await world.call("schedule.update", args, "v-" + label.replace(" ", "-")),
            code,
            label,
        )
    v.expect(len(world.approvals.requests) == asked, "a pre-approval failure reached approval")
    after_approval = [
        (
            "unknown",
            {"schedule_id": str(UUID(int=9)), "expected_revision": 1, "title": "x"},
            "schedule.not_found",
        ),
        (
            "terminal",
            {"schedule_id": gone, "expected_revision": 1, "title": "x"},
            "schedule.lifecycle.illegal_transition",
        ),
        (
            "stale",
            {**ref, "expected_revision": 2, "title": "x"},
            "schedule.lifecycle.stale_revision",
        ),
    ]
    for label, args, code in after_approval:
        expect_code(v, await world.call("schedule.update", args, "v-" + label), code, label)
    after = await schedule_rows(world)
    v.expect(after == before, f"a failed update wrote {changed_tables(before, after)}")
    everything = dumps(await world.snapshot())
    v.expect(token not in everything and token[4:] not in everything, "the secret reached a row")
    v.evidence["failures"] = {label: code for label, _, code in (*pre_approval, *after_approval)}
    return v


async def update_retry_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    sid = await create_via_tool(world, "Alpha", "c-a")
    args = {"schedule_id": sid, "expected_revision": 1, "instruction": "Shorter, please."}
    first = await world.call("schedule.update", args, "u-1")
    v.expect(first.ok and first.output is not None and first.output["replayed"] is False, "first")
    after_first = await schedule_rows(world)
    asked = len(world.approvals.requests)
    again = await world.call("schedule.update", dict(reversed(list(args.items()))), "u-1")
    v.expect(len(world.approvals.requests) == asked, "the replay asked for approval again")
    v.expect(again.ok and again.output is not None and again.output["replayed"] is True, "replay")
    v.expect(again.output is not None and again.output["current_revision"] == 2, "replay revision")
    changed = await world.call("schedule.update", {**args, "instruction": "Longer."}, "u-1")
    expect_code(v, changed, "schedule.idempotency.key_reused", "same key, other patch")
    v.expect(await schedule_rows(world) == after_first, "a replay or conflict wrote something")
    crash_args = {"schedule_id": sid, "expected_revision": 2, "title": "Alpha renamed"}
    await crash_after_effect(world, "schedule.update", crash_args, "u-2")
    recovered = await world.call("schedule.update", crash_args, "u-2")
    v.expect(
        recovered.ok and recovered.output is not None and recovered.output["replayed"] is True,
        f"recovery: {recovered.reason_code} {recovered.output}",
    )
    v.expect(len(await world.revisions(sid)) == 3, "recovery wrote another revision")
    events = await world.events(sid)
    v.expect(events == ["schedule.created", "schedule.updated", "schedule.updated"], f"{events}")
    v.evidence.update(revisions=3, events=events)
    return v
