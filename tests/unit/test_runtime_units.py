"""Pure parts of the run substrate: capacity rule, usage and limits, scripted agent,
tool pipeline, worker settings, and the autojump clock driver."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.domain.errors import ValidationError
from scheduling.domain.revision import RunLimits
from scheduling.ports.records import RunRecord, RunStatus
from scheduling.ports.runtime import (
    ExecutionContext,
    Fail,
    Finish,
    ModelCall,
    QueueCapacity,
    RunPriority,
    ToolCall,
    Wait,
    priority_class,
)
from scheduling.runtime import ScriptedAgent, ToolPipeline, WorkerSettings, scripted_tools
from scheduling.runtime.context import instruction_of
from scheduling.runtime.scripted import Script, select_script
from scheduling.runtime.tools import (
    TOOL_SCOPE_DENIED,
    TOOL_UNDECLARED,
    TOOL_UNKNOWN,
    cut_to_bytes,
    declared_tools,
)
from scheduling.runtime.usage import (
    COST_LIMIT,
    MODEL_CALL_LIMIT,
    STEP_LIMIT,
    TOOL_CALL_LIMIT,
    Usage,
    charge,
    exceeded,
    parse_limits,
)
from simulation.engine.clock import VirtualClock
from simulation.worlds.runtime import Autojump

T0 = datetime(2026, 1, 1, tzinfo=UTC)
INTER, ASYNC = RunPriority.INTERACTIVE, RunPriority.ASYNC


def test_priority_classes() -> None:
    assert priority_class(0) is INTER
    assert priority_class(10) is ASYNC
    assert priority_class(5) is ASYNC


@pytest.mark.parametrize(("total", "ir", "ar"), [(0, 0, 0), (2, 2, 1), (3, -1, 1), (1, 1, 1)])
def test_invalid_capacity_is_rejected(total: int, ir: int, ar: int) -> None:
    with pytest.raises(ValidationError):
        QueueCapacity(total, ir, ar)


def test_deployment_requires_both_reserves() -> None:
    assert QueueCapacity(2, 1, 1).require_reserves().total_slots == 2
    with pytest.raises(ValidationError):
        QueueCapacity(4, 0, 1).require_reserves()
    with pytest.raises(ValidationError):
        QueueCapacity(4, 1, 0).require_reserves()


@given(
    st.integers(1, 12).flatmap(
        lambda total: st.tuples(
            st.just(total),
            st.integers(0, total),
        ).flatmap(lambda t: st.tuples(st.just(t[0]), st.just(t[1]), st.integers(0, t[0] - t[1])))
    ),
    st.lists(st.sampled_from([INTER, ASYNC]), max_size=40),
)
def test_greedy_admission_never_breaks_a_reserve(
    caps: tuple[int, int, int], demand: list[RunPriority]
) -> None:
    """Whatever order claims arrive in, the live counts respect every cap."""
    cap = QueueCapacity(*caps)
    running = {INTER: 0, ASYNC: 0}
    for cls in demand:
        if cap.admits(cls, running[INTER], running[ASYNC]):
            running[cls] += 1
        assert running[INTER] + running[ASYNC] <= cap.total_slots
        assert running[ASYNC] <= cap.total_slots - cap.interactive_reserved
        assert running[INTER] <= cap.total_slots - cap.async_reserved
    # Under an async-only flood the interactive reserve is still free, and vice versa.
    flood = {INTER: 0, ASYNC: 0}
    while cap.admits(ASYNC, flood[INTER], flood[ASYNC]):
        flood[ASYNC] += 1
    assert cap.total_slots - flood[ASYNC] >= cap.interactive_reserved


def test_usage_charge_and_limits() -> None:
    limits = RunLimits(max_steps=3, max_model_calls=2, max_tool_calls=1, max_cost=Decimal("1"))
    assert charge(ModelCall(Decimal("0.5"))) == Usage(1, 1, 0, Decimal("0.5"))
    assert charge(ToolCall("x")) == Usage(1, 0, 1, Decimal(0))
    assert charge(Wait(5)) == Usage(steps=1)
    assert charge(Finish("a")) == Usage()
    assert exceeded(limits, Usage(3, 2, 1, Decimal(1))) is None  # reaching is allowed
    assert exceeded(limits, Usage(4, 0, 0, Decimal(0))) == STEP_LIMIT
    assert exceeded(limits, Usage(1, 3, 0, Decimal(0))) == MODEL_CALL_LIMIT
    assert exceeded(limits, Usage(1, 0, 2, Decimal(0))) == TOOL_CALL_LIMIT
    assert exceeded(limits, Usage(1, 0, 0, Decimal("1.01"))) == COST_LIMIT
    usage = Usage(2, 1, 1, Decimal("0.25"))
    assert Usage.from_json(usage.to_json()) == usage
    assert Usage.from_json(None) == Usage()


def test_parse_limits_fails_closed() -> None:
    good = RunLimits(max_steps=1, max_model_calls=1, max_tool_calls=1, max_cost=Decimal(1))
    assert parse_limits(good.to_json()) == good
    assert parse_limits({}) is None
    assert parse_limits({**good.to_json(), "max_steps": 0}) is None
    assert parse_limits(None) is None


def test_worker_settings_validation() -> None:
    with pytest.raises(ValidationError):
        WorkerSettings(lease_seconds=10, heartbeat_seconds=10)
    with pytest.raises(ValidationError):
        WorkerSettings(poll_seconds=0)


def _run() -> RunRecord:
    return RunRecord(
        id=UUID(int=1),
        tenant_id="t",
        principal_id="p",
        session_id=UUID(int=2),
        agent_id=UUID(int=3),
        agent_version="v1",
        policy_profile="default",
        status=RunStatus.RUNNING,
        priority=10,
        scheduled_for=T0,
        requested_scopes=frozenset(),
        limits={},
        created_at=T0,
        updated_at=T0,
    )


async def test_scripted_agent_is_deterministic() -> None:
    agent = ScriptedAgent()

    async def actions(
        instruction: str, n: int, spec: dict[str, object] | None = None
    ) -> list[object]:
        return [
            await agent.next_action(ExecutionContext(_run(), instruction, i, spec or {}))
            for i in range(n)
        ]

    assert await actions("x [script:succeed]", 3) == [
        ModelCall(),
        Finish(await _answer()),
        Finish(await _answer()),
    ]
    assert (await actions("[script:fail]", 2))[1] == Fail("ScriptedFailure")
    assert (await actions("[script:run_long:90]", 2))[1] == Wait(90.0)
    assert await actions("[script:steps]", 4) == [ModelCall(Decimal(0))] * 4
    assert (await actions("[script:steps:2]", 3))[2] == Finish(await _answer())
    assert (await actions("[script:nope]", 1))[0] == Fail("UnknownScript")
    assert (await actions("no directive", 1, {"script": "fail"}))[0] == ModelCall()
    assert await actions("[script:succeed]", 2) == await actions("[script:succeed]", 2)
    custom = ScriptedAgent({"mine": Script((Wait(1),))})
    action = await custom.next_action(ExecutionContext(_run(), "[script:mine]", 0, {}))
    assert action == Wait(1)


async def _answer() -> str:
    from scheduling.runtime.scripted import ANSWER

    return ANSWER


def test_select_script_prefers_the_instruction() -> None:
    script = select_script("[script:fail]", {"script": "succeed"}, {})
    assert script.at(1) == Fail("ScriptedFailure")


def test_research_alternates_paid_model_calls_and_recalls_then_answers() -> None:
    recall = ToolCall("memory.recall", {"topic": "notes"})
    two = select_script("[script:research:2]", {}, {})
    assert [two.at(i) for i in range(4)] == [ModelCall(Decimal(1)), recall] * 2
    assert isinstance(two.at(4), Finish)
    assert isinstance(two.at(5), Finish)  # answered: nothing repeats after it
    one = select_script("[script:research]", {}, {})
    assert [one.at(0), one.at(1)] == [ModelCall(Decimal(1)), recall]
    assert isinstance(one.at(2), Finish)


def test_tool_pipeline_checks_in_order() -> None:
    pipeline = ToolPipeline(scripted_tools())
    spec = {"tools": ["web.search", {"name": "bulk.output"}]}
    assert declared_tools(spec) == frozenset({"web.search", "bulk.output"})
    unknown = pipeline.check(ToolCall("shell.exec"), frozenset({"web.search"}), spec)
    assert unknown.reason_code == TOOL_UNKNOWN
    undeclared = pipeline.check(ToolCall("memory.recall"), frozenset({"memory.read"}), spec)
    assert undeclared.reason_code == TOOL_UNDECLARED
    scoped = pipeline.check(ToolCall("web.search"), frozenset({"memory.read"}), spec)
    assert scoped.reason_code == TOOL_SCOPE_DENIED
    assert scoped.missing_scopes == frozenset({"web.search"})
    # Exact names: no hierarchy or wildcard.
    assert not pipeline.check(ToolCall("web.search"), frozenset({"web.*", "web"}), spec).allowed
    assert pipeline.check(ToolCall("web.search"), frozenset({"web.search"}), spec).allowed
    out = pipeline.invoke(ToolCall("bulk.output", {"size": 2000}))
    assert out.truncated
    assert len(out.text.encode()) == 1024


@given(st.text(max_size=300), st.integers(1, 400))
def test_cut_to_bytes_never_splits_a_character(text: str, ceiling: int) -> None:
    cut, size, truncated = cut_to_bytes(text, ceiling)
    assert size == len(text.encode("utf-8"))
    assert len(cut.encode("utf-8")) <= ceiling
    assert text.startswith(cut)
    assert truncated == (size > ceiling)


def test_instruction_of_reads_the_seed() -> None:
    from scheduling.ports.records import SessionEvent

    events = [
        SessionEvent(UUID(int=1), 1, "session.created", "scheduler", {}, T0),
        SessionEvent(UUID(int=1), 2, "message.user", "scheduler", {"content": "go"}, T0, True),
    ]
    assert instruction_of(events) == "go"
    assert instruction_of([]) == ""


async def test_autojump_advances_only_when_everyone_sleeps() -> None:
    clock = VirtualClock(T0)
    driver = Autojump(clock)
    log: list[tuple[str, float]] = []

    async def sleeper(name: str, naps: list[float]) -> None:
        for nap in naps:
            await clock.sleep(nap)
            log.append((name, (clock.now() - T0).total_seconds()))

    async def busy() -> None:
        # Real work (no clock sleep) must finish before any jump.
        await asyncio.sleep(0.05)
        log.append(("busy", (clock.now() - T0).total_seconds()))

    tasks = [
        driver.spawn(sleeper("a", [5, 5])),
        driver.spawn(sleeper("b", [7])),
        driver.spawn(busy()),
    ]
    await driver.drive(tasks)
    driver.detach()
    assert log == [("busy", 0.0), ("a", 5.0), ("b", 7.0), ("a", 10.0)]
    assert clock.now() == T0 + timedelta(seconds=10)


def test_synthesis_reserve_boundaries() -> None:
    from scheduling.runtime.usage import in_synthesis_reserve

    plain = RunLimits(max_steps=5, max_model_calls=5, max_tool_calls=5, max_cost=Decimal(1))
    assert not in_synthesis_reserve(plain, Usage(5, 5, 5, Decimal(1)))
    steps = plain.model_copy(update={"reserve_steps": 2})
    assert not in_synthesis_reserve(steps, Usage(steps=2))
    assert in_synthesis_reserve(steps, Usage(steps=3))
    calls = plain.model_copy(update={"reserve_model_calls": 1})
    assert in_synthesis_reserve(calls, Usage(model_calls=4))
    cost = plain.model_copy(update={"reserve_cost": Decimal("0.25")})
    assert not in_synthesis_reserve(cost, Usage(cost=Decimal("0.5")))
    assert in_synthesis_reserve(cost, Usage(cost=Decimal("0.75")))
