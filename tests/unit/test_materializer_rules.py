"""Pure rules of admission, accounting and worker settings."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.errors import ValidationError
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.admission import AdmissionOutcome
from scheduling.ports.records import RunRecord, RunStatus
from scheduling.service.accounting import (
    accounted_event_id,
    next_failure_count,
    sanitized_failure,
)
from scheduling.service.admission import (
    CONCURRENCY,
    DAILY_COST,
    DEVELOPMENT_ONLY,
    MAX_BACKOFF_SECONDS,
    MONTHLY_COST,
    RATE,
    AllowAllAdmission,
    TenantUsage,
    decide_admission,
    require_production_admission,
)
from scheduling.service.schedule_worker import WorkerSettings
from simulation.worlds.service import CEILINGS, LIMITS

T = datetime(2026, 3, 2, tzinfo=UTC)
SID = UUID(int=1)
REVISION = ScheduleRevision(
    schedule_id=SID,
    revision=1,
    title="t",
    instruction="i",
    agent_id=UUID(int=2),
    agent_version="v1",
    policy_profile="default",
    requested_scopes=frozenset({"memory.read"}),
    limits=LIMITS,
    run_timeout_seconds=60,
    cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"},
    misfire_grace_seconds=60,
    max_consecutive_failures=3,
    created_by_principal_id="p",
    created_at=T,
)
IDLE = TenantUsage(0, 0, Decimal(0), Decimal(0), Decimal(0))


def usage(**changes: object) -> TenantUsage:
    values = {**IDLE.__dict__, **changes}
    return TenantUsage(**values)  # type: ignore[arg-type]


def test_idle_tenant_is_admitted() -> None:
    assert decide_admission(IDLE, CEILINGS, REVISION).outcome is AdmissionOutcome.ALLOW


def test_concurrency_is_a_bounded_retry() -> None:
    full = usage(active_runs=CEILINGS.max_active_runs)
    decision = decide_admission(full, CEILINGS, REVISION, backoff_seconds=10_000)
    assert (decision.outcome, decision.reason_code) == (AdmissionOutcome.RETRY, CONCURRENCY)
    assert decision.retry_after_seconds == MAX_BACKOFF_SECONDS


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"materialized_last_minute": CEILINGS.max_materializations_per_minute}, RATE),
        ({"daily_committed_cost": CEILINGS.max_daily_cost - LIMITS.max_cost + 1}, DAILY_COST),
        ({"active_reserved_cost": CEILINGS.max_daily_cost}, DAILY_COST),
        ({"monthly_committed_cost": CEILINGS.max_monthly_cost}, MONTHLY_COST),
    ],
)
def test_rate_and_cost_are_rejections(changes: dict[str, object], code: str) -> None:
    decision = decide_admission(usage(**changes), CEILINGS, REVISION)
    assert (decision.outcome, decision.reason_code) == (AdmissionOutcome.REJECT, code)


def test_exactly_at_the_cost_ceiling_is_admitted() -> None:
    edge = usage(daily_committed_cost=CEILINGS.max_daily_cost - LIMITS.max_cost)
    assert decide_admission(edge, CEILINGS, REVISION).allowed


def test_production_refuses_the_allow_all_controller() -> None:
    with pytest.raises(ValidationError) as caught:
        require_production_admission(AllowAllAdmission())
    assert caught.value.code == DEVELOPMENT_ONLY


@pytest.mark.parametrize(
    ("status", "before", "after"),
    [
        (RunStatus.COMPLETED, 4, 0),
        (RunStatus.FAILED, 4, 5),
        (RunStatus.CANCELLED, 4, 4),
    ],
)
def test_failure_count_rule(status: RunStatus, before: int, after: int) -> None:
    assert next_failure_count(before, status) == after


def run(status: RunStatus, failure: dict[str, object] | None) -> RunRecord:
    return RunRecord(
        id=UUID(int=3),
        tenant_id="t",
        principal_id="p",
        session_id=UUID(int=4),
        agent_id=UUID(int=2),
        agent_version="v1",
        policy_profile="default",
        status=status,
        priority=10,
        scheduled_for=T,
        requested_scopes=frozenset(),
        limits={},
        created_at=T,
        updated_at=T,
        failure=failure,
    )


def test_failure_classification_is_sanitized() -> None:
    failure = {"reason": "r", "error_class": "E", "message": "private", "details": {"x": 1}}
    assert sanitized_failure(run(RunStatus.FAILED, failure)) == {"reason": "r", "error_class": "E"}
    assert sanitized_failure(run(RunStatus.COMPLETED, failure)) is None


def test_accounting_event_id_is_one_per_occurrence() -> None:
    assert accounted_event_id(SID) == accounted_event_id(UUID(int=1))
    assert accounted_event_id(SID) != accounted_event_id(UUID(int=9))


@pytest.mark.parametrize(
    "bad",
    [
        {"batch_size": 0},
        {"fallback_poll_seconds": 0},
        {"failure_backoff_seconds": -1},
        {"contention_pause_seconds": 0},
    ],
)
def test_worker_settings_are_positive(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        WorkerSettings(**bad)  # type: ignore[arg-type]


def _decided(lag: float, disposition: str, coalesced: int = 0, paused: bool = False) -> Any:
    from datetime import timedelta

    from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
    from scheduling.domain.schedule import ScheduleState
    from scheduling.service.materializer import MaterializeResult, MaterializeStatus

    materialized = disposition == "MATERIALIZED"
    occ = ScheduleOccurrence(
        id=UUID(int=11),
        schedule_id=SID,
        schedule_revision=1,
        nominal_fire_at=T,
        disposition=OccurrenceDisposition(disposition),
        session_id=UUID(int=12) if materialized else None,
        run_id=UUID(int=13) if materialized else None,
        reason_code=None if materialized else "schedule.materialize.grace_expired",
        authority_version="v",
        materialized_at=T + timedelta(seconds=lag) if materialized else None,
        links_erased_at=None,
        created_at=T + timedelta(seconds=lag),
    )
    return MaterializeResult(
        SID,
        MaterializeStatus.DECIDED,
        occ,
        coalesced=coalesced,
        coalesced_first=T - timedelta(days=3) if coalesced else None,
        state_after=ScheduleState.PAUSED if paused else ScheduleState.ACTIVE,
    )


def test_worker_metrics_aggregate_lag_dispositions_and_outages() -> None:
    from scheduling.service.schedule_worker import WorkerMetrics

    metrics = WorkerMetrics()
    assert metrics.lag_percentiles() is None
    for lag in range(1, 101):
        metrics.observe(_decided(float(lag), "MATERIALIZED"))
    metrics.observe(_decided(5000.0, "MISSED", coalesced=3, paused=True))
    cuts = metrics.lag_percentiles()
    assert cuts is not None
    assert 50 <= cuts["p50"] <= 52
    assert 95 <= cuts["p95"] <= 97
    assert cuts["p99"] >= 99
    summary = metrics.summary()
    assert summary["dispositions"] == {"MATERIALIZED": 100, "MISSED": 1}
    assert summary["coalesced_misfires"] == 3
    assert summary["longest_outage_seconds"] == 3 * 86400 + 5000
    assert summary["auto_paused"] == 1
