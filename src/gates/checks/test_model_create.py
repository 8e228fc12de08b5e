"""Milestone 19: conversational creation through the ordinary tool pipeline.

gate.schedule.model_create_contract (structural): the registered schedule.create specs
(1.1.1, 1.2.0 with use_website, 1.3.0 with place_call, as the quoted spec sentences
say) equal the spec's classification block field by field, their input schemas are
closed, a call waits for approval (observed through the pipeline), and they register
and join the default agent's roster only with both schedule flags on (unset: off).
The four case gates drive scripted model turns on PostgreSQL through the pipeline
``bootstrap.build_tools`` built (see ``tool_checks`` for what each one checks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from gates.checks.tool_checks import (
    Verdict,
    approval_behaviour_check,
    create_authorization_check,
    create_happy_path_check,
    create_retry_check,
    create_validation_check,
)
from gates.checks.tool_expectations import create_contract_problems, create_expected, flag_problems
from gates.checks.tool_support import ToolWorld, tool_env, unset_flags_env
from gates.runner.pytest_plugin import GateEvidence
from scheduling.bootstrap import build_tools
from scheduling.config import Settings
from scheduling.runtime.tool_pipeline import ScriptedApprovals
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import AGENT_ID, START

Check = Callable[[ToolWorld], Awaitable[Verdict]]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


async def flag_matrix(url: str) -> list[str]:
    """Registration and roster under every combination of the two schedule flags, and
    with neither flag set at all (the default must register nothing)."""
    problems: list[str] = []
    envs = [(tool_env(url, api=api, worker=worker), api, worker, "") for api, worker in FLAGS]
    envs.append((unset_flags_env(url), False, False, "flags unset: "))
    for env, api, worker, label in envs:
        role = build_tools(
            Settings.from_env(env),
            clock=VirtualClock(START),
            ids=SeededIds(0),
            approvals=ScriptedApprovals(),
            default_agent_id=AGENT_ID,
        )
        try:
            found = flag_problems(role.registry.names(), role.roster, api=api, worker=worker)
            problems += [label + p for p in found]
        finally:
            await role.close()
    return problems


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_contract")
async def test_schedule_create_is_classified_and_flag_gated(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    problems = await flag_matrix(pg_url)
    world = await ToolWorld.open(pg_url)
    try:
        problems += create_contract_problems(world.role.registry)
        specs = [s.classification() for s in world.role.registry.versions("schedule.create")]
        approval = await approval_behaviour_check(world, ["schedule.create"])
    finally:
        await world.close()
    problems += approval.problems
    assert problems == [], problems
    gate_evidence.record("approval", approval.evidence["approval"])
    gate_evidence.record("flag_combinations", [*[list(f) for f in FLAGS], "unset"])
    gate_evidence.record("expected", create_expected())
    gate_evidence.record("registered", specs)


async def run_check(url: str, check: Check, evidence: GateEvidence) -> Verdict:
    """Run one check on a fresh tool world; record its evidence; fail on any problem."""
    world = await ToolWorld.open(url)
    try:
        verdict = await check(world)
    finally:
        await world.close()
    for key, value in verdict.evidence.items():
        evidence.record(key, value)
    assert verdict.problems == [], verdict.problems
    return verdict


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_a_reminder_request_creates_one_approved_one_time_schedule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_happy_path_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_authorization")
async def test_creation_without_schedule_write_is_denied_before_anything(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_authorization_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_validation")
async def test_only_an_exact_future_instant_is_accepted(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_validation_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_retry")
async def test_a_replayed_key_returns_the_original_schedule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_retry_check, gate_evidence)
