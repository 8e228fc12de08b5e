"""Milestone 23: conversational list, pause, resume and cancel through the ordinary pipeline.

gate.schedule.model_lifecycle_contract (structural): the five lifecycle specs equal the
spec's table field by field (plus in_process, internal_tool, 15 s and the 524,288 /
4,096-byte ceilings), inputs are closed and exact, and the schedule flag pair registers
and rosters exactly the six schedule tools. The case gates drive scripted model turns
on PostgreSQL (see ``tool_checks``). Beside them: each summary tells its schedule's
state, pause reason and next firing apart, each mutation's output names the state it
left, and both byte ceilings are exact (exactly the ceiling passes, one byte more
fails, for the read and for every effectful tool).
"""

from __future__ import annotations

import pytest

from gates.checks.test_model_create import flag_matrix, run_check
from gates.checks.tool_checks import (
    approval_behaviour_check,
    cancel_check,
    discovery_ceiling_check,
    lifecycle_authorization_check,
    lifecycle_discovery_check,
    lifecycle_retry_check,
    lifecycle_validation_check,
    mutation_ceiling_check,
    mutation_outputs_check,
    pause_resume_check,
    summary_fidelity_check,
)
from gates.checks.tool_expectations import lifecycle_contract_problems, lifecycle_expected
from gates.checks.tool_support import ToolWorld
from gates.runner.pytest_plugin import GateEvidence


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_contract")
async def test_lifecycle_tools_are_classified_and_flag_gated(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    problems = await flag_matrix(pg_url)
    world = await ToolWorld.open(pg_url)
    try:
        problems += lifecycle_contract_problems(world.role.registry)
        registered = sorted(world.role.registry.names())
        names = ["schedule.list", "schedule.pause", "schedule.resume", "schedule.cancel"]
        approval = await approval_behaviour_check(world, names)
    finally:
        await world.close()
    problems += approval.problems
    assert problems == [], problems
    gate_evidence.record("approval", approval.evidence["approval"])
    gate_evidence.record("expected", lifecycle_expected())
    gate_evidence.record("registered", registered)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_discovery")
async def test_discovery_is_bounded_paginated_and_summary_only(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, lifecycle_discovery_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_pause_resume")
async def test_a_named_schedule_is_paused_and_resumed_without_backfill(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, pause_resume_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_cancel")
async def test_conversational_delete_cancels_the_schedule_not_its_run(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, cancel_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_authorization")
async def test_each_lifecycle_tool_needs_exactly_its_scope(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, lifecycle_authorization_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_validation")
async def test_bad_selection_fails_closed_without_mutation(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, lifecycle_validation_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_retry")
async def test_replays_are_state_idempotent(pg_url: str, gate_evidence: GateEvidence) -> None:
    await run_check(pg_url, lifecycle_retry_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_contract")
async def test_every_mutation_is_held_to_its_byte_ceiling(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, mutation_ceiling_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_discovery")
async def test_summaries_tell_each_state_apart(pg_url: str, gate_evidence: GateEvidence) -> None:
    await run_check(pg_url, summary_fidelity_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_discovery")
async def test_discovery_ceiling_is_exact(pg_url: str, gate_evidence: GateEvidence) -> None:
    await run_check(pg_url, discovery_ceiling_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_pause_resume")
async def test_mutation_outputs_name_the_state_left(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, mutation_outputs_check, gate_evidence)
