"""gate.schedule.run_bounded: every scheduled run is bounded.

Real PostgreSQL, end to end: schedule service (API role) -> materializer (scheduler
role) -> run queue and run workers (trusted path) with the scripted agent.

1. Validation: a definition missing, zeroing or negating the timeout or any of the
   step, model-call, tool-call and cost bounds is rejected with a stable code and
   stores nothing.
2. Stamping: a valid occurrence's run carries every limit of the revision and
   ``deadline_at = materialized_at + run_timeout_seconds``.
3. Enforcement after crash recovery: for each bound a scripted run that would exceed it
   is claimed by worker ``w1``, which crashes after its second checkpoint (or its third
   heartbeat for the deadline); after the lease expires ``w2`` recovers the run from its
   checkpoint. The run must fail with that bound's reason having consumed exactly the
   bound in total across both attempts (a recovered run with a fresh budget would show
   more, and so would the sum of what its model calls cost), the recovering worker
   must resume at the last checkpoint's cursor, and the deadline case must end exactly
   at ``deadline_at``. A deadline that passes between two actions (while the crashed
   holder's lease runs out) fails the recovered run before any further action. One
   more crash
   falls between an action's charge and its result (after ``run.charged``): the
   recovered run must still perform exactly the bound's actions (charging the resumed
   action twice would stop it one short). Each failure is classified by what ended
   it: ``DeadlineExceeded`` for the deadline, ``RunLimitExceeded`` for a bound.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import SchedulingError, ValidationError
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import (
    COST_LIMIT,
    DEADLINE_EXCEEDED,
    MODEL_CALL_LIMIT,
    STEP_LIMIT,
    TOOL_CALL_LIMIT,
    WorkerSettings,
)
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import TOOL_AGENT_VERSION, run_worker, seed_tool_agent
from simulation.worlds.service import LIMITS, START

GATE = "gate.schedule.run_bounded"
CAPACITY = QueueCapacity(4, 1, 1)
SETTINGS = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, poll_seconds=1)
BOUND_FIELDS = ("max_steps", "max_model_calls", "max_tool_calls", "max_cost")


class Crash(Exception):
    """An injected worker crash."""


class CrashAt:
    def __init__(self, step: str, nth: int) -> None:
        self.name, self.nth, self.seen, self.hit = step, nth, 0, False

    async def step(self, name: str) -> None:
        if name == self.name:
            self.seen += 1
            if self.seen == self.nth:
                self.hit = True
                raise Crash(f"{name} #{self.nth}")


def invalid_definitions() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    base = LIMITS.to_json()
    for name in BOUND_FIELDS:
        missing = {k: v for k, v in base.items() if k != name}
        cases.append((f"{name} missing", {"limits": missing}))
        for bad in (0, -1):
            value: Any = str(bad) if name == "max_cost" else bad
            cases.append((f"{name}={bad}", {"limits": {**base, name: value}}))
    for bad in (0, -1):
        cases.append((f"run_timeout_seconds={bad}", {"run_timeout_seconds": bad}))
    cases.append(("run_timeout_seconds missing", {"run_timeout_seconds": None}))
    return cases


def revision_definition() -> dict[str, Any]:
    return ScheduleRevision(
        schedule_id=UUID(int=1),
        revision=1,
        title="t",
        instruction="i",
        agent_id=UUID(int=2),
        agent_version="v1",
        policy_profile="default",
        requested_scopes=frozenset(),
        limits=LIMITS,
        run_timeout_seconds=60,
        cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"},
        misfire_grace_seconds=60,
        max_consecutive_failures=1,
        created_by_principal_id="p",
        created_at=START,
    ).to_definition()


async def schedules_count(h: MaterializeWorld) -> int:
    return int((await h.sql("SELECT count(*) AS n FROM schedules"))[0]["n"])


async def materialize(h: MaterializeWorld, **overrides: Any) -> tuple[UUID, dict[str, Any]]:
    sid = await h.create(**overrides)
    fire = (await h.sql("SELECT next_fire_at FROM schedules WHERE id = :i", i=sid))[0]
    if h.clock.now() < fire["next_fire_at"]:
        h.clock.advance_to(fire["next_fire_at"])
    h.clock.advance(1)
    result = await h.materializer().materialize(sid)
    assert result.status is MaterializeStatus.DECIDED
    assert result.run_id is not None
    rows = await h.sql("SELECT * FROM runs WHERE id = :i", i=result.run_id)
    return sid, rows[0]


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_every_scheduled_run_is_bounded(pg_url: str, gate_evidence: GateEvidence) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_tool_agent(h.admin, START)
        # 1. Validation rejects every missing or non-positive bound and stores nothing.
        rejected: dict[str, str] = {}
        for n, (label, override) in enumerate(invalid_definitions()):
            with pytest.raises(SchedulingError) as caught:
                await h.create(key=f"bad-{n}", **override)
            assert isinstance(caught.value, ValidationError), label
            rejected[label] = caught.value.code
        assert await schedules_count(h) == 0
        # A stored definition without its timeout cannot be decoded into a revision either.
        for name in ("run_timeout_seconds", "limits"):
            stored = revision_definition()
            del stored[name]
            with pytest.raises(ValidationError) as caught_missing:
                ScheduleRevision.from_definition(UUID(int=1), 1, "p", START, stored)
            rejected[f"stored definition without {name}"] = caught_missing.value.code
        # Each rejection carries the stable code of its own rule, not an unrelated one.
        expected_codes = {
            "missing": {"schedule.limits.missing_field", "schedule.revision.missing_field"},
            "=": {"schedule.limits.non_positive_bound", "schedule.revision.non_positive_timeout"},
            "without": {"schedule.revision.missing_field"},
        }
        for label, code in rejected.items():
            kind = next(k for k in expected_codes if k in label)
            assert code in expected_codes[kind], (label, code)
        gate_evidence.record("validation_rejected", rejected)

        # 2. A valid occurrence stamps every limit and the derived deadline.
        stamped = {
            "max_steps": 3,
            "max_model_calls": 7,
            "max_tool_calls": 5,
            "max_cost": Decimal("0.75"),
        }
        _, run = await materialize(
            h, limits=RunLimits(**stamped), run_timeout_seconds=900, instruction="[script:succeed]"
        )
        assert run["limits"] == RunLimits(**stamped).to_json()
        occurrence = (
            await h.sql("SELECT * FROM schedule_occurrences WHERE run_id = :r", r=run["id"])
        )[0]
        assert run["deadline_at"] == occurrence["materialized_at"] + timedelta(seconds=900)
        assert run["priority"] == 10
        done = await run_worker(h.admin, h.clock, "w0", capacity=CAPACITY).run_once()
        assert done is not None
        assert (done.run_id, done.status) == (str(run["id"]), "COMPLETED")
        gate_evidence.record(
            "stamped",
            {"limits": run["limits"], "deadline_after_materialized_seconds": 900},
        )

        # 3. Each bound holds across a crash and a recovery by another worker.
        cases: list[tuple[str, str, dict[str, Any], str, str, object]] = [
            ("steps", "[script:steps]", {"max_steps": 4}, STEP_LIMIT, "steps", 4),
            (
                "model_calls",
                "[script:steps]",
                {"max_model_calls": 3},
                MODEL_CALL_LIMIT,
                "model_calls",
                3,
            ),
            (
                "tool_calls",
                "[script:tools]",
                {"max_tool_calls": 3},
                TOOL_CALL_LIMIT,
                "tool_calls",
                3,
            ),
            ("cost", "[script:spend]", {"max_cost": Decimal("3.5")}, COST_LIMIT, "cost", "3"),
        ]
        recoveries: list[dict[str, Any]] = []
        for label, script, bound, code, key, expected in cases:
            values: dict[str, Any] = {
                **stamped,
                "max_steps": 50,
                "max_model_calls": 50,
                "max_tool_calls": 50,
                "max_cost": Decimal("9"),
                **bound,
            }
            _, run = await materialize(
                h,
                limits=RunLimits(**values),
                instruction=f"Work until stopped. {script}",
                agent_version=TOOL_AGENT_VERSION,
                requested_scopes=frozenset({"memory.read"}),
            )
            recoveries.append(
                await crash_and_recover(
                    h, run["id"], "run.checkpointed", 2, label, code, key, expected
                )
            )
        # A crash between an action's charge and its result: the recovering worker
        # performs the charged action without charging it again (a second charge would
        # end the run one action short of its bound).
        _, run = await materialize(
            h,
            limits=RunLimits(
                max_steps=4, max_model_calls=50, max_tool_calls=50, max_cost=Decimal("9")
            ),
            instruction="Work until stopped. [script:steps]",
            agent_version=TOOL_AGENT_VERSION,
            requested_scopes=frozenset({"memory.read"}),
        )
        recoveries.append(
            await crash_and_recover(
                h, run["id"], "run.charged", 2, "steps_charged", STEP_LIMIT, "steps", 4
            )
        )
        # The deadline passes between two actions (while the crashed holder's lease runs
        # out): the recovering worker performs no further action and fails the run at
        # its first look, though its step budget has plenty left.
        _, run = await materialize(
            h,
            limits=RunLimits(
                max_steps=50, max_model_calls=50, max_tool_calls=50, max_cost=Decimal("9")
            ),
            run_timeout_seconds=30,
            instruction="Work until stopped. [script:steps]",
            agent_version=TOOL_AGENT_VERSION,
            requested_scopes=frozenset({"memory.read"}),
        )
        between = await crash_and_recover(
            h,
            run["id"],
            "run.checkpointed",
            2,
            "deadline_between_actions",
            DEADLINE_EXCEEDED,
            None,
            None,
        )
        assert between["performed_total"] == between["performed_at_crash"], between
        recoveries.append(between)
        _, run = await materialize(
            h, run_timeout_seconds=300, instruction="Take your time. [script:run_long:3600]"
        )
        recoveries.append(
            await crash_and_recover(
                h, run["id"], "run.heartbeat", 3, "deadline", DEADLINE_EXCEEDED, None, None
            )
        )
        final = (await h.sql("SELECT * FROM runs WHERE id = :i", i=run["id"]))[0]
        assert final["finished_at"] == final["deadline_at"]
        gate_evidence.record("recoveries", recoveries)
        gate_evidence.count("limits_hit", len(recoveries))
    finally:
        await h.close()


async def crash_and_recover(
    h: MaterializeWorld,
    run_id: UUID,
    step: str,
    nth: int,
    label: str,
    code: str,
    key: str | None,
    expected: object,
) -> dict[str, Any]:
    crash = CrashAt(step, nth)
    first = run_worker(h.admin, h.clock, "w1", capacity=CAPACITY, settings=SETTINGS, probe=crash)
    with pytest.raises(Crash):
        await first.run_once()
    assert crash.hit
    at_crash = (await h.sql("SELECT * FROM runs WHERE id = :i", i=run_id))[0]
    performed_at_crash = await performed(h, run_id)
    checkpoint = (
        await h.sql(
            "SELECT state FROM run_checkpoints WHERE run_id = :i ORDER BY seq DESC LIMIT 1",
            i=run_id,
        )
    )[0]["state"]
    assert at_crash["status"] == "RUNNING"
    assert at_crash["lease_owner"] == "w1"
    h.clock.advance(SETTINGS.lease_seconds + 1)
    second = run_worker(h.admin, h.clock, "w2", capacity=CAPACITY, settings=SETTINGS)
    outcome = await second.run_once()
    assert outcome is not None
    assert outcome.run_id == str(run_id)
    assert outcome.recovered
    assert outcome.reason_code == code, (label, outcome)
    # Recovered from its checkpoint: at its cursor, not from the start (which would
    # perform the earlier actions again).
    assert outcome.resumed_cursor == checkpoint.get("cursor", 0), (label, checkpoint, outcome)
    final = (await h.sql("SELECT * FROM runs WHERE id = :i", i=run_id))[0]
    assert final["status"] == "FAILED"
    assert final["failure"]["reason"] == code
    # Its class tells a deadline from a bound (what accounting and its event record).
    kind = "DeadlineExceeded" if code == DEADLINE_EXCEEDED else "RunLimitExceeded"
    assert final["failure"]["error_class"] == kind, (label, final["failure"])
    performed_total = await performed(h, run_id)
    if key is not None:
        assert final["usage"][key] == expected, (label, final["usage"])
        # Actions performed over both attempts never exceed the bound.
        if key in ("steps", "model_calls", "tool_calls"):
            assert performed_total == expected, (label, performed_total)
        if key == "cost":
            # What was spent over both attempts, not the usage the last one reports: a
            # recovered run whose cost restarted at 0 would spend past the bound.
            spent = await h.sql(
                "SELECT payload FROM session_events WHERE run_id = :i"
                " AND event_type = 'model.called'",
                i=run_id,
            )
            total = sum((Decimal(row["payload"]["cost"]) for row in spent), Decimal(0))
            assert total == Decimal(str(expected)), (label, total)
    return {
        "bound": label,
        "crash_step": f"{step}#{nth}",
        "usage_at_crash": at_crash["usage"],
        "recovered_by": "w2",
        "fencing_tokens": [at_crash["fencing_token"], outcome.fencing_token],
        "resumed_from_checkpoint_seq": outcome.resumed_from_seq,
        "resumed_cursor": outcome.resumed_cursor,
        "final_usage": final["usage"],
        "performed_at_crash": performed_at_crash,
        "performed_total": performed_total,
        "reason": outcome.reason_code,
        "virtual_end": outcome.ended_at.isoformat(),
    }


async def performed(h: MaterializeWorld, run_id: UUID) -> int:
    """Actions the run performed so far (model calls and tool results or refusals)."""
    rows = await h.sql(
        "SELECT count(*) AS n FROM session_events WHERE run_id = :i"
        " AND event_type IN ('model.called', 'tool.result', 'tool.denied')",
        i=run_id,
    )
    return int(rows[0]["n"])
