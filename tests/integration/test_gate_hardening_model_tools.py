"""Tests of the model-tool case gates: each check, run on a world with one plausible wrong
implementation swapped in, reports problems (real PostgreSQL, the same checks the gates
run). Wrong implementations are swapped onto the world ``bootstrap.build_tools`` built
(its pipeline object's class, a registered handler, a service method, a ledger port):
a pipeline that asks approval before the scope check, one that skips the check, one
that never replays, one that ignores a decline, one that takes a timeout for consent,
lets the approval port's exception escape, never bounds the approval wait or records a
timeout as a decline;
a policy that approves nothing; a ledger that lets anyone decide or finds keys across
principals; lifecycle tools that act in prepare; an update that re-pins the active
agent; summaries at revision 1; no output ceiling; next firings at now; tools that widen scopes,
skip the future check, show a raw cadence, accept both at and cadence, leak the
instruction, ignore the page limit, ignore the expected revision, prepare a lifecycle
call or an update without reading the schedule (asked before not found), cancel as a pause,
rebuild the definition on update, invent unchanged fields, or skip the secret scan.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

import scheduling.service.schedules as schedules_module
import scheduling.tools.create as create_module
from gates.checks import tool_checks as checks
from gates.checks.tool_support import WHO, ToolWorld
from scheduling.adapters.memory.tool_ledger import MemoryToolLedger
from scheduling.domain.recurrence.engine import next_after
from scheduling.runtime.tool_pipeline import (
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    Governance,
    PreparedCall,
    ToolExecutionContext,
    ToolHandler,
    ToolPipeline,
    ToolResult,
    ToolSpec,
)
from scheduling.service.schedules import patched_definition
from scheduling.service.values import ScheduleDefinition
from scheduling.tools.common import mutation_output
from scheduling.tools.listing import summary
from simulation.worlds.service import definition
from simulation.worlds.service import principal as principal_of

Mutant = Callable[[ToolWorld], None]
Check = Callable[[ToolWorld], Awaitable[checks.Verdict]]


class ApprovesFirst(ToolPipeline):
    """Asks for approval before the exact-scope check."""

    async def call(
        self,
        name: str,
        arguments: object,
        context: ToolExecutionContext,
        *,
        version: str | None = None,
    ) -> ToolResult:
        assert self.governance is not None
        request = ApprovalRequest(
            self.governance.ids.new_uuid(),
            self.governance.ids.new_uuid(),
            name,
            version or "",
            context.principal.tenant_id,
            context.principal.principal_id,
            {"arguments": "pending"},
        )
        await self.governance.approvals.decide(request)
        return await super().call(name, arguments, context, version=version)


class SkipsScopeCheck(ToolPipeline):
    """Runs governed calls as if the principal held every scope the tool needs."""

    async def call(
        self,
        name: str,
        arguments: object,
        context: ToolExecutionContext,
        *,
        version: str | None = None,
    ) -> ToolResult:
        tool = self.registry.get(name, version)
        if tool is not None:
            wide = dataclasses.replace(
                context.principal, scopes=context.principal.scopes | tool.spec.required_scopes
            )
            context = dataclasses.replace(context, principal=wide)
        return await super().call(name, arguments, context, version=version)


_CALL: contextvars.ContextVar[int] = contextvars.ContextVar("never_replays_call", default=0)
"""The number of the ``NeverReplays`` call this task is in (each call's own key suffix)."""


class NeverReplays(ToolPipeline):
    """Ignores the caller's key: each invocation is recorded under a fresh one, so no
    retry is ever recognised (the service's own ledger is all that is left). Calls may
    overlap (the checks race two calls with one key): the ledger and the record builder
    are patched while any call runs and put back when the last one ends."""

    async def call(
        self,
        name: str,
        arguments: object,
        context: ToolExecutionContext,
        *,
        version: str | None = None,
    ) -> ToolResult:
        ledger = self.governance.ledger if self.governance else None
        assert ledger is not None
        self._calls = getattr(self, "_calls", 0) + 1
        this_call = _CALL.set(self._calls)
        active = getattr(self, "_active", 0)
        if active == 0:
            self._original_find = ledger.find
            record = self._record

            async def find(*_: Any) -> None:
                return None

            def fresh(*a: Any, **k: Any) -> Any:
                made = record(*a, **k)
                if made.idempotency_key is None:
                    return made
                return dataclasses.replace(
                    made, idempotency_key=f"{made.idempotency_key}#{_CALL.get()}"
                )

            ledger.find = find  # type: ignore[method-assign,assignment]
            self._record = fresh  # type: ignore[method-assign]
        self._active = active + 1
        try:
            return await super().call(name, arguments, context, version=version)
        finally:
            _CALL.reset(this_call)
            self._active -= 1
            if self._active == 0:
                ledger.find = self._original_find  # type: ignore[method-assign]
                del self._record


class ApprovesNothing(ApprovalPolicy):
    def requires_approval(self, spec: ToolSpec) -> bool:
        return False


def handler_of(world: ToolWorld, name: str) -> Any:
    tool = world.role.registry.get(name)
    assert tool is not None
    return tool.handler


def wrap(
    world: ToolWorld,
    name: str,
    *,
    view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    output: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Swap ``name``'s handler for one that edits its arguments, view or output."""

    class Wrapped:
        def __init__(self, inner: ToolHandler) -> None:
            self.inner = inner

        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            args = arguments(dict(args)) if arguments else args
            prepared = await self.inner.prepare(args, context)
            run = prepared.execute

            async def execute() -> dict[str, Any]:
                out = await run()
                return output(out) if output else out

            return PreparedCall(view(prepared.view) if view else prepared.view, execute)

    world.replace_handler(name, Wrapped)


def widen_scopes(world: ToolWorld) -> None:
    deps = handler_of(world, "schedule.create")._deps
    service = deps.service
    original = service.create

    async def create(principal: Any, key: str, d: ScheduleDefinition) -> Any:
        return await original(
            principal, key, dataclasses.replace(d, requested_scopes=frozenset({"memory.read"}))
        )

    service.create = create


def no_future_check(world: ToolWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(create_module, "require_future", lambda payload, clock: None)


def raw_cadence_view(world: ToolWorld) -> None:
    def raw(view: dict[str, Any]) -> dict[str, Any]:
        if "cadence" in view:
            view = {
                **view,
                "cadence": {**view["cadence"], "local_time": view["cadence"]["local_time"][:5]},
            }
        return view

    wrap(world, "schedule.create", view=raw)


def both_when_accepted(world: ToolWorld) -> None:
    for spec in world.role.registry.versions("schedule.create"):
        schema = dict(spec.input_schema)
        schema.pop("oneOf")
        object.__setattr__(spec, "input_schema", schema)
    wrap(
        world,
        "schedule.create",
        arguments=lambda a: {k: v for k, v in a.items() if k != "cadence"} if "at" in a else a,
    )


def leak_instruction(world: ToolWorld) -> None:
    service = world.service
    original = service.list

    def leaky(out: dict[str, Any]) -> dict[str, Any]:
        for item in out.get("items", []):
            item["instruction_preview"] = instructions.get(item["schedule_id"], "")
        return out

    instructions: dict[str, str] = {}

    async def remember(principal: Any, **kw: Any) -> Any:
        page = await original(principal, **kw)
        for s in page.items:
            instructions[str(s.schedule_id)] = s.instruction_preview
            assert set(summary(s)) == checks.SUMMARY_ALLOW_LIST
        return page

    service.list = remember  # type: ignore[method-assign]
    wrap(world, "schedule.list", output=leaky)


def ignore_limit(world: ToolWorld) -> None:
    wrap(
        world, "schedule.list", arguments=lambda a: {**a, "limit": 50} if a.get("limit") == 1 else a
    )
    original = world.service.list

    async def everything(principal: Any, **kw: Any) -> Any:
        kw["limit"] = 200
        return await original(principal, **kw)

    world.service.list = everything  # type: ignore[method-assign]


def ignore_revision(world: ToolWorld) -> None:
    service = world.service
    original = service.pause

    async def pause(principal: Any, sid: Any, expected: int) -> Any:
        current = (await service.get(principal, sid)).schedule.current_revision
        return await original(principal, sid, current)

    service.pause = pause  # type: ignore[method-assign,assignment]


def cancel_as_pause(world: ToolWorld) -> None:
    world.service.cancel = world.service.pause  # type: ignore[method-assign]


def rebuild_on_update(world: ToolWorld) -> None:
    service = world.service

    async def patch(principal: Any, sid: Any, expected: int, p: Any, key: str) -> Any:
        current = (await service.get(principal, sid)).revision
        fresh = definition(
            title=p.title or current.title,
            instruction=p.instruction or current.instruction,
            cadence=dict(p.cadence) if p.cadence else dict(current.cadence),
        )
        return await service.update(principal, sid, expected, fresh, key)

    service.patch = patch  # type: ignore[method-assign,assignment]


def invent_unchanged(world: ToolWorld) -> None:
    wrap(
        world,
        "schedule.update",
        view=lambda v: {**v, "patch": {"title": "News digest", **v["patch"]}, "unchanged": []},
    )


def no_secret_scan(world: ToolWorld) -> None:
    class Blind:
        def scan(self, text: str) -> list[Any]:
            return []

    deps = handler_of(world, "schedule.update")._deps
    object.__setattr__(deps, "scanner", Blind())


class IgnoresDecline(ToolPipeline):
    """Asks, records the answer, then carries on as if it were yes."""

    async def _approve(self, *args: Any, **kwargs: Any) -> ToolResult | None:
        await super()._approve(*args, **kwargs)
        return None


class TimeoutApproves(ToolPipeline):
    """Treats an approver that never answered (or could not be reached) as consent."""

    async def _ask(self, gov: Governance, request: ApprovalRequest) -> ApprovalDecision | None:
        answer = await super()._ask(gov, request)
        return answer or ApprovalDecision(approved=True, decided_by="timeout")


class TimeoutEscapes(ToolPipeline):
    """Lets the approval port's exception escape ``call`` (which promises never to raise)."""

    async def _ask(self, gov: Governance, request: ApprovalRequest) -> ApprovalDecision | None:
        return await gov.approvals.decide(request)


class UnboundedWait(ToolPipeline):
    """Turns a port's error into the timeout result but never bounds the wait itself."""

    async def _ask(self, gov: Governance, request: ApprovalRequest) -> ApprovalDecision | None:
        try:
            return await gov.approvals.decide(request)
        except Exception:
            return None


class TimeoutIsFinal(ToolPipeline):
    """Records an unanswered approval as a decline (the retry can never ask again)."""

    async def _ask(self, gov: Governance, request: ApprovalRequest) -> ApprovalDecision | None:
        answer = await super()._ask(gov, request)
        return answer or ApprovalDecision(approved=False, decided_by="timeout")


def effect_in_prepare(world: ToolWorld) -> None:
    """pause/resume/cancel run their effect while preparing (before approval)."""

    class Eager:
        def __init__(self, inner: ToolHandler) -> None:
            self.inner = inner

        async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
            prepared = await self.inner.prepare(args, context)
            out = await prepared.execute()

            async def execute() -> dict[str, Any]:
                return out

            return PreparedCall(prepared.view, execute)

    for name in ("schedule.pause", "schedule.resume", "schedule.cancel"):
        world.replace_handler(name, Eager)


def unchecked_prepare(world: ToolWorld) -> None:
    """pause/resume/cancel prepare without reading the schedule and update without the
    service's pre-approval check: an unknown, foreign or stale id is asked for approval
    first (its view shown to the approver, rows recorded) and fails only when it runs."""
    service = world.service
    methods = {
        "schedule.pause": ("pause", service.pause),
        "schedule.resume": ("resume", service.resume),
        "schedule.cancel": ("cancel", service.cancel),
    }

    def unchecked(name: str) -> Callable[[ToolHandler], ToolHandler]:
        action, method = methods[name]

        class Unchecked:
            def __init__(self, inner: ToolHandler) -> None:
                self.inner = inner

            async def prepare(self, args: Any, context: ToolExecutionContext) -> PreparedCall:
                sid, expected = UUID(str(args["schedule_id"])), int(args["expected_revision"])

                async def execute() -> dict[str, Any]:
                    result = await method(context.principal, sid, expected)
                    return mutation_output(result.schedule)

                view = {"action": action, "schedule_id": str(sid), "expected_revision": expected}
                return PreparedCall(view, execute)

        return Unchecked

    for name in methods:
        world.replace_handler(name, unchecked(name))

    async def check_patch(*_: Any) -> None:
        return None

    service.check_patch = check_patch  # type: ignore[method-assign,assignment]


def repin_on_update(world: ToolWorld) -> None:
    """The patch drops the pinned version and policy: the validator pins the active one."""
    service = world.service

    async def patch(principal: Any, sid: Any, expected: int, p: Any, key: str) -> Any:
        current = (await service.get(principal, sid)).revision
        fresh = dataclasses.replace(
            patched_definition(current, p), agent_version=None, policy_profile=None
        )
        return await service.update(principal, sid, expected, fresh, key)

    service.patch = patch  # type: ignore[method-assign,assignment]


def revision_one(world: ToolWorld) -> None:
    def one(out: dict[str, Any]) -> dict[str, Any]:
        return {**out, "items": [{**i, "current_revision": 1} for i in out.get("items", [])]}

    wrap(world, "schedule.list", output=one)


def no_output_ceiling(world: ToolWorld) -> None:
    for spec in world.role.registry.versions("schedule.list"):
        object.__setattr__(spec, "maximum_output_bytes", 10**9)


def fires_at_now(world: ToolWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    def at_or_after(cadence: Any, instant: Any, counter: Any = None) -> Any:
        return next_after(cadence, instant - timedelta(microseconds=1), counter)

    monkeypatch.setattr(schedules_module, "next_after", at_or_after)


def ledger_without_owner(world: ToolWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    async def find(self: MemoryToolLedger, principal: Any, key: str) -> Any:
        return next((r for r in self.invocations.values() if r.idempotency_key == key), None)

    monkeypatch.setattr(MemoryToolLedger, "find", find)


def anyone_decides(world: ToolWorld) -> None:
    """A ledger that records a decision for whoever asks, under the request's owner."""
    ledger = world.role.ledger
    assert ledger is not None
    original = ledger.decide

    async def decide(principal: Any, decision: Any, state: Any) -> None:
        owner = principal_of(WHO.principal_id, WHO.tenant_id)
        await original(owner, dataclasses.replace(decision, tenant_id=owner.tenant_id), state)

    ledger.decide = decide  # type: ignore[method-assign]


PATCHED = (fires_at_now, ledger_without_owner)

CASES: list[tuple[str, Check, type[ToolPipeline] | None, Any]] = [
    ("declined-create", checks.create_happy_path_check, IgnoresDecline, None),
    ("declined-pause", checks.pause_resume_check, IgnoresDecline, None),
    ("declined-cancel", checks.cancel_check, IgnoresDecline, None),
    ("declined-update", checks.update_happy_path_check, IgnoresDecline, None),
    ("timeout-approves", checks.create_happy_path_check, TimeoutApproves, None),
    ("timeout-approves-cancel", checks.cancel_check, TimeoutApproves, None),
    ("timeout-escapes", checks.create_happy_path_check, TimeoutEscapes, None),
    ("timeout-escapes-update", checks.update_happy_path_check, TimeoutEscapes, None),
    ("timeout-unbounded", checks.create_happy_path_check, UnboundedWait, None),
    ("timeout-is-final", checks.pause_resume_check, TimeoutIsFinal, None),
    ("foreign-decides", checks.create_happy_path_check, None, anyone_decides),
    ("effect-in-prepare-pause", checks.pause_resume_check, None, effect_in_prepare),
    ("effect-in-prepare-cancel", checks.cancel_check, None, effect_in_prepare),
    ("repin-update", checks.update_happy_path_check, None, repin_on_update),
    ("repin-preserves", checks.update_preserves_authority_check, None, repin_on_update),
    ("revision-one", checks.lifecycle_discovery_check, None, revision_one),
    ("no-output-ceiling", checks.lifecycle_discovery_check, None, no_output_ceiling),
    ("fires-at-now-resume", checks.pause_resume_check, None, fires_at_now),
    ("fires-at-now-update", checks.update_happy_path_check, None, fires_at_now),
    ("ledger-without-owner", checks.create_retry_check, None, ledger_without_owner),
    ("approve-before-scope", checks.create_authorization_check, ApprovesFirst, None),
    ("skip-scope-check", checks.create_authorization_check, SkipsScopeCheck, None),
    ("skip-scope-lifecycle", checks.lifecycle_authorization_check, SkipsScopeCheck, None),
    ("skip-scope-update", checks.update_validation_check, SkipsScopeCheck, None),
    ("widen-scopes", checks.create_happy_path_check, None, widen_scopes),
    ("widen-scopes-recurring", checks.create_recurring_check, None, widen_scopes),
    ("no-approval", checks.create_happy_path_check, None, "policy"),
    ("no-approval-pause", checks.pause_resume_check, None, "policy"),
    ("no-future-check", checks.create_validation_check, None, no_future_check),
    ("never-replays", checks.create_retry_check, NeverReplays, None),
    ("never-replays-lifecycle", checks.lifecycle_retry_check, NeverReplays, None),
    ("never-replays-update", checks.update_retry_check, NeverReplays, None),
    ("never-replays-recurring", checks.create_recurring_validation_check, NeverReplays, None),
    ("raw-cadence-view", checks.create_recurring_check, None, raw_cadence_view),
    ("both-at-and-cadence", checks.create_recurring_validation_check, None, both_when_accepted),
    ("leak-instruction", checks.lifecycle_discovery_check, None, leak_instruction),
    ("ignore-limit", checks.lifecycle_discovery_check, None, ignore_limit),
    ("ignore-revision", checks.lifecycle_validation_check, None, ignore_revision),
    ("unchecked-prepare", checks.lifecycle_validation_check, None, unchecked_prepare),
    ("unchecked-prepare-auth", checks.lifecycle_authorization_check, None, unchecked_prepare),
    ("unchecked-prepare-update", checks.update_validation_check, None, unchecked_prepare),
    ("cancel-as-pause", checks.cancel_check, None, cancel_as_pause),
    ("rebuild-on-update", checks.update_preserves_authority_check, None, rebuild_on_update),
    ("invent-unchanged", checks.update_happy_path_check, None, invent_unchanged),
    ("no-secret-scan", checks.update_validation_check, None, no_secret_scan),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("label", "check", "pipeline", "mutant"), CASES, ids=[c[0] for c in CASES])
async def test_each_model_gate_check_catches_its_mutant(
    pg_url: str,
    label: str,
    check: Check,
    pipeline: type[ToolPipeline] | None,
    mutant: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = await ToolWorld.open(pg_url, pipeline_class=pipeline)
    try:
        if mutant == "policy":
            assert world.pipeline.governance is not None
            world.pipeline.governance.policy = ApprovesNothing()
        elif mutant is no_future_check or mutant in PATCHED:
            mutant(world, monkeypatch)
        elif mutant is not None:
            mutant(world)
        verdict = await check(world)
    finally:
        await world.close()
    assert verdict.problems, f"{label}: the gate check did not notice"
