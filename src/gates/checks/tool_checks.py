"""The model-tool gate checks as functions over a ``ToolWorld`` (not a test module).

Each ``*_check(world)`` drives scripted model turns through the ordinary pipeline on
PostgreSQL and returns a ``Verdict``: the problems it found (empty: the gate's
statement held) and the evidence it measured. The gate checks in
``test_model_*.py`` assert no problems; the tests of the tests run the same
functions on worlds with a plausible wrong implementation swapped in and assert that
problems are found.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar
from uuid import UUID

from gates.checks.tool_expectations import DISCOVERY_BYTES, MUTATION_BYTES, approval_required
from gates.checks.tool_support import (
    OTHER,
    OTHER_B,
    SESSION,
    WHO,
    WHO_B,
    ApproverHung,
    ApproverTimedOut,
    ToolWorld,
    memory_tools,
)
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import UnavailableError
from scheduling.domain.identity import Principal
from scheduling.domain.schedule import ScheduleState
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.ports.repositories import UNAVAILABLE
from scheduling.ports.tool_ledger import (
    ApprovalDecisionRecord,
    InvocationState,
    WebsiteBinding,
)
from scheduling.runtime.tool_pipeline import (
    APPROVAL_DENIED,
    ApprovalRequest,
    AskUser,
    Conversation,
    PreparedCall,
    Proposal,
    ProposedCall,
    ScriptedApprovals,
    ScriptedModel,
    ToolExecutionContext,
    ToolHandler,
    ToolResult,
    ToolStatus,
)
from scheduling.service.values import ScheduleDefinition, SchedulePatch
from simulation.engine.clock import VirtualClock
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    AGENT_VERSION_2,
    LIMITS,
    POLICY,
    POLICY_2,
    START,
    definition,
    principal,
)

Row = dict[str, Any]
T = TypeVar("T")


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


def pinned_problems(
    definition: dict[str, Any],
    label: str,
    version: str = AGENT_VERSION,
    policy: str = POLICY,
) -> list[str]:
    """The revision pins the active agent (``version``) and its policy, delegates no
    scope and carries the derived bounds (timeout min(300, 3600), grace min(3600,
    7200), two failures)."""
    want = {
        "agent_id": str(AGENT_ID),
        "agent_version": version,
        "policy_profile": policy,
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


# ---------------------------------------------------------------------- approval worlds

# What an effect writes (the tool ledger's own rows are bookkeeping, not an effect).
EFFECT_TABLES = (
    "schedules",
    "schedule_revisions",
    "schedule_idempotency_keys",
    "schedule_occurrences",
    "process_events",
    "runs",
)


async def effect_rows(world: ToolWorld) -> dict[str, list[Row]]:
    snap = await world.snapshot()
    return {t: snap[t] for t in EFFECT_TABLES}


async def foreign_decision(world: ToolWorld, request: ApprovalRequest, who: Principal) -> bool:
    """``who`` records an approving decision on another principal's pending request
    through the ledger; True when the ledger accepted it (it must not)."""
    ledger = world.role.ledger
    assert ledger is not None
    record = ApprovalDecisionRecord(
        approval_id=request.approval_id,
        tenant_id=who.tenant_id,
        principal_id=who.principal_id,
        approved=True,
        decided_by=who.principal_id,
        decided_at=world.clock.now(),
    )
    try:
        await ledger.decide(who, record, InvocationState.APPROVED)
    except Exception:  # refused: by RLS, by the ledger's own check, or a constraint
        return False
    return True


async def approval_refusals(
    world: ToolWorld, v: Verdict, tool: str, args: dict[str, Any], label: str
) -> dict[str, Any]:
    """One effectful call, asked three times and never approved: declined, timed out
    (the approval port raises), and declined after another principal (same tenant and
    another tenant) tried to approve it through the ledger. The effect rows are read
    while each approval is pending (an effect before approval shows there) and after
    each answer; a retry with the declined key (the approver would now say yes) must
    not turn the decline into an effect."""
    before = await effect_rows(world)
    pending: list[list[str]] = []
    accepted: list[str] = []
    meddle = False

    async def inspect(request: ApprovalRequest) -> None:
        # The ask is counted before the read: the pipeline's approval bound may cancel
        # this read (the hanging approver), and the count must not depend on its speed.
        slot = len(pending)
        pending.append([])
        pending[slot] = changed_tables(before, await effect_rows(world))
        if meddle:
            for who in (OTHER, WHO_B):
                if await foreign_decision(world, request, who):
                    accepted.append(f"{who.tenant_id}/{who.principal_id}")

    surfaces: dict[str, Any] = {}
    world.approvals.on_request = inspect
    try:
        world.approvals.push(False)
        declined = await world.call(tool, args, f"{label}-declined")
        v.expect(not declined.ok, f"{label}: a declined call succeeded")
        surfaces["declined"] = declined.reason_code
        await unchanged_effects(world, v, before, f"{label}: declined")
        asked = len(world.approvals.requests)
        retry = await world.call(tool, args, f"{label}-declined")
        v.expect(not retry.ok, f"{label}: a retry of the declined key succeeded")
        v.expect(len(world.approvals.requests) == asked, f"{label}: the decline was asked again")
        await unchanged_effects(world, v, before, f"{label}: retry after decline")

        surfaces["timeout"] = await approval_timeouts(world, v, tool, args, before, label)

        meddle = True
        world.approvals.push(False)
        foreign = await world.call(tool, args, f"{label}-foreign")
        v.expect(not foreign.ok, f"{label}: another principal's approval took effect")
        v.expect(not accepted, f"{label}: the ledger recorded a decision by {accepted}")
        await unchanged_effects(world, v, before, f"{label}: answered by another principal")
    finally:
        world.approvals.on_request = None
    v.expect(len(pending) == 5, f"{label}: {len(pending)} approvals asked, not 5")
    early = [c for c in pending if c]
    v.expect(not early, f"{label}: changed {early} before the approver answered")
    return surfaces


APPROVAL_TIMEOUT = "schedule.tool.approval_timeout"
BOUNDED_WAIT_SECONDS = 0.05  # the pipeline's approval timeout while the approver hangs


async def timed_out_call(
    world: ToolWorld, v: Verdict, tool: str, args: dict[str, Any], key: str, label: str
) -> str:
    """One call whose approval gets no answer: it must end as the stable, retryable
    approval timeout (never the port's exception, never an effect)."""
    try:
        result = await world.call(tool, args, key)
    except (Exception, ApproverHung) as exc:  # the pipeline promised never to raise
        v.problems.append(f"{label}: the pipeline raised {type(exc).__name__}")
        return f"raised {type(exc).__name__}"
    finally:
        world.approvals.drop_failures()
    v.expect(
        result.status is ToolStatus.FAILED and result.reason_code == APPROVAL_TIMEOUT,
        f"{label}: expected {APPROVAL_TIMEOUT}, got {result.status} {result.reason_code}",
    )
    v.expect(result.retryable, f"{label}: {result.reason_code} is not retryable")
    return str(result.reason_code)


async def approval_timeouts(
    world: ToolWorld,
    v: Verdict,
    tool: str,
    args: dict[str, Any],
    before: dict[str, list[Row]],
    label: str,
) -> str:
    """The approval port raises (``ApproverTimedOut``), then, retried with the same key,
    never answers (the pipeline's own bound must end the wait); each is the retryable
    ``schedule.tool.approval_timeout`` with no effect and no decision, and each retry
    asks again on the same request and view; the third ask is declined."""
    key = f"{label}-timeout"
    first = len(world.approvals.requests)
    world.approvals.fail_next(ApproverTimedOut("the approver did not answer"))
    raised = await timed_out_call(world, v, tool, args, key, f"{label}: approval port raised")
    await unchanged_effects(world, v, before, f"{label}: approval timed out")
    governance = world.pipeline.governance
    assert governance is not None
    bound = governance.approval_timeout_seconds
    governance.approval_timeout_seconds = BOUNDED_WAIT_SECONDS
    world.approvals.hang_next()
    try:
        hung = await timed_out_call(world, v, tool, args, key, f"{label}: approver never answered")
    finally:
        governance.approval_timeout_seconds = bound
    await unchanged_effects(world, v, before, f"{label}: approver never answered")
    world.approvals.push(False)
    declined = await world.call(tool, args, key)
    v.expect(
        declined.reason_code == "schedule.tool.approval_denied",
        f"{label}: the decline after two timeouts: {declined.status} {declined.reason_code}",
    )
    asked = world.approvals.requests[first:]
    v.expect(len(asked) == 3, f"{label}: the timed-out key was asked {len(asked)} times, not 3")
    v.expect(
        len({(r.approval_id, dumps(r.view)) for r in asked}) == 1,
        f"{label}: the retries after a timeout were not asked on the same request and view",
    )
    await unchanged_effects(world, v, before, f"{label}: declined after the timeouts")
    return f"{raised}, {hung}"


async def unchanged_effects(
    world: ToolWorld, v: Verdict, before: dict[str, list[Row]], label: str
) -> None:
    changed = changed_tables(before, await effect_rows(world))
    v.expect(not changed, f"{label}: changed {changed}")


async def approved_after_inspection(
    world: ToolWorld, v: Verdict, call: Callable[[], Awaitable[T]], label: str
) -> T:
    """Run ``call`` with the effect rows read while its one approval is pending: they
    must not have changed yet."""
    before = await effect_rows(world)
    pending: list[list[str]] = []

    async def inspect(request: ApprovalRequest) -> None:
        # The ask is counted before the read: the pipeline's approval bound may cancel
        # this read (the hanging approver), and the count must not depend on its speed.
        slot = len(pending)
        pending.append([])
        pending[slot] = changed_tables(before, await effect_rows(world))

    world.approvals.on_request = inspect
    try:
        result = await call()
    finally:
        world.approvals.on_request = None
    v.expect(bool(pending), f"{label}: no approval was asked")
    v.expect(not any(pending), f"{label}: changed {pending} before approval")
    return result


class CrashAfterApproval(BaseException):
    """The simulated process death after the approval decision committed, before the
    effect (a BaseException, so no ``except Exception`` in the product swallows it)."""


async def crash_after_approval(
    world: ToolWorld, tool: str, args: dict[str, Any], key: str, *, version: str | None = None
) -> None:
    """One call that dies right after its approval decision is committed."""
    ledger = world.pipeline.governance.ledger if world.pipeline.governance else None
    assert ledger is not None
    original = ledger.decide

    async def dying(*a: Any, **k: Any) -> None:
        await original(*a, **k)
        raise CrashAfterApproval

    ledger.decide = dying  # type: ignore[method-assign]
    try:
        await world.call(tool, args, key, version=version)
    except CrashAfterApproval:
        pass
    finally:
        ledger.decide = original  # type: ignore[method-assign]


def stable_failure(v: Verdict, result: ToolResult, label: str) -> None:
    v.expect(
        not result.ok and (result.reason_code or "").startswith("schedule."),
        f"{label}: expected a stable schedule.* failure, got {result.status} {result.reason_code}",
    )
    v.expect(not result.retryable, f"{label}: {result.reason_code} is retryable")


async def no_unapproved_effects(world: ToolWorld, v: Verdict, label: str) -> None:
    rows = await world.unapproved_effects()
    v.expect(not rows, f"{label}: effects without an approving decision: {rows}")


async def same_key_isolation(
    world: ToolWorld, v: Verdict, tool: str, args_of: Callable[[Principal], dict[str, Any]]
) -> list[ToolResult]:
    """One idempotency key used by four principals (two per tenant; WHO and WHO_B share a
    principal id): four independent invocations, each asked, none a replay of another."""
    results = []
    for who in (WHO, OTHER, WHO_B, OTHER_B):
        asked = len(world.approvals.requests)
        result = await world.call(tool, args_of(who), "shared-key", who=who)
        label = f"{tool} by {who.tenant_id}/{who.principal_id}"
        v.expect(
            result.ok and not result.replayed, f"{label}: {result.status} {result.reason_code}"
        )
        v.expect(len(world.approvals.requests) == asked + 1, f"{label}: not asked for approval")
        results.append(result)
    return results


async def memory_isolation_problems() -> list[str]:
    """The same-key rule on the in-memory composition (``build_tools`` on memory storage:
    its own ledger adapter, no row-level security behind it)."""
    problems: list[str] = []
    clock = VirtualClock(START)
    role = memory_tools(clock, ScriptedApprovals())
    try:
        ids = []
        for who in (WHO, OTHER, WHO_B, OTHER_B):
            chat = Conversation(role.pipeline, who, role.roster, session_id=SESSION)
            args = {"title": "Shared", "instruction": "Same words.", "at": "2026-03-03T08:00:00Z"}
            result = await chat.propose(ProposedCall("schedule.create", args, "shared-key"))
            if not result.ok or result.replayed or result.output is None:
                problems.append(
                    f"memory: {who.tenant_id}/{who.principal_id} shared key:"
                    f" {result.status} {result.reason_code} replayed={result.replayed}"
                )
            else:
                ids.append(result.output["schedule_id"])
        if len(set(ids)) != len(ids):
            problems.append(f"memory: principals share schedules {ids}")
    finally:
        await role.close()
    return problems


# ---------------------------------------------------------------------- M19


async def create_happy_path_check(world: ToolWorld) -> Verdict:
    """One approved one-time create pins the agent version active AT create (the world
    rotates v1 -> v2 first, so a stale pin shows); the effect rows are read while the
    approval is pending; then the same request declined, timed out and "answered" by
    other principals changes nothing."""
    v = Verdict()
    await world.activate(AGENT_VERSION_2)
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
    v.problems += pinned_problems(definition, "create", AGENT_VERSION_2, POLICY_2)
    want_out = {"schedule_id": sid, "state": "ACTIVE", "next_fire_at": exact, "replayed": False}
    v.expect(result.output == want_out, f"output {result.output}")
    v.expect(await world.events(sid) == ["schedule.created"], "events are not one creation")
    other = {"title": "Never", "instruction": "Do not create me.", "at": world.later(days=2)}
    surfaces = await approval_refusals(world, v, "schedule.create", other, "create")
    await no_unapproved_effects(world, v, "create")
    v.evidence.update(
        approval_view=view,
        definition=definition,
        output=result.output,
        pinned=[AGENT_VERSION_2, POLICY_2],
        refusals=surfaces,
    )
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
    good = {
        "title": "Reminder",
        "instruction": "Stretch.",
        "cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
    }
    bad_text = await bad_text_refused(world, v, "schedule.create", good, ("cadence", "timezone"))
    v.expect(not world.approvals.requests, "bad text reached approval")
    await unchanged(world, v, before, "create with bad text")
    # Credential-shaped text is refused before anyone is asked: it never reaches an
    # approval view (nor the elicitation an MCP client shows).
    token = secret_token()
    secret_cases: dict[str, dict[str, Any]] = {
        "secret instruction": {**good, "instruction": f"Use {token} to log in."},
        "secret title": {**good, "title": f"token {token}"},
    }
    for label, secret_args in secret_cases.items():
        expect_code(
            v,
            await world.call("schedule.create", secret_args, f"val-{label.replace(' ', '-')}"),
            "schedule.secret_detected",
            label,
        )
    v.expect(not world.approvals.requests, "a secret-like create reached approval")
    await unchanged(world, v, before, "secret-like create")
    # A call pinned to an older version is held to that version's closed schema (1.1.1
    # has no use_website, 1.2.0 no place_call), and runs as that version.
    for version, extra in (("1.1.1", "use_website"), ("1.2.0", "place_call")):
        pinned = {**good, extra: False}
        result = await world.call(
            "schedule.create", pinned, f"val-pinned-{version}", version=version
        )
        expect_code(v, result, "schedule.tool.invalid_arguments", f"{extra} under {version}")
    v.expect(not world.approvals.requests, "a call outside its pinned schema reached approval")
    await unchanged(world, v, before, "calls outside their pinned schema")
    old = await world.call("schedule.create", good, "val-pinned-ok", version="1.1.1")
    v.expect(old.ok and old.version == "1.1.1", f"a pinned 1.1.1 call: {old.status} {old.version}")
    recorded = await world.sql(
        "SELECT tool_version FROM tool_invocations WHERE id = :i", i=old.invocation_id
    )
    v.expect([r["tool_version"] for r in recorded] == ["1.1.1"], f"recorded as {recorded}")
    v.evidence["rejected"] = {k: c for k, (_, c) in cases.items()}
    v.evidence["bad_text"] = bad_text
    return v


TEXT_INVALID = "schedule.text.invalid"
# A NUL byte and a lone surrogate: no edge may show or store either (the one text
# validator refuses them as arguments, before any approval or SQL).
BAD_TEXT = {"NUL": "\x00", "lone surrogate": "\ud800"}


def with_bad(value: str, bad: str) -> str:
    return value[:2] + bad + value[2:]


async def bad_text_refused(
    world: ToolWorld,
    v: Verdict,
    tool: str,
    good: dict[str, Any],
    nested: tuple[str, str],
) -> list[str]:
    """``good`` with NUL or a lone surrogate in its title, its instruction and one
    nested string (``nested``: object, field): each is the non-retryable
    ``schedule.text.invalid`` with no approval asked and no row of any tool table
    changed."""
    before = await world.snapshot()
    asked = len(world.approvals.requests)
    labels = []
    for what, bad in BAD_TEXT.items():
        outer, inner = nested
        variants = {
            "title": {**good, "title": with_bad(good["title"], bad)},
            "instruction": {**good, "instruction": with_bad(good["instruction"], bad)},
            f"{outer}.{inner}": {
                **good,
                outer: {**good[outer], inner: with_bad(good[outer][inner], bad)},
            },
        }
        for field_name, args in variants.items():
            label = f"{tool}: {what} in {field_name}"
            key = "text-" + label.replace(" ", "-").replace(":", "")
            expect_code(v, await world.call(tool, args, key), TEXT_INVALID, label)
            labels.append(label)
    v.expect(
        len(world.approvals.requests) == asked,
        f"{tool}: bad text reached approval ({len(world.approvals.requests) - asked} asked)",
    )
    await unchanged(world, v, before, f"{tool} with bad text")
    return labels


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
    for label, at in same_instant(args["at"]).items():
        replay_check(
            v,
            await world.call("schedule.create", {**args, "at": at}, "retry-1"),
            first,
            f"the same instant written {label} ({at})",
        )
    # An absent flag is false (ADR 2102): spelling it out is the same call.
    for flag in ("use_website", "place_call"):
        replay_check(
            v,
            await world.call("schedule.create", {**args, flag: False}, "retry-1"),
            first,
            f"{flag}=false spelled out",
        )
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
    # One key, four principals (two tenants): four independent creations.
    shared = {"title": "Shared", "instruction": "Same words.", "at": world.later(days=4)}
    made = await same_key_isolation(world, v, "schedule.create", lambda who: shared)
    owners = []
    for who, r in zip((WHO, OTHER, WHO_B, OTHER_B), made, strict=True):
        if r.output is None:
            continue
        row = await world.schedule(r.output["schedule_id"])
        owners.append((row["tenant_id"], row["principal_id"]))
        v.expect(
            (row["tenant_id"], row["principal_id"]) == (who.tenant_id, who.principal_id),
            f"shared key: {who.tenant_id}/{who.principal_id} got {row['tenant_id']}/"
            f"{row['principal_id']}'s schedule",
        )
    v.expect(len(set(owners)) == 4, f"shared key owners {owners}")
    v.problems += await memory_isolation_problems()
    v.evidence["website_retry"] = await create_crash_view_changed(world, v)
    v.evidence["racing_retries"] = await racing_retries(
        world,
        v,
        "schedule.create",
        lambda n: {"title": f"Race {n}", "instruction": "Remind me.", "at": world.later(days=6)},
    )
    v.evidence["key_raced_by_other_arguments"] = await key_raced_by_other_arguments(world, v)
    v.evidence["unavailable_then_retried"] = await unavailable_then_retried(world, v)
    await no_unapproved_effects(world, v, "create retry")
    v.evidence.update(
        schedules=(await world.counts())["schedules"],
        approvals=len(world.approvals.requests),
        shared_key=owners,
    )
    return v


async def key_raced_by_other_arguments(world: ToolWorld, v: Verdict) -> str:
    """Two creates with one key and different arguments race: the second's ledger read
    finds nothing, and before it opens its invocation the first runs to its end (its
    handler's ``prepare`` runs the first call). The second must be the non-retryable
    ``key_reused`` with no output, never the first call's result as its own, and the
    first call's invocation is left as it ended."""
    key = "race-other-arguments"
    first_args = {"title": "Keyed water", "instruction": "Remind me.", "at": world.later(days=8)}
    second_args = {**first_args, "title": "Keyed cat"}
    ran: list[ToolResult] = []

    class FirstEndsMeanwhile:
        def __init__(self, inner: ToolHandler) -> None:
            self.inner = inner

        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            if not ran and args.get("title") == second_args["title"]:
                ran.append(await world.call("schedule.create", first_args, key))
            return await self.inner.prepare(args, context)

    restore = world.replace_handler("schedule.create", FirstEndsMeanwhile)
    try:
        second = await world.call("schedule.create", second_args, key)
    finally:
        restore()
    if not v.expect(len(ran) == 1 and ran[0].ok, f"the first racing call: {ran}"):
        return "first call failed"
    first = ran[0]
    before = await world.sql(
        "SELECT state, output FROM tool_invocations WHERE id = :i", i=first.invocation_id
    )
    v.expect(
        second.status is ToolStatus.FAILED
        and second.reason_code == "schedule.idempotency.key_reused"
        and second.output is None,
        f"a racing call with other arguments under the key: {second.status}"
        f" {second.reason_code} {second.output}",
    )
    after = await world.sql(
        "SELECT state, output FROM tool_invocations WHERE id = :i", i=first.invocation_id
    )
    v.expect(after == before, "the racing call changed the first call's invocation")
    titles = [
        r["title"]
        for r in await world.sql(
            "SELECT r.definition->>'title' AS title FROM schedule_revisions r"
            " WHERE r.definition->>'title' IN ('Keyed water', 'Keyed cat')"
        )
    ]
    v.expect(titles == ["Keyed water"], f"schedules written by the race: {titles}")
    return str(second.reason_code)


class UnavailableOnce:
    """schedule.create whose approved effect meets the database unavailable before it
    writes anything (the transient ``schedule.persistence.unavailable`` the storage
    raises when its connection broke)."""

    def __init__(self, inner: ToolHandler) -> None:
        self.inner = inner

    async def prepare(self, arguments: Any, context: ToolExecutionContext) -> PreparedCall:
        prepared = await self.inner.prepare(arguments, context)

        async def unavailable() -> dict[str, Any]:
            raise UnavailableError(UNAVAILABLE, "the database is unavailable")

        return PreparedCall(view=prepared.view, execute=unavailable)


async def unavailable_then_retried(world: ToolWorld, v: Verdict) -> str:
    """A transient unavailability during the effect is not the key's final result: the
    call answers the retryable failure with nothing durable changed, and a retry with
    the same key and arguments (the database back) executes and creates the schedule,
    never replaying the failure the first answer called retryable."""
    key = "retry-unavailable"
    args = {"title": "Flaky water", "instruction": "Remind me.", "at": world.later(days=9)}
    label = "a create whose effect met the database unavailable"
    before = await effect_rows(world)
    restore = world.replace_handler("schedule.create", UnavailableOnce)
    try:
        first = await world.call("schedule.create", args, key)
    finally:
        restore()
    v.expect(
        first.status is ToolStatus.FAILED and first.reason_code == UNAVAILABLE,
        f"{label}: {first.status} {first.reason_code}",
    )
    v.expect(first.retryable, f"{label}: {first.reason_code} is not retryable")
    await unchanged_effects(world, v, before, label)
    retry = await world.call("schedule.create", args, key)
    v.expect(
        retry.ok and not retry.replayed,
        f"the same-key retry after it: {retry.status} {retry.reason_code}"
        f" replayed={retry.replayed} (the failure was replayed, not executed)",
    )
    if retry.output is None:
        return f"retry {retry.status} {retry.reason_code}"
    v.expect(retry.output.get("replayed") is False, "the retry's schedule existed before")
    made = await world.revisions(retry.output["schedule_id"])
    v.expect(
        [r["definition"]["title"] for r in made] == [args["title"]],
        f"the retry's schedule has revisions {[r['definition']['title'] for r in made]}",
    )
    return f"{first.reason_code} retryable={first.retryable}, then {retry.status}"


RACES = ((True, True), (False, True), (True, False), (False, False))
"""The approver's answers to the two racing calls' prompts, in the order asked."""


async def racing_retries(
    world: ToolWorld, v: Verdict, tool: str, args_of: Callable[[int], dict[str, Any]]
) -> list[str]:
    """A client retrying a call still in flight: two identical calls with one key race,
    so both pass the key lookup before either opens its invocation, and the second to
    open finds the first's row. It must resume that invocation, never run one of its
    own: one effect at most, one recorded approval decision, and both results obey that
    decision even when the approver answered the two prompts differently (a declined
    approval is never overridden by the other prompt's approval)."""
    outcomes = []
    for n, answers in enumerate(RACES):
        world.approvals.push(*answers)
        label = f"{tool} racing with one key, answers {answers}"
        before = (await world.counts())["schedules"]
        key = f"race-{tool}-{n}"
        # Every call runs to its end, even when one raises: none is left running on the
        # world's connections after the check moved on.
        settled = await asyncio.gather(
            *(world.call(tool, args_of(n), key) for _ in answers), return_exceptions=True
        )
        world.approvals.drop_verdicts()
        for outcome in settled:
            if not isinstance(outcome, Exception) and isinstance(outcome, BaseException):
                raise outcome
        raised = [repr(o) for o in settled if isinstance(o, BaseException)]
        if not v.expect(not raised, f"{label}: a call raised {raised}"):
            continue
        racing = [o for o in settled if isinstance(o, ToolResult)]
        made = (await world.counts())["schedules"] - before
        decisions = await world.sql(
            "SELECT d.approved FROM tool_invocations i"
            " JOIN tool_approval_requests r ON r.invocation_id = i.id"
            " JOIN tool_approval_decisions d ON d.approval_id = r.id"
            " WHERE i.idempotency_key = :key",
            key=key,
        )
        invocations = await world.sql(
            "SELECT count(*) AS n FROM tool_invocations WHERE idempotency_key = :key", key=key
        )
        v.expect(invocations[0]["n"] == 1, f"{label}: {invocations[0]['n']} invocations")
        if not v.expect(len(decisions) == 1, f"{label}: {len(decisions)} decisions recorded"):
            continue
        approved = bool(decisions[0]["approved"])
        shown = [(r.status.value, r.reason_code, out_id(r)) for r in racing]
        if approved:
            ids = {out_id(r) for r in racing}
            v.expect(
                all(r.ok for r in racing) and len(ids) == 1 and None not in ids,
                f"{label}: approved, but the calls answered {shown}",
            )
            v.expect(made == 1, f"{label}: approved, {made} schedules made")
        else:
            v.expect(
                all(r.reason_code == APPROVAL_DENIED for r in racing),
                f"{label}: declined, but the calls answered {shown}",
            )
            v.expect(made == 0, f"{label}: declined, {made} schedules made")
        outcomes.append(f"{answers}: {'approved' if approved else 'declined'}, {made} made")
    return outcomes


def same_instant(at: str) -> dict[str, str]:
    """``at`` (an aware RFC 3339 instant) written other ways that name the same instant:
    with ``Z`` for UTC, and at UTC+02:00 and UTC-05:30."""
    instant = datetime.fromisoformat(at)
    return {
        "with Z": instant.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "at +02:00": instant.astimezone(timezone(timedelta(hours=2))).isoformat(),
        "at -05:30": instant.astimezone(timezone(-timedelta(hours=5, minutes=30))).isoformat(),
    }


def replay_check(v: Verdict, result: ToolResult, first: ToolResult, label: str) -> None:
    """``result`` (the same key, arguments equal after normalization) replays ``first``:
    the original schedule, flagged replayed, never ``key_reused`` or a second effect."""
    v.expect(
        result.ok and result.replayed,
        f"retry with {label}: {result.status} {result.reason_code} replayed={result.replayed}",
    )
    v.expect(
        out_id(result) is not None and out_id(result) == out_id(first),
        f"retry with {label}: names {out_id(result)}, not the original {out_id(first)}",
    )


PROFILE_1 = UUID("1c0ffee0-0000-4000-8000-000000000001")
PROFILE_2 = UUID("1c0ffee0-0000-4000-8000-000000000002")


async def create_crash_view_changed(world: ToolWorld, v: Verdict) -> str:
    """use_website=true approved on profile P1; the process dies after the approval
    commits, before the effect; the chat's binding moves to P2; the retry with the same
    key may fail closed or ask again, but must never bind a profile no approved view
    showed."""
    for profile, origin in ((PROFILE_1, "https://one.example"), (PROFILE_2, "https://two.example")):
        world.profiles.put(
            BrowserProfile(
                profile, WHO.tenant_id, WHO.principal_id, BrowserProfileState.READY, (origin,)
            )
        )
    world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE_1, ("https://one.example",)))
    args = {
        "title": "Feed digest",
        "instruction": "Read my feed and summarize it.",
        "at": world.later(days=5),
        "use_website": True,
    }
    before = await effect_rows(world)
    await crash_after_approval(world, "schedule.create", args, "web-crash", version="1.2.0")
    await unchanged_effects(world, v, before, "crash after approval")
    world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE_2, ("https://two.example",)))
    asked = len(world.approvals.decided)
    retry = await world.call("schedule.create", args, "web-crash", version="1.2.0")
    if not retry.ok:
        stable_failure(v, retry, "retry on a changed view")
        await unchanged_effects(world, v, before, "failed retry on a changed view")
        # Failed closed is final for the key (ADR 2101): the binding back on the approved
        # P1, the same key still refuses with the same code and runs nothing.
        world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE_1, ("https://one.example",)))
        asked = len(world.approvals.requests)
        back = await world.call("schedule.create", args, "web-crash", version="1.2.0")
        label = "retry after the view returned to the approved one"
        v.expect(
            back.status is ToolStatus.FAILED and back.reason_code == retry.reason_code,
            f"{label}: {back.status} {back.reason_code}, not the refusal {retry.reason_code}",
        )
        v.expect(len(world.approvals.requests) == asked, f"{label}: asked for approval")
        await unchanged_effects(world, v, before, label)
        return f"failed closed for good: {retry.reason_code}, then {back.reason_code}"
    assert retry.output is not None
    bound = (await world.revisions(retry.output["schedule_id"]))[0]["definition"]
    profile = bound.get("browser_profile_id")
    approved = [
        r.view.get("website", {}).get("browser_profile_id")
        for r, yes in world.approvals.decided[asked:]
        if yes
    ]
    v.expect(
        profile is not None and str(profile) in approved,
        f"the retry bound profile {profile} but the approvals it got showed {approved}",
    )
    return f"asked again: approved {approved}"


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
    "weekday 0": (_cal("WEEKLY", weekdays=[0]), _BAD_ARGS),
    "day 32": (_cal("MONTHLY", days_of_month=[32]), _BAD_ARGS),
    "day 0": (_cal("MONTHLY", days_of_month=[0]), _BAD_ARGS),
    "month 13": (_cal("YEARLY", dates=[{"month": 13, "day": 1}]), _BAD_ARGS),
    "month 0": (_cal("YEARLY", dates=[{"month": 0, "day": 1}]), _BAD_ARGS),
    "cron text": ({"kind": "CRON", "expression": "0 9 * * *"}, _BAD_ARGS),
    "interval": (_cal("DAILY", every=2), _BAD_ARGS),
}


# RECURRING["weekly"] (weekdays [5, 1, 3] at 08:00:00) written other ways that
# normalize to the same cadence: the same key must replay it.
WEEKLY_SPELLINGS: dict[str, dict[str, Any]] = {
    "weekdays [1, 3, 5]": {**RECURRING["weekly"], "weekdays": [1, 3, 5]},
    "local_time 08:00": {**RECURRING["weekly"], "local_time": "08:00"},
    "weekdays [3, 5, 1] at 08:00": {
        **RECURRING["weekly"],
        "weekdays": [3, 5, 1],
        "local_time": "08:00",
    },
}


async def create_recurring_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    before = await world.snapshot()
    daily = RECURRING["daily"]
    shapes: dict[str, dict[str, Any]] = {
        "both": {"title": "t", "instruction": "i", "at": world.later(days=1), "cadence": daily},
        "neither": {"title": "t", "instruction": "i"},
        # title and instruction are always required (spec "Model-callable creation").
        "no instruction": {"title": "t", "cadence": daily},
        "no title": {"instruction": "i", "cadence": daily},
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
    asked = len(world.approvals.requests)
    for label, cadence in WEEKLY_SPELLINGS.items():
        retry = await world.call("schedule.create", {**args, "cadence": cadence}, "rec-key")
        replay_check(v, retry, first, label)
    v.expect(len(world.approvals.requests) == asked, "a normalized retry asked for approval")
    await unchanged(world, v, after_first, "normalized retries")
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


TITLE_MAX = 200  # the longest legal title, in characters
WIDE = "\u0001"  # a character JSON escapes to six bytes (\u0001) in every encoder
PAGE_CEILING = 524_288


def compact_bytes(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def lifecycle_discovery_check(world: ToolWorld) -> Verdict:
    """Fifty-five schedules, each at the largest legal size in bytes: the largest legal
    yearly selector (all 366 month/day pairs, February 29 included) and a 200-character
    title of characters that escape to six bytes; every third one edited to revision 2
    and every ninth to 3, so each summary's revision is checked against its row. Other
    principals' schedules (same tenant, other tenant) stay invisible, and their cursors,
    a tampered and a forged one are refused. A list output over the ceiling fails."""
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
        title = f"{i:03d} " + WIDE * (TITLE_MAX - 4)
        made = await world.service.create(WHO, f"seed-{i}", definition_for(title, marker, yearly))
        for revision in range(1, 1 + (i % 3 == 0) + (i % 9 == 0)):
            marker = f"{marker}-r{revision + 1}"
            markers.append(marker)
            patch = SchedulePatch(instruction=marker)
            await world.service.patch(
                WHO, made.schedule.id, revision, patch, f"edit-{i}-{revision}"
            )
        world.clock.advance(1)
    cursors: dict[str, str | None] = {}
    for who in (OTHER, WHO_B):
        for i in range(2):
            foreign = definition_for(f"other {i}", "foreign", yearly)
            await world.service.create(who, f"other-{i}", foreign)
        listed = await world.call("schedule.list", {"limit": 1}, "list-foreign", who=who)
        cursors[f"{who.tenant_id}/{who.principal_id}"] = (listed.output or {}).get("next_cursor")
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
    sizes = [compact_bytes(p) for p in pages]
    v.expect(
        [len(p["items"]) for p in pages] == [50, 5],
        f"page sizes {[len(p['items']) for p in pages]}",
    )
    v.expect(max(sizes) <= PAGE_CEILING, f"a page of {max(sizes)} bytes exceeds 524,288")
    v.expect(sizes[0] >= 450_000, f"the full page is {sizes[0]} bytes: not the largest legal")
    v.expect(len(set(seen_ids)) == len(seen_ids) == DISCOVERY_COUNT, "pages overlap or miss")
    rows = {
        str(r["id"]): r
        for r in await world.sql(
            "SELECT * FROM schedules WHERE tenant_id = :t AND principal_id = :p",
            t=WHO.tenant_id,
            p=WHO.principal_id,
        )
    }
    v.expect(set(seen_ids) == set(rows), "the listing is not exactly the caller's schedules")
    text = json.dumps(pages, ensure_ascii=False)
    revisions_seen = []
    for item in (i for p in pages for i in p["items"]):
        v.expect(set(item) == SUMMARY_ALLOW_LIST, f"summary fields {sorted(item)}")
        v.expect(len(item["cadence"]["dates"]) == 366, "the yearly selector was cut")
        row = rows.get(item["schedule_id"])
        if row is None:
            continue
        revisions_seen.append(item["current_revision"])
        v.expect(
            item["current_revision"] == row["current_revision"],
            f"{item['schedule_id']}: summary revision {item['current_revision']!r},"
            f" row {row['current_revision']}",
        )
        v.expect(item["state"] == row["state"], f"{item['schedule_id']}: state {item['state']}")
        v.expect(len(item["title"]) == TITLE_MAX, f"title of {len(item['title'])} characters")
    v.expect(set(revisions_seen) == {1, 2, 3}, f"revisions listed {sorted(set(revisions_seen))}")
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
    middle = len(first) // 2
    flipped = first[:middle] + ("A" if first[middle : middle + 1] != "A" else "B")
    flipped += first[middle + 1 :]
    bad_args = "schedule.tool.invalid_arguments"
    for label, args, code in (
        ("limit 0", {"limit": 0}, bad_args),
        ("limit 51", {"limit": 51}, bad_args),
        ("extra field", {"state": "ACTIVE"}, bad_args),
    ):
        expect_code(v, await world.call("schedule.list", args, f"bad-{label}"), code, label)
    refused: dict[str, str | None] = {}
    forged = {
        "tampered cursor": flipped,
        "truncated cursor": first[:-2] + "xx",
        "forged cursor": "WyJzY2hlZHVsZXMiLCJ4IiwieSJd",
        **{f"cursor of {who}": c for who, c in cursors.items()},
    }
    v.expect(all(cursors.values()), f"another principal's listing gave no cursor: {cursors}")
    for label, value in forged.items():
        if not value:
            continue
        result = await world.call("schedule.list", {"cursor": value}, f"bad-{label}")
        stable_failure(v, result, label)
        v.expect(result.output is None or not result.output.get("items"), f"{label}: items")
        refused[label] = result.reason_code
    small = await world.call("schedule.list", {"limit": 1}, "list-small")
    v.expect(small.ok and small.output is not None and len(small.output["items"]) == 1, "limit 1")
    v.expect(not world.approvals.requests, "a read asked for approval")
    v.evidence["oversized"] = await oversized_output(world, v)
    v.evidence.update(
        page_bytes=sizes,
        ceiling=PAGE_CEILING,
        items=DISCOVERY_COUNT,
        yearly_pairs=366,
        revisions=sorted(set(revisions_seen)),
        refused_cursors=refused,
    )
    return v


async def oversized_output(world: ToolWorld, v: Verdict) -> dict[str, Any]:
    """schedule.list's handler swapped for one whose output is a page over
    the 524,288-byte ceiling in bytes, though under it in characters: the pipeline must
    refuse it (schedule.tool.output_too_large)
    and record the invocation FAILED, whatever the handler computed."""

    class Oversized:
        def __init__(self, inner: ToolHandler) -> None:
            self.inner = inner

        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            prepared = await self.inner.prepare(args, context)
            run = prepared.execute

            async def execute() -> dict[str, Any]:
                out = await run()
                # Two bytes a character: fewer characters than the ceiling, more bytes
                # (the ceiling counts the UTF-8 bytes the model receives).
                return {**out, "padding": "é" * (PAGE_CEILING // 2 + 1)}

            return PreparedCall(prepared.view, execute)

    restore = world.replace_handler("schedule.list", Oversized)
    try:
        result = await world.call("schedule.list", {"limit": 1}, "list-oversized")
    finally:
        restore()
    code = "schedule.tool.output_too_large"
    v.expect(
        result.status is ToolStatus.FAILED and result.reason_code == code and result.output is None,
        f"an oversized list output: {result.status} {result.reason_code}",
    )
    rows = await world.sql(
        "SELECT state, reason_code FROM tool_invocations WHERE id = :i", i=result.invocation_id
    )
    v.expect(
        rows == [{"state": "FAILED", "reason_code": code}],
        f"the oversized invocation is recorded as {rows}",
    )
    return {"status": str(result.status), "reason_code": result.reason_code, "ledger": rows}


def definition_for(title: str, instruction: str, cadence: dict[str, Any]) -> ScheduleDefinition:
    return definition(title=title, instruction=instruction, cadence=cadence)


async def pause_resume_check(world: ToolWorld) -> Verdict:
    """Discover "Morning briefing" among others, pause it after one approval, let three
    days pass, resume it after one approval at the first strictly future 09:00 Paris."""
    v = Verdict()
    sid = await create_via_tool(world, "Morning briefing", "c-1")
    evening = await create_via_tool(world, "Evening digest", "c-2")
    await create_via_tool(world, "Gym reminder", "c-3")
    await create_via_tool(world, "Gym reminder", "c-4")
    refusals = {
        "pause": await approval_refusals(
            world, v, "schedule.pause", {"schedule_id": evening, "expected_revision": 1}, "pause"
        )
    }
    asked = len(world.approvals.requests)
    chat = world.conversation()
    ambiguous = await chat.play(resolve_then("Gym reminder", "schedule.pause", "p-gym"))
    v.expect(
        len(ambiguous) == 1 and bool(chat.questions), "an ambiguous reference was not asked about"
    )
    results = await approved_after_inspection(
        world,
        v,
        lambda: chat.play(resolve_then("Morning briefing", "schedule.pause", "p-1")),
        "pause",
    )
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
    ref = {"schedule_id": sid, "expected_revision": 1}
    refusals["resume"] = await approval_refusals(world, v, "schedule.resume", ref, "resume")
    asked = len(world.approvals.requests) - 1
    # START is 2026-03-02T08:00Z; three days and two hours later it is 11:00 in Paris
    # (UTC+1) on 5 March, so the first strictly future 09:00 is 6 March 08:00Z.
    world.clock.advance(3 * 86400 + 7200)
    # A deploy rotates the active agent while the schedule is paused: resume keeps the
    # pinned revision (v1) and writes none.
    await world.activate(AGENT_VERSION_2)
    resumed = (
        await approved_after_inspection(
            world,
            v,
            lambda: world.conversation().play(
                resolve_then("Morning briefing", "schedule.resume", "r-1")
            ),
            "resume",
        )
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
    pinned = [(r["revision"], r["definition"]["agent_version"]) for r in await world.revisions(sid)]
    v.expect(pinned == [(1, AGENT_VERSION)], f"resume after the rotation re-pinned: {pinned}")
    events = await world.events(sid)
    v.expect(events == ["schedule.created", "schedule.paused", "schedule.resumed"], f"{events}")
    boundary = await resume_at_a_firing(world, v, sid)
    await no_unapproved_effects(world, v, "pause/resume")
    v.evidence.update(
        resumed_next_fire_at=want_next,
        events=events,
        questions=chat.questions,
        boundary=boundary,
        refusals=refusals,
    )
    return v


async def resume_at_a_firing(world: ToolWorld, v: Verdict, sid: str) -> dict[str, str]:
    """Pause, then resume with the clock exactly AT a nominal firing (6 March 08:00Z,
    09:00 Paris): "strictly after" means the next firing is 7 March 08:00Z, never now."""
    think = world.approvals.think_seconds
    world.approvals.think_seconds = 0
    try:
        at = datetime.fromisoformat("2026-03-06T08:00:00+00:00")
        world.clock.advance_to(at - timedelta(minutes=5))
        ref = {"schedule_id": sid, "expected_revision": 1}
        paused = await world.call("schedule.pause", ref, "p-boundary")
        v.expect(paused.ok, f"boundary pause: {paused.reason_code}")
        world.clock.advance_to(at)
        resumed = await world.call("schedule.resume", ref, "r-boundary")
    finally:
        world.approvals.think_seconds = think
    want = "2026-03-07T08:00:00Z"
    got = None if resumed.output is None else resumed.output.get("next_fire_at")
    v.expect(resumed.ok and got == want, f"resumed at {at}: next firing {got}, want {want}")
    row = await world.schedule(sid)
    v.expect(
        row["next_fire_at"] is not None and row["next_fire_at"] > at,
        f"resumed at {at}: stored next firing {row['next_fire_at']} is not after now",
    )
    return {"resumed_at": format_instant(at), "next_fire_at": str(got)}


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
    ref = {"schedule_id": sid, "expected_revision": 1}
    refusals = await approval_refusals(world, v, "schedule.cancel", ref, "cancel")
    result = (
        await approved_after_inspection(
            world,
            v,
            lambda: world.conversation().play(
                resolve_then("Daily digest", "schedule.cancel", "x-1")
            ),
            "cancel",
        )
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
    await no_unapproved_effects(world, v, "cancel")
    v.evidence.update(
        run_status=run_before[0]["status"], occurrences=len(occ_after), refusals=refusals
    )
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
    # Every scope, someone else's schedule: another principal of the tenant, and the
    # caller's own principal id in another tenant. Not found, before approval.
    strangers = {"another principal": OTHER, "another tenant": WHO_B}
    for tool in ("schedule.pause", "schedule.resume", "schedule.cancel"):
        for label, who in strangers.items():
            asked, whole = len(world.approvals.requests), await world.snapshot()
            result = await world.call(
                tool, mutate, f"stranger-{tool}-{label.replace(' ', '-')}", who=who
            )
            expect_code(v, result, "schedule.not_found", f"{tool} by {label}")
            await refused_before_approval(world, v, asked, whole, f"{tool} by {label}")
    exact = {
        "schedule.list": ({}, "schedule.read"),
        "schedule.pause": ({"schedule_id": b, "expected_revision": 1}, "schedule.write"),
        "schedule.cancel": ({"schedule_id": a, "expected_revision": 1}, "schedule.cancel"),
    }
    for tool, (args, scope) in exact.items():
        who = principal(WHO.principal_id, scopes={scope})
        result = await world.call(tool, args, f"exact-{tool}", who=who)
        v.expect(result.ok, f"{tool} with exactly {scope} failed: {result.reason_code}")
    v.evidence.update(
        denied=[f"{t} without {s}" for t, s in lacking],
        not_found=sorted(strangers),
        exact=sorted(exact),
    )
    return v


async def lifecycle_validation_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    a = await create_via_tool(world, "Alpha", "c-a")
    await create_via_tool(world, "Beta", "c-b")
    gone = await create_via_tool(world, "Gone", "c-g")
    once = await create_via_tool(world, "Once", "c-o", at=world.later(hours=1))
    done = await create_via_tool(world, "Done", "c-d", at=world.later(minutes=30))
    foreign = str((await world.service.create(OTHER, "o-1", definition())).schedule.id)
    # Another tenant's schedule, owned by a principal with the caller's own id.
    tenant_b = str((await world.service.create(WHO_B, "b-1", definition())).schedule.id)
    assert (
        await world.call("schedule.cancel", {"schedule_id": gone, "expected_revision": 1}, "k-g")
    ).ok
    assert (
        await world.call("schedule.pause", {"schedule_id": once, "expected_revision": 1}, "k-o")
    ).ok
    await world.service.patch(WHO, uuid(a), 1, SchedulePatch(title="Alpha 2"), "k-a")
    world.clock.advance(7200)
    # A one-time schedule that fired is COMPLETED: terminal, like a cancelled one.
    fired = await world.materializer().materialize(uuid(done))
    v.expect(fired.state_after is ScheduleState.COMPLETED, f"the one-time fire: {fired}")
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
        ("foreign pause", "schedule.pause", {"schedule_id": foreign, "expected_revision": 1}, nf),
        (
            "tenant-b cancel",
            "schedule.cancel",
            {"schedule_id": tenant_b, "expected_revision": 1},
            nf,
        ),
        ("tenant-b pause", "schedule.pause", {"schedule_id": tenant_b, "expected_revision": 1}, nf),
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
        *(
            (
                f"{tool.removeprefix('schedule.')} completed",
                tool,
                {"schedule_id": done, "expected_revision": 1},
                "schedule.lifecycle.illegal_transition",
            )
            for tool in ("schedule.cancel", "schedule.pause", "schedule.resume")
        ),
        (
            "resume past one-time",
            "schedule.resume",
            {"schedule_id": once, "expected_revision": 1},
            "schedule.validation.no_future_occurrence",
        ),
    ]
    # Only the past one-time resume is judged at execution (its cadence is not read
    # before approval); every other refusal comes before approval (ADR 2122).
    after_approval = {"resume past one-time"}
    for label, tool, args, code in cases:
        key = "v-" + label.replace(" ", "-")
        asked, whole = len(world.approvals.requests), await world.snapshot()
        expect_code(v, await world.call(tool, args, key), code, label)
        after = await schedule_rows(world)
        v.expect(after == before, f"{label}: changed {changed_tables(before, after)}")
        if label not in after_approval:
            await refused_before_approval(world, v, asked, whole, label)
    v.evidence["failures"] = {label: code for label, _, _, code in cases}
    v.evidence["raced"] = await revision_moves_during_approval(
        world, v, "schedule.pause", await create_via_tool(world, "Raced", "c-r"), {}
    )
    return v


async def refused_before_approval(
    world: ToolWorld, v: Verdict, asked: int, before: dict[str, list[Row]], label: str
) -> None:
    """Nobody was asked and no table changed (no invocation or approval row either)."""
    extra = len(world.approvals.requests) - asked
    v.expect(extra == 0, f"{label}: asked for approval {extra} time(s) before failing")
    await unchanged(world, v, before, f"{label} (refused before approval)")


async def revision_moves_during_approval(
    world: ToolWorld, v: Verdict, tool: str, sid: str, extra: dict[str, Any]
) -> str:
    """The user edits the schedule while the call's approval is pending: the approved
    call still fails stale when it executes (the re-check under the row lock)."""

    async def user_edits(request: ApprovalRequest) -> None:
        world.clock.advance(1)  # after the create's event, so the events order by time
        await world.service.patch(WHO, uuid(sid), 1, SchedulePatch(title="Edited"), f"e-{tool}")

    args = {"schedule_id": sid, "expected_revision": 1, **extra}
    world.approvals.on_request = user_edits
    try:
        result = await world.call(tool, args, f"race-{tool}")
    finally:
        world.approvals.on_request = None
    expect_code(v, result, "schedule.lifecycle.stale_revision", f"{tool} raced by an edit")
    # The stale execution is the key's final result: the same call again answers the
    # same failure, asks nobody and changes nothing.
    asked, before = len(world.approvals.requests), await world.snapshot()
    again = await world.call(tool, args, f"race-{tool}")
    expect_code(v, again, "schedule.lifecycle.stale_revision", f"{tool} raced, then retried")
    v.expect(len(world.approvals.requests) == asked, f"{tool} raced, then retried: asked again")
    await unchanged(world, v, before, f"{tool} raced, then retried")
    row = await world.schedule(sid)
    v.expect(row["current_revision"] == 2, f"{tool} raced: revision {row['current_revision']}")
    v.expect(row["state"] == "ACTIVE", f"{tool} raced: state {row['state']}")
    events = await world.events(sid)
    v.expect(events == ["schedule.created", "schedule.updated"], f"{tool} raced: events {events}")
    return str(result.reason_code)


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
    crashes = await lifecycle_crashes_after_approval(world, v)
    # One key, four principals: each pauses its own schedule, none replays another's.
    own = {}
    for who in (WHO, OTHER, WHO_B, OTHER_B):
        own[who] = str((await world.service.create(who, "iso", definition())).schedule.id)
    await same_key_isolation(
        world,
        v,
        "schedule.pause",
        lambda who: {"schedule_id": own[who], "expected_revision": 1},
    )
    for who, sid in own.items():
        row = await world.schedule(sid)
        v.expect(row["state"] == "PAUSED", f"shared key: {who.principal_id}'s schedule not paused")
    await no_unapproved_effects(world, v, "lifecycle retry")
    v.evidence.update(states=states, events=events, crashes=crashes)
    return v


async def lifecycle_crashes_after_approval(world: ToolWorld, v: Verdict) -> dict[str, str]:
    """For pause, resume and cancel: the approval commits, the process dies before the
    effect, the user changes the schedule (cancel / a new revision), the model retries
    with the same key. The retry may fail closed or ask again; it never applies the
    approved action to a schedule the approval did not see."""
    out: dict[str, str] = {}
    p = str((await world.service.create(WHO, "crash-p", definition(title="Crash p"))).schedule.id)
    r = str((await world.service.create(WHO, "crash-r", definition(title="Crash r"))).schedule.id)
    c = str((await world.service.create(WHO, "crash-c", definition(title="Crash c"))).schedule.id)
    await world.service.pause(WHO, uuid(r), 1)
    cases = (
        ("schedule.pause", p, "schedule.paused", "CANCELLED"),
        ("schedule.resume", r, "schedule.resumed", "PAUSED"),
        ("schedule.cancel", c, "schedule.cancelled", "ACTIVE"),
    )
    for tool, sid, event, state in cases:
        ref = {"schedule_id": sid, "expected_revision": 1}
        key = f"crash-{tool}"
        before = await effect_rows(world)
        await crash_after_approval(world, tool, ref, key)
        await unchanged_effects(world, v, before, f"{tool} crash after approval")
        if tool == "schedule.pause":
            await world.service.cancel(WHO, uuid(sid), 1)
        else:
            await world.service.patch(
                WHO, uuid(sid), 1, SchedulePatch(title="Moved on"), f"user-{key}"
            )
        retry = await world.call(tool, ref, key)
        stable_failure(v, retry, f"{tool} retry after the schedule changed")
        row = await world.schedule(sid)
        v.expect(row["state"] == state, f"{tool} retry: state {row['state']}, want {state}")
        v.expect(event not in await world.events(sid), f"{tool} retry: {event} after the change")
        out[tool] = str(retry.reason_code)
    return out


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
    refusals = await approval_refusals(
        world,
        v,
        "schedule.update",
        {"schedule_id": sid, "expected_revision": 1, "title": "x"},
        "update",
    )
    # The deploy rotates the active agent after creation: the edit keeps the pinned one.
    await world.activate(AGENT_VERSION_2)
    world.clock.advance(3600)
    instruction = "Summarize only security and infrastructure news."
    model = resolve_then(
        "News digest", "schedule.update", "u-1", instruction=instruction, cadence=WEEKLY_WED
    )
    result = (
        await approved_after_inspection(
            world, v, lambda: world.conversation().play(model), "update"
        )
    )[-1]
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
    v.expect(
        (new["agent_version"], new["policy_profile"]) == (AGENT_VERSION, POLICY),
        f"the edit re-pinned {new['agent_version']}/{new['policy_profile']}"
        f" (pinned {AGENT_VERSION}/{POLICY}, active {AGENT_VERSION_2}/{POLICY_2})",
    )
    row = await world.schedule(sid)
    v.expect(row["current_revision"] == 2 and row["state"] == "ACTIVE", "not revision 2, active")
    # Updated at ~09:00Z on Monday 2 March; Wednesday 08:00 PST (UTC-8) is 4 March 16:00Z.
    want_next = "2026-03-04T16:00:00Z"
    v.expect(format_instant(row["next_fire_at"]) == want_next, f"next {row['next_fire_at']}")
    v.expect(result.output is not None and result.output.get("next_fire_at") == want_next, "output")
    v.expect(
        result.output is not None and set(result.output) == {*MUTATION_OUTPUT, "replayed"},
        "output fields",
    )
    v.expect(await world.events(sid) == ["schedule.created", "schedule.updated"], "events")
    boundary = await update_at_a_firing(world, v, sid)
    await no_unapproved_effects(world, v, "update")
    v.evidence.update(
        approval_view=view, next_fire_at=want_next, boundary=boundary, refusals=refusals
    )
    return v


async def update_at_a_firing(world: ToolWorld, v: Verdict, sid: str) -> dict[str, str]:
    """An edit with the clock exactly AT the schedule's next firing (Wednesday 4 March
    16:00Z): the recomputed firing is strictly after now, the next Wednesday; Los Angeles
    is on PDT (UTC-7) from 8 March, so 08:00 on 11 March is 15:00Z. Its view names the
    title as the patch and the instruction and cadence as unchanged. Then an edit of the
    instruction with ``at``: the instant replaces the cadence, so only the title is
    unchanged (the cadence is not)."""
    at = datetime.fromisoformat("2026-03-04T16:00:00+00:00")
    think = world.approvals.think_seconds
    world.approvals.think_seconds = 0
    try:
        world.clock.advance_to(at)
        ref = {"schedule_id": sid, "expected_revision": 2, "title": "News digest, weekly"}
        result = await world.call("schedule.update", ref, "u-boundary")
        titled = last_view(world)
        once = {
            "schedule_id": sid,
            "expected_revision": 3,
            "instruction": "Summarize the security news once more.",
            "at": "2026-03-20T10:00:00Z",
        }
        replaced = await world.call("schedule.update", once, "u-at")
        timed = last_view(world)
    finally:
        world.approvals.think_seconds = think
    want = "2026-03-11T15:00:00Z"
    got = None if result.output is None else result.output.get("next_fire_at")
    v.expect(result.ok and got == want, f"updated at {at}: next firing {got}, want {want}")
    v.expect(
        titled.get("patch") == {"title": "News digest, weekly"}
        and titled.get("unchanged") == ["instruction", "cadence"],
        f"a title edit's view {titled}",
    )
    v.expect(replaced.ok, f"an edit with at: {replaced.reason_code} {replaced.details}")
    v.expect(
        set(timed.get("patch", {})) == {"instruction", "at"}
        and timed.get("unchanged") == ["title"],
        f"an edit with at: its view {timed} (the instant replaces the cadence)",
    )
    return {
        "updated_at": format_instant(at),
        "next_fire_at": str(got),
        "unchanged_with_at": str(timed.get("unchanged")),
    }


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
    v.expect(first["agent_version"] == AGENT_VERSION, "the seed did not pin v1")
    # Rotate the active agent: an edit must keep v1 and its policy, not re-pin v2.
    await world.activate(AGENT_VERSION_2)
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
    foreign = str((await world.service.create(OTHER, "o-1", definition())).schedule.id)
    tenant_b = str((await world.service.create(WHO_B, "b-1", definition())).schedule.id)
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
    bad_text = await bad_text_refused(
        world,
        v,
        "schedule.update",
        {**ref, "title": "Alpha 2", "instruction": "New words.", "cadence": DAILY_PARIS},
        ("cadence", "timezone"),
    )
    before_approval = [
        (
            "unknown",
            {"schedule_id": str(UUID(int=9)), "expected_revision": 1, "title": "x"},
            "schedule.not_found",
        ),
        (
            "foreign",
            {"schedule_id": foreign, "expected_revision": 1, "title": "x"},
            "schedule.not_found",
        ),
        (
            "tenant-b",
            {"schedule_id": tenant_b, "expected_revision": 1, "title": "x"},
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
    for label, args, code in before_approval:
        asked, whole = len(world.approvals.requests), await world.snapshot()
        expect_code(v, await world.call("schedule.update", args, "v-" + label), code, label)
        await refused_before_approval(world, v, asked, whole, label)
    after = await schedule_rows(world)
    v.expect(after == before, f"a failed update wrote {changed_tables(before, after)}")
    everything = dumps(await world.snapshot())
    v.expect(token not in everything and token[4:] not in everything, "the secret reached a row")
    v.evidence["failures"] = {label: code for label, _, code in (*pre_approval, *before_approval)}
    v.evidence["bad_text"] = bad_text
    v.evidence["raced"] = await revision_moves_during_approval(
        world, v, "schedule.update", await create_via_tool(world, "Raced", "c-r"), {"title": "M"}
    )
    return v


async def update_retry_check(world: ToolWorld) -> Verdict:
    v = Verdict()
    sid = await create_via_tool(world, "Alpha", "c-a")
    args = {
        "schedule_id": sid,
        "expected_revision": 1,
        "instruction": "Shorter, please.",
        "cadence": {**WEEKLY_WED, "weekdays": [5, 3]},
    }
    first = await world.call("schedule.update", args, "u-1")
    v.expect(first.ok and first.output is not None and first.output["replayed"] is False, "first")
    after_first = await schedule_rows(world)
    asked = len(world.approvals.requests)
    again = await world.call("schedule.update", dict(reversed(list(args.items()))), "u-1")
    v.expect(len(world.approvals.requests) == asked, "the replay asked for approval again")
    v.expect(again.ok and again.output is not None and again.output["replayed"] is True, "replay")
    v.expect(again.output is not None and again.output["current_revision"] == 2, "replay revision")
    # The same patch written another way (an upper-case id, sorted weekdays, HH:MM:SS).
    spelled = {
        **args,
        "schedule_id": sid.upper(),
        "cadence": {**WEEKLY_WED_CANONICAL, "weekdays": [3, 5]},
    }
    same = await world.call("schedule.update", spelled, "u-1")
    v.expect(
        same.ok and same.replayed and out_id(same) == sid,
        f"normalized retry: {same.status} {same.reason_code} replayed={same.replayed}",
    )
    v.expect(len(world.approvals.requests) == asked, "the normalized retry asked for approval")
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
    # The approval commits, the process dies before the effect, the user edits the
    # schedule (revision 4): the retry must fail closed, never write over the new revision.
    crash = {"schedule_id": sid, "expected_revision": 3, "instruction": "Approved words."}
    before = await effect_rows(world)
    await crash_after_approval(world, "schedule.update", crash, "u-3")
    await unchanged_effects(world, v, before, "update crash after approval")
    await world.service.patch(WHO, uuid(sid), 3, SchedulePatch(title="User's own edit"), "user-u3")
    retry = await world.call("schedule.update", crash, "u-3")
    stable_failure(v, retry, "update retry after the schedule changed")
    latest = (await world.revisions(sid))[-1]
    v.expect(
        latest["revision"] == 4 and latest["definition"]["instruction"] != "Approved words.",
        f"the retry wrote over the user's edit: revision {latest['revision']}",
    )
    # One key, four principals: each edits its own schedule.
    own = {}
    for who in (WHO, OTHER, WHO_B, OTHER_B):
        own[who] = str((await world.service.create(who, "iso", definition())).schedule.id)
    await same_key_isolation(
        world,
        v,
        "schedule.update",
        lambda who: {"schedule_id": own[who], "expected_revision": 1, "title": "Same edit"},
    )
    for who, own_id in own.items():
        row = await world.schedule(own_id)
        v.expect(row["current_revision"] == 2, f"shared key: {who.principal_id}'s edit missing")
    await no_unapproved_effects(world, v, "update retry")
    v.evidence.update(revisions=3, events=events, crash_retry=retry.reason_code)
    return v


# ---------------------------------------------------------------- approval, observed


async def approval_behaviour_check(world: ToolWorld, names: Iterable[str]) -> Verdict:
    """Whether each tool waits for approval, observed through the pipeline (the approver
    declines and counts), against the spec's quoted rule (``approval_required``), never
    the product's own policy object."""
    v = Verdict()
    sid = str((await world.service.create(WHO, "probe", definition(title="Probe"))).schedule.id)
    ref = {"schedule_id": sid, "expected_revision": 1}
    arguments: dict[str, dict[str, Any]] = {
        "schedule.create": {"title": "Probe", "instruction": "Probe.", "at": world.later(days=1)},
        "schedule.list": {},
        "schedule.update": {**ref, "title": "Probe 2"},
        "schedule.pause": ref,
        "schedule.resume": ref,
        "schedule.cancel": ref,
    }
    observed = {}
    for name in names:
        asked = len(world.approvals.requests)
        world.approvals.push(False)
        result = await world.call(name, arguments[name], f"approval-probe-{name}")
        waited = len(world.approvals.requests) > asked
        if not waited:
            world.approvals.drop_verdicts()
        observed[name] = waited
        want = approval_required(name)
        v.expect(waited == want, f"{name}: waited for approval={waited}, the spec says {want}")
        if want:
            v.expect(not result.ok, f"{name}: a declined call succeeded")
    v.evidence["approval"] = observed
    return v


# ---------------------------------------------------------------- summaries, outputs, bytes

# A daily 09:00 in Paris (UTC+1 until 29 March) created just after START
# (2026-03-02T08:00Z, itself 09:00 in Paris): its first strictly future firing, by hand.
DAILY_PARIS_NEXT = "2026-03-03T08:00:00Z"
DAILY_PARIS_CANONICAL = {"kind": "DAILY", "local_time": "09:00:00", "timezone": "Europe/Paris"}


async def summary_fidelity_check(world: ToolWorld) -> Verdict:
    """One schedule in each state the model must tell apart - ACTIVE, PAUSED by the
    user, PAUSED at the failure limit, CANCELLED - and one edited to revision 2: each
    summary carries its own state, pause reason, next firing, revision and canonical
    cadence, written out by hand (a summary that shows every schedule live, or hides
    when it fires or why it is paused, would send the model to act on the wrong one).
    A forged cursor is refused without writing any row, tool ledger included."""
    v = Verdict()
    live = await create_via_tool(world, "Live", "s-live")
    paused = await create_via_tool(world, "Paused", "s-paused")
    gone = await create_via_tool(world, "Gone", "s-gone")
    edited = await create_via_tool(world, "Edited", "s-edited")
    ref = {"expected_revision": 1}
    steps = (
        ("schedule.pause", paused, "s-p"),
        ("schedule.cancel", gone, "s-c"),
    )
    for tool, sid, key in steps:
        done = await world.call(tool, {**ref, "schedule_id": sid}, key)
        v.expect(done.ok, f"{tool}: {done.reason_code}")
    patch = {**ref, "schedule_id": edited, "title": "Edited twice"}
    done = await world.call("schedule.update", patch, "s-u")
    v.expect(done.ok, f"schedule.update: {done.reason_code}")
    # The failure-limit pause the accountant writes after consecutive failures, set
    # directly (as the maintenance rule's check does): the model must not read it as
    # the user's own pause.
    failing = await create_via_tool(world, "Failing", "s-failing")
    await world.sql(
        "UPDATE schedules SET state = 'PAUSED', pause_reason = 'failure_limit',"
        " next_fire_at = NULL WHERE id = :i",
        i=uuid(failing),
    )
    want: dict[str, dict[str, Any]] = {
        live: {"title": "Live", "state": "ACTIVE", "pause_reason": None, "rev": 1},
        paused: {"title": "Paused", "state": "PAUSED", "pause_reason": "user", "rev": 1},
        failing: {
            "title": "Failing",
            "state": "PAUSED",
            "pause_reason": "failure_limit",
            "rev": 1,
        },
        gone: {"title": "Gone", "state": "CANCELLED", "pause_reason": None, "rev": 1},
        edited: {"title": "Edited twice", "state": "ACTIVE", "pause_reason": None, "rev": 2},
    }
    listed = await world.call("schedule.list", {}, "s-list")
    if not v.expect(listed.ok, f"list: {listed.reason_code}"):
        return v
    assert listed.output is not None
    items = {item["schedule_id"]: item for item in listed.output["items"]}
    v.expect(set(items) == set(want), f"listed {sorted(items)}, not {sorted(want)}")
    for sid, w in want.items():
        item = items.get(sid, {})
        live_now = w["state"] == "ACTIVE"
        expected = {
            "schedule_id": sid,
            "title": w["title"],
            "state": w["state"],
            "pause_reason": w["pause_reason"],
            "current_revision": w["rev"],
            # Paused and cancelled schedules have no next firing; live ones fire next
            # at the first 09:00 Paris strictly after now.
            "next_fire_at": DAILY_PARIS_NEXT if live_now else None,
            "cadence": DAILY_PARIS_CANONICAL,
        }
        v.expect(item == expected, f"{w['title']}: summary {item}, want {expected}")
    # Paged two at a time, every page keeps the limit (not only the first).
    paged: list[int] = []
    cursor: str | None = None
    for n in range(len(want)):
        args: dict[str, Any] = {"limit": 2} if cursor is None else {"limit": 2, "cursor": cursor}
        page = (await world.call("schedule.list", args, f"s-page-{n}")).output or {}
        paged.append(len(page.get("items", [])))
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    v.expect(paged == [2, 2, 1], f"pages of limit 2 held {paged} summaries, not [2, 2, 1]")
    before = await world.snapshot()
    forged = await world.call("schedule.list", {"cursor": "WyJ4Il0"}, "s-forged")
    stable_failure(v, forged, "forged cursor")
    await unchanged(world, v, before, "a refused list")
    # A read is never answered from the ledger: the same key again, after a change,
    # lists the schedules as they are now.
    done = await world.call("schedule.cancel", {**ref, "schedule_id": live}, "s-c2")
    v.expect(done.ok, f"schedule.cancel: {done.reason_code}")
    again = await world.call("schedule.list", {}, "s-list")
    now = {i["schedule_id"]: i["state"] for i in (again.output or {}).get("items", [])}
    v.expect(
        again.ok and not again.replayed and now.get(live) == "CANCELLED",
        f"the same list key after a cancel: replayed={again.replayed}, state {now.get(live)}",
    )
    v.evidence.update(states={w["title"]: w["state"] for w in want.values()})
    return v


async def mutation_outputs_check(world: ToolWorld) -> Verdict:
    """Each mutation's output is the schedule it left, written out by hand: pause says
    PAUSED by the user with no next firing, resume the next 09:00 Paris, cancel
    CANCELLED with none (the spec: stable ID, current revision, state, pause reason,
    next firing)."""
    v = Verdict()
    sid = await create_via_tool(world, "Outputs", "o-1")
    ref = {"schedule_id": sid, "expected_revision": 1}
    want = {
        "schedule.pause": ("PAUSED", "user", None),
        "schedule.resume": ("ACTIVE", None, DAILY_PARIS_NEXT),
        "schedule.cancel": ("CANCELLED", None, None),
    }
    outputs = {}
    for tool, (state, reason, fire) in want.items():
        result = await world.call(tool, ref, f"o-{tool}")
        expected = {
            "schedule_id": sid,
            "current_revision": 1,
            "state": state,
            "pause_reason": reason,
            "next_fire_at": fire,
        }
        v.expect(result.output == expected, f"{tool}: output {result.output}, want {expected}")
        outputs[tool] = result.output
    v.evidence["outputs"] = outputs
    return v


def padded_to(target: list[int], sizes: list[int]) -> Callable[[ToolHandler], ToolHandler]:
    """A wrapper of a tool's real handler whose output gets a ``padding`` field (of
    one- and two-byte characters) sized so that the whole output is exactly
    ``target[0]`` UTF-8 bytes of compact JSON (what the model receives); ``sizes``
    collects each padded output's bytes."""

    class Padded:
        def __init__(self, inner: ToolHandler) -> None:
            self.inner = inner

        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            prepared = await self.inner.prepare(args, context)
            run = prepared.execute

            async def execute() -> dict[str, Any]:
                out = {**(await run()), "padding": ""}
                room = target[0] - compact_bytes(out)
                # Two-byte characters for half the room: the ceiling counts the UTF-8
                # bytes of compact JSON, not characters, escapes or pretty-printing.
                wide = room // 4
                out["padding"] = "\u00e9" * wide + "x" * (room - 2 * wide)
                sizes.append(compact_bytes(out))
                return out

            return PreparedCall(prepared.view, execute)

    return Padded


async def ceiling_edges(
    world: ToolWorld,
    v: Verdict,
    tool: str,
    args: dict[str, Any],
    ceiling: int,
    over_args: dict[str, Any] | None = None,
) -> dict[str, str]:
    """``tool``'s output padded to exactly its ceiling is delivered whole; one byte more
    (the call with ``over_args``, default ``args``) is ``schedule.tool.output_too_large``
    with no output, recorded FAILED."""

    target: list[int] = [0]
    sizes: list[int] = []
    restore = world.replace_handler(tool, padded_to(target, sizes))
    seen: dict[str, str] = {}
    try:
        edges = (("at the ceiling", ceiling, args), ("one byte over", ceiling + 1, over_args))
        for label, size, arguments in edges:
            target[0] = size
            result = await world.call(tool, arguments or args, f"edge-{tool}-{size}")
            over = size > ceiling
            rows = await world.sql(
                "SELECT state, reason_code FROM tool_invocations WHERE id = :i",
                i=result.invocation_id,
            )
            if over:
                v.expect(
                    result.reason_code == "schedule.tool.output_too_large"
                    and result.output is None,
                    f"{tool} {label} ({size} bytes): {result.status} {result.reason_code}",
                )
                want_rows = [{"state": "FAILED", "reason_code": "schedule.tool.output_too_large"}]
                v.expect(rows == want_rows, f"{tool} {label}: recorded {rows}")
            else:
                v.expect(
                    result.ok
                    and result.output is not None
                    and compact_bytes(result.output) == ceiling,
                    f"{tool} {label} ({size} bytes): {result.status} {result.reason_code}",
                )
                v.expect(rows == [{"state": "SUCCEEDED", "reason_code": None}], f"{rows}")
            seen[label] = f"{result.status.value} {result.reason_code}"
    finally:
        restore()
    v.expect(sizes == [ceiling, ceiling + 1], f"{tool}: padded to {sizes}")
    return seen


async def discovery_ceiling_check(world: ToolWorld) -> Verdict:
    """schedule.list at exactly the spec's 524,288 bytes, then one byte over."""
    v = Verdict()
    await create_via_tool(world, "Listed", "l-1")
    v.evidence["list"] = await ceiling_edges(world, v, "schedule.list", {}, DISCOVERY_BYTES)
    return v


async def mutation_ceiling_check(world: ToolWorld) -> Verdict:
    """Every mutation (and creation) at exactly the spec's 4,096 bytes, then one over:
    the ceiling binds the effectful tools too, not only the discovery read."""
    v = Verdict()
    sid = await create_via_tool(world, "Bounded", "m-1")
    ref = {"schedule_id": sid, "expected_revision": 1}
    # Each pair succeeds in order (a repeated pause, resume or cancel is the no-op that
    # still answers; the second edit names the first edit's revision).
    made = {"title": "Made", "instruction": "Made.", "at": world.later(days=1)}
    calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "schedule.pause": (ref, ref),
        "schedule.resume": (ref, ref),
        "schedule.update": (
            {**ref, "title": "Bounded again"},
            {**ref, "expected_revision": 2, "title": "Bounded once more"},
        ),
        "schedule.cancel": ({**ref, "expected_revision": 3}, {**ref, "expected_revision": 3}),
        "schedule.create": (made, made),
    }
    for tool, (first, second) in calls.items():
        v.evidence[tool] = await ceiling_edges(world, v, tool, first, MUTATION_BYTES, second)
    return v
