"""What a release reviewer reads first, shared by the HTML and Markdown renderings.

In order: the ceiling and what holds it; whether the run's ``--require-*`` bar was
set and met; each milestone's state, consecutive milestones of the same source and
state collapsed into ranges ("M1-M9 complete (declared)", with an en dash); then, per
catalog section, the items that do not pass with why and what to do, then the passing
ones with a one-line evidence summary per check.

A section is one catalog of verified items (the gates today). Another catalog with
the same statuses (e.g. spec rules) becomes one more ``Section`` appended by
``sections_of``; the renderings draw every section the same way, below the gates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reports.model import (
    Ceiling,
    CheckResult,
    GateReport,
    GateResult,
    GateStatus,
    MilestoneResult,
    MilestoneState,
    Requirements,
)

NOT_PASSING_ORDER = (GateStatus.FAIL, GateStatus.ERROR, GateStatus.MISSING, GateStatus.NOT_RUN)


@dataclass(frozen=True)
class MilestoneLine:
    first: int
    last: int
    source: str  # suite | ledger (declared) | none
    state: MilestoneState
    text: str


@dataclass(frozen=True)
class Item:
    """One verified thing (a gate): its status, why, and what to do about it."""

    id: str
    milestone: int
    title: str
    statement: str
    status: GateStatus
    why: str
    todo: str  # empty when passing
    result: GateResult


@dataclass(frozen=True)
class Section:
    title: str  # "Gates"
    noun: str  # "gate"
    not_passing: list[Item]
    passing: list[Item]


# ------------------------------------------------------------------ milestones


def _range(first: int, last: int) -> str:
    return f"M{first}" if first == last else f"M{first}\u2013M{last}"


def milestone_lines(milestones: Sequence[MilestoneResult]) -> list[MilestoneLine]:
    """Suite milestones one per line; declared and unknown ones collapsed into ranges."""
    lines: list[MilestoneLine] = []
    run: list[MilestoneResult] = []

    def flush() -> None:
        if not run:
            return
        first, last, m = run[0].number, run[-1].number, run[0]
        state = m.state.value.replace("_", " ")
        where = (
            "declared" if m.source == "ledger" else "not in the suite or the declared milestones"
        )
        lines.append(
            MilestoneLine(
                first, last, m.source, m.state, f"{_range(first, last)} {state} ({where})"
            )
        )
        run.clear()

    for m in sorted(milestones, key=lambda m: m.number):
        if m.source == "suite":
            flush()
            state = m.state.value.replace("_", " ")
            lines.append(
                MilestoneLine(
                    m.number,
                    m.number,
                    m.source,
                    m.state,
                    f"M{m.number} {state}: {m.gates_passing} of {m.gates_total} gates pass"
                    " (this suite)",
                )
            )
            continue
        if run and (run[-1].source, run[-1].state) != (m.source, m.state):
            flush()
        run.append(m)
    flush()
    return lines


# ------------------------------------------------------------------ the bar


def bar_text(bar: Requirements) -> str:
    parts = []
    if bar.ceiling is not None:
        parts.append(f"--require-ceiling M{bar.ceiling}")
    parts += [f"--require-complete M{m}" for m in bar.complete]
    return " ".join(parts)


def bar_line(
    bar: Requirements, ceiling: Ceiling | None = None, milestones: Sequence[MilestoneResult] = ()
) -> str:
    """Whether a bar was set and met, and (given the milestones) which part failed."""
    if not bar.is_set:
        return "No --require-* bar set: the run passes only if every selected gate passes."
    line = f"Bar {bar_text(bar)}: {'MET' if bar.met else 'NOT MET'}"
    if bar.met or ceiling is None:
        return line + "."
    states = {m.number: m.state.value.replace("_", " ") for m in milestones}
    unmet = []
    if bar.ceiling is not None and ceiling.milestone < bar.ceiling:
        unmet.append(f"the ceiling is {ceiling.label}, not M{bar.ceiling}")
    unmet += [
        f"M{m} is {states.get(m, 'unknown')}"
        for m in bar.complete
        if states.get(m) != MilestoneState.COMPLETE.value
    ]
    return f"{line}: {'; '.join(unmet)}."


# ------------------------------------------------------------------ evidence


def _walk(evidence: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in evidence.items():
        if isinstance(value, Mapping):
            yield from _walk(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        return len(value)
    return None


def evidence_summary(evidence: Mapping[str, Any]) -> str:
    """One line: interleavings explored, examples, crash points hit, zones covered."""
    flat = dict(_walk(evidence))
    totals = {"interleavings": 0, "examples": 0, "crash points": 0, "zones": 0, "cases": 0}
    for key, value in flat.items():
        n = _count(value)
        leaf = key.rsplit(".", 1)[-1].lower()
        if n is None or "seed" in leaf:
            continue
        group = key.rsplit(".", 1)[0] if "." in key else ""
        mode = flat.get(f"{group}.mode" if group else "mode")
        if leaf == "interleavings_explored":
            totals["interleavings"] += n
        elif leaf == "executions" and mode == "crash":
            totals["crash points"] += n
        elif "example" in leaf:
            totals["examples"] += n
        elif leaf.startswith("zones"):
            totals["zones"] = max(totals["zones"], n)
        elif "case" in leaf:
            totals["cases"] += n
    parts = [f"{n} {name}" for name, n in totals.items() if n]
    if parts:
        return " · ".join(parts)
    if not evidence:
        return "no evidence recorded"
    shown = []
    for key, value in flat.items():
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            text = f"{key}: {value}"
            shown.append(text if len(text) <= 70 else text[:67] + "...")
        else:
            shown.append(f"{key} ({len(value)} entries)" if isinstance(value, list) else key)
    line = "; ".join(shown)
    return line if len(line) <= 140 else line[:137] + "..."


def replay_commands(evidence: Mapping[str, Any]) -> list[str]:
    """The simulator command for each exploration a check recorded (scenario, mode, seed)."""
    flat = dict(_walk(evidence))
    commands = []
    for key, scenario in flat.items():
        if key.rsplit(".", 1)[-1] != "scenario" or not isinstance(scenario, str):
            continue
        group = key[: -len("scenario")]
        mode, seed = flat.get(f"{group}mode"), flat.get(f"{group}seed")
        if isinstance(mode, str) and isinstance(seed, int):
            runs = flat.get(f"{group}executions")
            many = f" --executions {runs}" if mode == "random" and isinstance(runs, int) else ""
            commands.append(
                f"scheduling-sim run --scenario {scenario} --mode {mode} --seed {seed}{many}"
                " --trace race.json"
            )
    return commands


def check_lines(checks: Sequence[CheckResult]) -> list[tuple[CheckResult, str]]:
    """Each check with its one-line evidence summary (and how to replay its races)."""
    lines = []
    for c in checks:
        summary = evidence_summary(c.evidence)
        replays = replay_commands(c.evidence)
        if replays:
            summary += " · replay: " + " | ".join(f"`{r}`" for r in replays)
        lines.append((c, summary))
    return lines


# ------------------------------------------------------------------ what to do


def todo(gate: GateResult) -> str:
    if gate.status == GateStatus.MISSING:
        facets = [f.name for f in gate.facets if f.status == GateStatus.MISSING]
        facet = "" if facets == ["check"] else f', facet="{facets[0]}"'
        where = "" if facets == ["check"] else f" (missing facet: {', '.join(facets)})"
        return (
            f'Bind a check{where}: `@pytest.mark.gate("{gate.id}"{facet})` on a test in '
            f"src/gates/checks/; `scheduling-gates explain {gate.id}` shows what is bound."
        )
    if gate.status == GateStatus.NOT_RUN:
        return f"Filtered out of this run; run it with `scheduling-gates run --gate {gate.id}`."
    if gate.status in (GateStatus.FAIL, GateStatus.ERROR):
        bad = [c for c in gate.checks if c.outcome.value != "passed"]
        first = f" First: {bad[0].nodeid}" if bad else ""
        detail = ""
        if bad and bad[0].detail:
            detail = ": " + bad[0].detail.strip().splitlines()[0][:200]
        return f"Reproduce: `{gate.reproduce}`.{first}{detail}"
    return ""


def _item(gate: GateResult) -> Item:
    return Item(
        id=gate.id,
        milestone=gate.milestone,
        title=gate.title,
        statement=gate.statement,
        status=gate.status,
        why=gate.detail,
        todo=todo(gate),
        result=gate,
    )


def gate_section(gates: Sequence[GateResult]) -> Section:
    rank = {s: i for i, s in enumerate(NOT_PASSING_ORDER)}
    not_passing = sorted(
        (g for g in gates if g.status != GateStatus.PASS),
        key=lambda g: (rank[g.status], g.milestone),
    )
    return Section(
        title="Gates",
        noun="gate",
        not_passing=[_item(g) for g in not_passing],
        passing=[_item(g) for g in gates if g.status == GateStatus.PASS],
    )


def sections_of(report: GateReport) -> list[Section]:
    """Every catalog section of the report, the gates first."""
    return [gate_section(report.gates)]
