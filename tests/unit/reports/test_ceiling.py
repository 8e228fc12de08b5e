"""The verified gate ceiling: ledgers with gaps, unknown milestones, early failures."""

import pytest

from catalog import load_catalog
from catalog.milestones import MilestonesError, parse_milestones
from reports.evaluate import compute_ceiling, milestone_results
from reports.model import GateStatus, MilestoneState

CATALOG = load_catalog()
SUITE = CATALOG.milestones()


def ledger(text: str):  # type: ignore[no-untyped-def]
    return parse_milestones(text, "test ledger", SUITE)


def entries(numbers: range | list[int], status: str = "complete") -> str:
    return "".join(f'[[milestone]]\nnumber = {n}\nstatus = "{status}"\n' for n in numbers)


def all_gates(status: GateStatus) -> dict[str, GateStatus]:
    return {g.id: status for g in CATALOG}


def test_shipped_situation_holds_the_ceiling_at_m9_however_green_m11_is() -> None:
    text = entries(range(1, 10)) + entries([10], "in_progress") + entries([12])
    milestones = milestone_results(CATALOG, all_gates(GateStatus.PASS), ledger(text))
    ceiling = compute_ceiling(milestones)
    assert (ceiling.label, ceiling.held_by) == ("M9", 10)
    m11 = next(m for m in milestones if m.number == 11)
    assert m11.state == MilestoneState.COMPLETE
    assert m11.gates_passing == 23


def test_a_gap_in_the_ledger_is_unknown_and_holds_the_ceiling() -> None:
    text = entries([1, 2, 4, 5, 6, 7, 8, 9, 10, 12])
    ceiling = compute_ceiling(milestone_results(CATALOG, all_gates(GateStatus.PASS), ledger(text)))
    assert (ceiling.label, ceiling.held_by) == ("M2", 3)
    assert "unknown" in ceiling.reason


def test_unknown_milestones_between_suite_milestones_hold_the_ceiling() -> None:
    text = entries([*range(1, 11), 12])
    ceiling = compute_ceiling(milestone_results(CATALOG, all_gates(GateStatus.PASS), ledger(text)))
    assert (ceiling.label, ceiling.held_by) == ("M12", 13)


def test_everything_complete_reaches_the_highest_milestone() -> None:
    text = entries([n for n in range(1, 23) if n not in SUITE])
    ceiling = compute_ceiling(milestone_results(CATALOG, all_gates(GateStatus.PASS), ledger(text)))
    assert (ceiling.label, ceiling.held_by) == ("M23", None)


@pytest.mark.parametrize(
    "status", [GateStatus.FAIL, GateStatus.ERROR, GateStatus.MISSING, GateStatus.NOT_RUN]
)
def test_one_gate_not_passing_in_an_early_milestone_holds_everything_after(
    status: GateStatus,
) -> None:
    text = entries([n for n in range(1, 23) if n not in SUITE])
    statuses = all_gates(GateStatus.PASS)
    statuses[CATALOG.in_milestone(11)[-1].id] = status
    ceiling = compute_ceiling(milestone_results(CATALOG, statuses, ledger(text)))
    assert (ceiling.label, ceiling.held_by) == ("M10", 11)
    assert "22 of 23 gates pass" in ceiling.reason


def test_nothing_complete_gives_no_ceiling() -> None:
    ceiling = compute_ceiling(milestone_results(CATALOG, all_gates(GateStatus.PASS), ledger("")))
    assert (ceiling.milestone, ceiling.label, ceiling.held_by) == (0, "none", 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (entries([11]), "verified by this suite"),
        (entries([3, 3]), "listed twice"),
        ('[[milestone]]\nnumber = 2\nstatus = "done"\n', "bad milestone entry"),
        (entries([0]), "start at 1"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_untrustworthy_ledgers_are_refused(text: str, message: str) -> None:
    with pytest.raises(MilestonesError, match=message):
        ledger(text)
