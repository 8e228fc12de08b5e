"""The governed pipeline's own rules on the memory ledger: order of checks, approval
denial and its replay, timeout, output ceiling, closed schemas, unknown tools, roster."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduling.adapters.memory.tool_ledger import MemoryToolLedger
from scheduling.domain.errors import ValidationError
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import InvocationState
from scheduling.runtime.tool_pipeline import (
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
