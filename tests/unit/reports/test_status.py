"""Gate status follows from its checks, facet by facet; MISSING and NOT_RUN never pass."""

import pytest

from catalog import load_catalog
from reports.evaluate import evaluate_facets, gate_status
from reports.model import CheckOutcome, CheckResult, GateStatus

CATALOG = load_catalog()
TWO_FACETS = CATALOG.get("gate.schedule.not_early")
ONE_FACET = CATALOG.get("gate.schedule.civil_time")


def check(facet: str, outcome: CheckOutcome, n: int = 0) -> CheckResult:
    return CheckResult(nodeid=f"t.py::c{n}", facet=facet, outcome=outcome)


def status_of(gate, checks, selected=True):  # type: ignore[no-untyped-def]
    return gate_status(selected, evaluate_facets(gate, checks))[0]


def test_all_facets_passing_is_pass() -> None:
    checks = [
        check("calculator", CheckOutcome.PASSED),
        check("materializer", CheckOutcome.PASSED, 1),
    ]
    assert status_of(TWO_FACETS, checks) == GateStatus.PASS


def test_a_facet_without_checks_is_missing_even_when_the_other_passes() -> None:
    status, why = gate_status(
        True, evaluate_facets(TWO_FACETS, [check("calculator", CheckOutcome.PASSED)])
    )
    assert status == GateStatus.MISSING
    assert "materializer" in why


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (CheckOutcome.FAILED, GateStatus.FAIL),
        (CheckOutcome.ERROR, GateStatus.ERROR),
        (CheckOutcome.SKIPPED, GateStatus.ERROR),
    ],
)
def test_one_bad_check_among_passing_ones_decides(
    outcome: CheckOutcome, expected: GateStatus
) -> None:
    checks = [check("check", CheckOutcome.PASSED, i) for i in range(3)] + [
        check("check", outcome, 9)
    ]
    assert status_of(ONE_FACET, checks) == expected


def test_fail_outranks_error_outranks_missing() -> None:
    checks = [
        check("calculator", CheckOutcome.ERROR),
        check("materializer", CheckOutcome.FAILED, 1),
    ]
    assert status_of(TWO_FACETS, checks) == GateStatus.FAIL
    assert status_of(TWO_FACETS, [check("calculator", CheckOutcome.ERROR)]) == GateStatus.ERROR


def test_no_checks_is_missing_and_unselected_is_not_run() -> None:
    assert status_of(ONE_FACET, []) == GateStatus.MISSING
    assert status_of(ONE_FACET, [], selected=False) == GateStatus.NOT_RUN
