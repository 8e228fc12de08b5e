"""Milestone 20: conversational recurring creation through the one schedule.create tool.

gate.schedule.model_create_recurring: daily, weekly, monthly (month-end) and yearly
(February 29) calls each wait for one approval whose view holds the complete canonical
cadence, persist one definition pinning the active agent with no delegated scope, and
fire first at the hand-computed instant. gate.schedule.model_create_recurring_validation:
both/neither of at and cadence, impossible, duplicate or unknown calendar values and
open cron/interval shapes fail with stable codes before approval and change nothing;
a key reused with other recurrence conflicts with no effect; an identical retry replays.
"""

from __future__ import annotations

import pytest

from gates.checks.test_model_create import run_check
from gates.checks.tool_checks import create_recurring_check, create_recurring_validation_check
from gates.runner.pytest_plugin import GateEvidence


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_recurring")
async def test_every_calendar_kind_is_created_through_one_approved_call(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_recurring_check, gate_evidence)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_recurring_validation")
async def test_invalid_recurrence_and_key_reuse_fail_closed(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await run_check(pg_url, create_recurring_validation_check, gate_evidence)
