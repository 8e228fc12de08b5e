"""gate.schedule.not_early, facet "calculator": no nominal instant the calculator returns
precedes (or equals) its reference, none is missed between two consecutive results,
and nothing is due one microsecond before a nominal instant.

Generated one-time, daily and weekly definitions over many zones, aimed at real
transitions; the materializer facet is checked by the worker's own gate check.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.checks.recurrence_support import (
    REAL,
    Tally,
    aims,
    assert_next_and_latest,
    assert_sequence,
    civil_cadences,
    reproduction,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import OnceCadence
from scheduling.recurrence import calculate_due, latest_at_or_before, next_after

GATE = "gate.schedule.not_early"
TICK = timedelta(microseconds=1)
# st.datetimes draws naive values between these; each is then read as UTC.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC).replace(tzinfo=None)
LATEST = datetime(2100, 1, 1, tzinfo=UTC).replace(tzinfo=None)


@pytest.mark.gate(GATE, facet="calculator")
def test_no_instant_is_early_and_none_is_skipped(gate_evidence: GateEvidence) -> None:
    tally = Tally()
    boundary_scans = 0

    @given(st.data())
    def property_(data: st.DataObject) -> None:
        nonlocal boundary_scans
        aim = data.draw(aims())
        cadence = data.draw(civil_cadences(aim, ("DAILY", "WEEKLY")))
        tally.note(aim, cadence.kind.value)
        assert_next_and_latest(REAL, cadence, aim.reference)
        got = assert_sequence(REAL, cadence, aim.reference, 5)
        grace = timedelta(seconds=data.draw(st.integers(1, 7200)))
        for nominal in got:
            # A scan one microsecond early finds nothing due at this instant ...
            early = calculate_due(cadence, grace, nominal - TICK, next_fire_at=nominal)
            assert early.candidate is None
            assert early.next_future == nominal
            # ... and a scan at the instant finds exactly it, within grace.
            due = calculate_due(cadence, grace, nominal, next_fire_at=nominal)
            assert due.candidate == nominal
            assert due.within_grace
            assert due.coalesced_count == 0
            boundary_scans += 2

    @given(
        st.datetimes(min_value=EARLIEST, max_value=LATEST),
        st.integers(-(10**6), 10**6),
    )
    def once(at: datetime, delta_us: int) -> None:
        cadence = OnceCadence(at.replace(tzinfo=UTC))
        reference = cadence.at + timedelta(microseconds=delta_us)
        nxt = next_after(cadence, reference)
        assert (nxt is None) == (reference >= cadence.at)
        assert nxt is None or nxt > reference
        latest = latest_at_or_before(cadence, reference)
        assert (latest is None) == (reference < cadence.at)
        tally.examples += 1

    property_()
    once()
    gate_evidence.record("generated", tally.evidence())
    gate_evidence.record("boundary_scans", boundary_scans)
    gate_evidence.record("reproduction", reproduction())
    if boundary_scans == 0:
        gate_evidence.not_covered("no generated definition produced an instant")
