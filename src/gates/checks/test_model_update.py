"""Milestone 23: conversational update, the closed approval-gated patch.

gate.schedule.model_update_contract (structural): schedule.update equals its row of the
spec's lifecycle table, is flag gated, and its closed input admits only a stable ID,
expected revision, title, instruction, at or cadence (every hidden authority or
execution field is refused as an argument, before approval, with no effect). The case
gates drive scripted model turns on PostgreSQL (see ``tool_checks``).
"""

from __future__ import annotations

import pytest

from gates.checks.test_model_create import flag_matrix, run_check
from gates.checks.tool_checks import (
    approval_behaviour_check,
    update_contract_inputs_check,
    update_happy_path_check,
    update_preserves_authority_check,
    update_retry_check,
    update_validation_check,
)
from gates.checks.tool_expectations import (
    UPDATE_INPUT,
    classification_problems,
    input_problems,
    lifecycle_expected,
)
from gates.checks.tool_support import ToolWorld
from gates.runner.pytest_plugin import GateEvidence


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_update_contract")
async def test_update_is_a_closed_governed_patch(pg_url: str, gate_evidence: GateEvidence) -> None:
    problems = await flag_matrix(pg_url)
    world = await ToolWorld.open(pg_url)
    try:
        tool = world.role.registry.get("schedule.update")
        spec = None if tool is None else tool.spec
        problems += classification_problems(spec, lifecycle_expected()["schedule.update"])
        if spec is not None:
            problems += input_problems(spec, UPDATE_INPUT)
        verdict = await update_contract_inputs_check(world)
        approval = await approval_behaviour_check(world, ["schedule.update"])
    finally:
        await world.close()
    problems += verdict.problems + approval.problems
    gate_evidence.record("approval", approval.evidence["approval"])
    assert problems == [], problems
    gate_evidence.record("inputs", sorted(UPDATE_INPUT))
    for key, value in verdict.evidence.items():
        gate_evidence.record(key, value)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_update_happy_path")
async def test_an_edit_writes_one_future_revision(pg_url: str, gate_evidence: GateEvidence) -> None:
    await run_check(pg_url, update_happy_path_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_update_preserves_authority")
async def test_an_edit_cannot_widen_hidden_authority(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, update_preserves_authority_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_update_validation")
async def test_bad_or_unauthorized_edits_write_nothing(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, update_validation_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_update_retry")
async def test_an_edit_applies_at_most_once(pg_url: str, gate_evidence: GateEvidence) -> None:
    await run_check(pg_url, update_retry_check, gate_evidence)
