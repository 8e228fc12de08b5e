"""The governed pipeline's own rules on the memory ledger: order of checks, approval
denial and its replay, timeout, output ceiling, closed schemas, unknown tools, roster."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduling.adapters.memory.tool_ledger import MemoryToolLedger
from scheduling.domain.errors import (
    ConflictError,
    NotFoundError,
    SchedulingError,
    ValidationError,
)
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import InvocationState
from scheduling.runtime.tool_pipeline import (
    DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    Conversation,
    Governance,
    Idempotency,
    OutputTrust,
    PreparedCall,
    ProposedCall,
    RegisteredTool,
    Risk,
    ScriptedApprovals,
    SideEffect,
    TargetKind,
    ToolExecutionContext,
    ToolKind,
    ToolPipeline,
    ToolRegistry,
    ToolSource,
    ToolSpec,
    ToolStatus,
)
from scheduling.tools.catalog import CREATE_VERSIONS, schedule_tool_specs
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds

WHO = Principal("t", "p", frozenset({"thing.write"}))
SCHEMA = {"type": "object", "additionalProperties": False, "properties": {"n": {"type": "integer"}}}


def spec(**overrides: Any) -> ToolSpec:
    values: dict[str, Any] = dict(
        name="thing.make",
        version="1.0.0",
        kind=ToolKind.CAPABILITY,
        source=ToolSource.BUILTIN,
        target_kind=TargetKind.IN_PROCESS,
        side_effect=SideEffect.EXTERNAL_WRITE,
        risk=Risk.HIGH,
        idempotency=Idempotency.CONDITIONALLY_IDEMPOTENT,
        required_scopes=frozenset({"thing.write"}),
        timeout_seconds=0.2,
        maximum_output_bytes=64,
        allow_parallel=False,
        output_trust=OutputTrust.INTERNAL_TOOL,
        input_schema=SCHEMA,
    )
    values.update(overrides)
    return ToolSpec(**values)


class Thing:
    def __init__(self, sleep: float = 0, size: int = 1) -> None:
        self.sleep, self.size, self.effects = sleep, size, 0

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        async def execute() -> dict[str, Any]:
            await asyncio.sleep(self.sleep)
            self.effects += 1
            return {"x": "y" * self.size}

        return PreparedCall({"n": arguments.get("n")}, execute)


def pipeline(
    handler: Thing, approvals: ScriptedApprovals, **overrides: Any
) -> tuple[ToolPipeline, MemoryToolLedger]:
    ledger = MemoryToolLedger()
    gov = Governance(
        ledger, approvals, VirtualClock(datetime(2026, 1, 1, tzinfo=UTC)), SeededIds(1)
    )
    return ToolPipeline(
        ToolRegistry([RegisteredTool(spec(**overrides), handler=handler)]), gov
    ), ledger


def ctx(key: str = "k", who: Principal = WHO) -> ToolExecutionContext:
    return ToolExecutionContext(who, key)


async def test_a_denied_approval_is_recorded_and_replayed_without_effect() -> None:
    thing, approvals = Thing(), ScriptedApprovals([False])
    pipe, ledger = pipeline(thing, approvals)
    first = await pipe.call("thing.make", {"n": 1}, ctx())
    assert first.status is ToolStatus.REJECTED
    assert first.reason_code == "schedule.tool.approval_denied"
    again = await pipe.call("thing.make", {"n": 1}, ctx())
    assert again.status is ToolStatus.REJECTED
    assert again.replayed
    assert thing.effects == 0
    assert len(approvals.requests) == 1
    [row] = ledger.invocations.values()
    assert row.state is InvocationState.DENIED


async def test_scope_is_checked_before_arguments_and_approval() -> None:
    thing, approvals = Thing(), ScriptedApprovals()
    pipe, ledger = pipeline(thing, approvals)
    nobody = Principal("t", "p", frozenset())
    result = await pipe.call("thing.make", {"n": "not an int", "extra": 1}, ctx(who=nobody))
    assert result.status is ToolStatus.DENIED
    assert result.reason_code == "schedule.auth.scope_required"
    assert not approvals.requests
    assert not ledger.invocations


async def test_a_timeout_is_retryable_and_the_retry_resumes_without_new_approval() -> None:
    thing, approvals = Thing(sleep=1), ScriptedApprovals()
    pipe, _ = pipeline(thing, approvals)
    slow = await pipe.call("thing.make", {"n": 1}, ctx())
    assert slow.reason_code == "schedule.tool.timeout"
    assert slow.retryable
    thing.sleep = 0
    done = await pipe.call("thing.make", {"n": 1}, ctx())
    assert done.ok
    assert len(approvals.requests) == 1


async def test_output_over_the_ceiling_fails() -> None:
    pipe, _ = pipeline(Thing(size=100), ScriptedApprovals())
    result = await pipe.call("thing.make", {"n": 1}, ctx())
    assert result.reason_code == "schedule.tool.output_too_large"
    assert result.details["maximum_output_bytes"] == 64


async def test_closed_schema_and_unknown_tool_and_bad_key() -> None:
    pipe, ledger = pipeline(Thing(), ScriptedApprovals())
    extra = await pipe.call("thing.make", {"n": 1, "scopes": ["x"]}, ctx())
    assert extra.reason_code == "schedule.tool.invalid_arguments"
    assert extra.details["problems"][0]["rule"] == "additionalProperties"
    assert (await pipe.call("thing.unmake", {}, ctx())).reason_code == "schedule.tool.unknown"
    bad = await pipe.call("thing.make", {"n": 1}, ctx(key="has space"))
    assert bad.reason_code == "schedule.validation.invalid_idempotency_key"
    assert not ledger.invocations


def test_a_spec_with_an_open_schema_or_bad_version_is_refused() -> None:
    with pytest.raises(ValidationError):
        spec(
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "object"}},
                "additionalProperties": False,
            }
        )
    with pytest.raises(ValidationError):
        spec(version="one")


async def test_the_conversation_offers_only_the_roster() -> None:
    thing = Thing()
    pipe, _ = pipeline(thing, ScriptedApprovals())
    chat = Conversation(pipe, WHO, frozenset())
    result = await chat.propose(ProposedCall("thing.make", {"n": 1}, "k"))
    assert result.reason_code == "schedule.tool.undeclared"
    assert thing.effects == 0


# --------------------------------------------------------------- issue 22 (ADR 2101-2102)


def test_schedule_create_versions_follow_the_spec() -> None:
    """1.1.1 (title, instruction, at, cadence), 1.2.0 (+use_website), 1.3.0
    (+use_website, +place_call, ADR-0213); the newest advertised is 1.3.0."""
    base = {"title", "instruction", "at", "cadence"}
    specs = {s.version: s for s in schedule_tool_specs() if s.name == "schedule.create"}
    assert sorted(specs, key=lambda v: tuple(map(int, v.split(".")))) == list(CREATE_VERSIONS)
    assert CREATE_VERSIONS == ("1.1.1", "1.2.0", "1.3.0")
    fields = {v: set(s.input_schema["properties"]) for v, s in specs.items()}
    assert fields == {
        "1.1.1": base,
        "1.2.0": base | {"use_website"},
        "1.3.0": base | {"use_website", "place_call"},
    }
    registry = ToolRegistry(RegisteredTool(s, handler=Thing()) for s in schedule_tool_specs())
    newest = registry.get("schedule.create")
    assert newest is not None
    assert newest.spec.version == "1.3.0"


class Crash(Exception):
    """The process died between the approval commit and the effect."""


class Drifting(Thing):
    """A handler whose approval view reads mutable state (``self.view``)."""

    def __init__(self) -> None:
        super().__init__()
        self.view = "P1"
        self.crash = False

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        async def execute() -> dict[str, Any]:
            if self.crash:
                self.crash = False
                raise Crash
            self.effects += 1
            return {"x": "y"}

        return PreparedCall({"profile": self.view}, execute)


async def test_an_approved_call_whose_view_changed_fails_closed_on_resume() -> None:
    thing, approvals = Drifting(), ScriptedApprovals()
    pipe, ledger = pipeline(thing, approvals)
    thing.crash = True
    with pytest.raises(Crash):
        await pipe.call("thing.make", {"n": 1}, ctx())
    thing.view = "P2"
    stale = await pipe.call("thing.make", {"n": 1}, ctx())
    assert stale.reason_code == "schedule.tool.approval_stale"
    assert not stale.retryable
    assert thing.effects == 0
    assert len(approvals.requests) == 1
    [row] = ledger.invocations.values()
    assert row.state is InvocationState.FAILED


class Timing(ScriptedApprovals):
    """The approver times out on the first request (nothing is decided)."""

    async def decide(self, request: Any) -> Any:
        if not self.requests:
            self.requests.append(request)
            raise TimeoutError
        return await super().decide(request)


async def test_an_undecided_request_whose_view_changed_is_not_asked_again() -> None:
    thing, approvals = Drifting(), Timing()
    pipe, _ = pipeline(thing, approvals)
    timed = await pipe.call("thing.make", {"n": 1}, ctx())
    assert timed.reason_code == "schedule.tool.approval_timeout"
    thing.view = "P2"
    stale = await pipe.call("thing.make", {"n": 1}, ctx())
    assert stale.reason_code == "schedule.tool.approval_stale"
    assert len(approvals.requests) == 1
    assert thing.effects == 0


async def test_the_ledger_hash_is_over_the_normalized_arguments() -> None:
    thing, approvals = Thing(), ScriptedApprovals()
    ledger = MemoryToolLedger()
    gov = Governance(
        ledger, approvals, VirtualClock(datetime(2026, 1, 1, tzinfo=UTC)), SeededIds(1)
    )

    def normalize(arguments: Mapping[str, Any]) -> dict[str, Any]:
        return {"n": abs(int(arguments.get("n", 0)))}

    tool = RegisteredTool(spec(), handler=thing, normalize=normalize)
    pipe = ToolPipeline(ToolRegistry([tool]), gov)
    assert (await pipe.call("thing.make", {"n": -3}, ctx())).ok
    again = await pipe.call("thing.make", {"n": 3}, ctx())
    assert again.replayed
    assert thing.effects == 1
    reused = await pipe.call("thing.make", {"n": 4}, ctx())
    assert reused.reason_code == "schedule.idempotency.key_reused"


@pytest.mark.parametrize("bad", ["\x00", "\udfff"])
async def test_bad_text_anywhere_in_the_arguments_fails_before_anything(bad: str) -> None:
    thing, approvals = Thing(), ScriptedApprovals()
    pipe, ledger = pipeline(thing, approvals)
    for arguments in ({"n": 1, f"k{bad}": 1}, {"n": bad}):
        result = await pipe.call("thing.make", arguments, ctx())
        assert result.reason_code == "schedule.text.invalid"
        assert not result.retryable
    assert not approvals.requests
    assert not ledger.invocations


class Silent(ScriptedApprovals):
    """An approver that never answers the first ``hang`` requests, then follows its script."""

    def __init__(self, *verdicts: bool, hang: int = 1) -> None:
        super().__init__(verdicts)
        self.hang = hang

    async def decide(self, request: Any) -> Any:
        if self.hang:
            self.hang -= 1
            self.requests.append(request)
            await asyncio.Event().wait()
        return await super().decide(request)


class Unreachable(ScriptedApprovals):
    """An approval port that raises on its first request (its service is down)."""

    async def decide(self, request: Any) -> Any:
        if not self.requests:
            self.requests.append(request)
            raise ConnectionError("approval service unreachable")
        return await super().decide(request)


def bounded(
    thing: Thing, approvals: ScriptedApprovals, seconds: float
) -> tuple[ToolPipeline, MemoryToolLedger]:
    pipe, ledger = pipeline(thing, approvals)
    assert pipe.governance is not None
    pipe.governance.approval_timeout_seconds = seconds
    return pipe, ledger


def test_the_default_approval_wait_is_bounded() -> None:
    pipe, _ = pipeline(Thing(), ScriptedApprovals())
    assert pipe.governance is not None
    assert pipe.governance.approval_timeout_seconds == DEFAULT_APPROVAL_TIMEOUT_SECONDS == 300


@pytest.mark.parametrize("approvals", [Silent(True), Unreachable([True])], ids=["silent", "down"])
async def test_an_unanswered_approval_fails_retryably_and_the_retry_asks_again(
    approvals: ScriptedApprovals,
) -> None:
    thing = Thing()
    pipe, ledger = bounded(thing, approvals, 0.05)
    timed = await pipe.call("thing.make", {"n": 1}, ctx())
    assert timed.status is ToolStatus.FAILED
    assert timed.reason_code == "schedule.tool.approval_timeout"
    assert timed.retryable
    assert thing.effects == 0
    [row] = ledger.invocations.values()
    assert row.state is InvocationState.AWAITING_APPROVAL
    assert timed.invocation_id == row.id
    assert not ledger.decisions
    done = await pipe.call("thing.make", {"n": 1}, ctx())
    assert done.ok
    assert not done.replayed
    assert thing.effects == 1
    first, second = approvals.requests
    assert (first.approval_id, first.view) == (second.approval_id, second.view)
    assert ledger.invocations[row.id].state is InvocationState.SUCCEEDED


async def test_a_timed_out_approval_then_declined_takes_no_effect() -> None:
    thing, approvals = Thing(), Silent(False, hang=2)
    pipe, ledger = bounded(thing, approvals, 0.02)
    for _ in range(2):
        timed = await pipe.call("thing.make", {"n": 1}, ctx())
        assert (timed.reason_code, timed.retryable) == ("schedule.tool.approval_timeout", True)
    declined = await pipe.call("thing.make", {"n": 1}, ctx())
    assert declined.reason_code == "schedule.tool.approval_denied"
    assert len(approvals.requests) == 3
    assert thing.effects == 0
    [row] = ledger.invocations.values()
    assert row.state is InvocationState.DENIED


class NotThere:
    """A handler whose prepare finds nothing (an unknown, foreign or stale target)."""

    def __init__(self, error: SchedulingError) -> None:
        self.error, self.effects = error, 0

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        NotFoundError("schedule.not_found", "schedule not found"),
        ConflictError("schedule.lifecycle.stale_revision", "stale", {"current_revision": 2}),
    ],
    ids=["not-found", "stale"],
)
async def test_a_prepare_failure_asks_nobody_and_records_nothing(error: SchedulingError) -> None:
    """Step 5 before step 6 (ADR 2122): the handler's refusal is the result, with its
    own code and details, and no invocation or approval request exists."""
    approvals = ScriptedApprovals()
    pipe, ledger = pipeline(NotThere(error), approvals)  # type: ignore[arg-type]
    result = await pipe.call("thing.make", {"n": 1}, ctx("refused"))
    assert result.status is ToolStatus.FAILED
    assert (result.reason_code, result.details) == (error.code, dict(error.details))
    assert not result.retryable
    assert not approvals.requests
    assert not ledger.invocations
    assert not ledger.approvals


@pytest.mark.parametrize(
    ("thing", "answers", "status", "output", "code"),
    [
        (Thing(), [True], ToolStatus.SUCCEEDED, {"x": "y"}, None),
        (Thing(), [False], ToolStatus.REJECTED, None, "schedule.tool.approval_denied"),
        (Thing(size=100), [True], ToolStatus.FAILED, None, "schedule.tool.output_too_large"),
    ],
    ids=["succeeded", "denied", "failed"],
)
async def test_a_finished_invocation_replays_its_recorded_result_whole(
    thing: Thing,
    answers: list[bool],
    status: ToolStatus,
    output: dict[str, Any] | None,
    code: str | None,
) -> None:
    """Each finished state's replay (ADR 2350: one construction for the three): the
    recorded status, output and code, marked replayed, nothing executed again."""
    pipe, ledger = pipeline(thing, ScriptedApprovals(answers))
    first = await pipe.call("thing.make", {"n": 1}, ctx())
    effects = thing.effects
    again = await pipe.call("thing.make", {"n": 1}, ctx())
    [row] = ledger.invocations.values()
    assert (first.status, first.invocation_id) == (status, row.id)
    assert thing.effects == effects
    expected: dict[str, Any] = {"tool": "thing.make", "version": "1.0.0", "status": status}
    if output is not None:
        expected["output"] = output
    if code is not None:
        expected["error"] = {"code": code, "retryable": False, "details": {}}
    assert again.to_json() == {**expected, "replayed": True}
    assert again.invocation_id == row.id
