"""The JUnit XML rendering: one testcase per gate, red exactly where the run is red.

The output validates against the common JUnit schema (the Jenkins xunit
``junit-10.xsd`` shape; see ``tests/unit/reports/junit.xsd``): properties live on
the suite only, gate metadata goes in each case's ``system-out``.

A gate's case fails when its status can fail the run: FAIL is a ``failure`` and
ERROR an ``error`` always; MISSING is a ``failure`` when no ``--require-*`` bar is
set (then any gate not passing fails the run) or when the bar covers the gate's
milestone, else ``skipped``; NOT_RUN is ``skipped``. When a bar is set, one more
case, ``requirements``, fails iff the bar was not met (a declared milestone can hold
the ceiling with every gate green).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reports.model import GateReport, GateResult, GateStatus, Requirements

SUITE = "scheduling-gates"


def _covered(bar: Requirements, milestone: int) -> bool:
    """Whether the bar requires this milestone (no bar: every milestone counts)."""
    if not bar.is_set:
        return True
    return (bar.ceiling is not None and milestone <= bar.ceiling) or milestone in bar.complete


def verdict(gate: GateResult, bar: Requirements) -> str:
    """``failure``, ``error``, ``skipped`` or ``passed``: the JUnit outcome of a gate."""
    if gate.status == GateStatus.FAIL:
        return "failure"
    if gate.status == GateStatus.ERROR:
        return "error"
    if gate.status == GateStatus.MISSING:
        return "failure" if _covered(bar, gate.milestone) else "skipped"
    if gate.status == GateStatus.NOT_RUN:
        return "skipped"
    return "passed"


def _bar_text(bar: Requirements) -> str:
    parts = []
    if bar.ceiling is not None:
        parts.append(f"ceiling >= M{bar.ceiling}")
    parts += [f"M{m} complete" for m in bar.complete]
    return ", ".join(parts) or "none"


def _case(suite: ET.Element, gate: GateResult, bar: Requirements) -> str:
    case = ET.SubElement(
        suite,
        "testcase",
        {
            "classname": f"{SUITE}.M{gate.milestone}",
            "name": gate.id,
            "time": f"{sum(c.duration_s for c in gate.checks):.3f}",
        },
    )
    outcome = verdict(gate, bar)
    message = f"{gate.status.value}: {gate.detail}"
    details = "\n\n".join(f"{c.nodeid}: {c.detail}" for c in gate.checks if c.detail)
    if gate.status == GateStatus.MISSING:
        message += (
            f'; bind a check with @pytest.mark.gate("{gate.id}", facet=...) in src/gates/checks/'
        )
        if outcome == "skipped":
            message += f" (not required by this run's bar: {_bar_text(bar)})"
    if outcome in ("failure", "error", "skipped"):
        ET.SubElement(case, outcome, {"type": gate.status.value, "message": message}).text = (
            details or None
        )
    ET.SubElement(case, "system-out").text = (
        f"gate {gate.id} (M{gate.milestone}, {gate.kind}): {gate.status.value}\n"
        f"{gate.statement}\nreproduce: {gate.reproduce}\n"
    )
    return outcome


def render_junit(report: GateReport) -> str:
    bar = report.requirements
    root = ET.Element("testsuites", {"name": SUITE, "time": f"{report.run.duration_s:.3f}"})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": SUITE, "timestamp": report.run.started_at.isoformat(), "hostname": "localhost"},
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("ceiling", report.ceiling.label),
        ("commit", report.run.commit or ""),
        ("seed", str(report.run.seed)),
        ("profile", report.run.profile),
        ("required", _bar_text(bar)),
        ("schema_version", report.schema_version),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    outcomes = [_case(suite, gate, bar) for gate in report.gates]
    if bar.is_set:
        case = ET.SubElement(
            suite, "testcase", {"classname": SUITE, "name": "requirements", "time": "0.000"}
        )
        if not bar.met:
            ET.SubElement(
                case,
                "failure",
                {
                    "type": "REQUIREMENTS",
                    "message": f"bar not met ({_bar_text(bar)}): verified ceiling "
                    f"{report.ceiling.label}; {report.ceiling.reason}",
                },
            )
        outcomes.append("passed" if bar.met else "failure")
    counts = {k: str(outcomes.count(k)) for k in ("failure", "error", "skipped")}
    attrs = {
        "tests": str(len(outcomes)),
        "failures": counts["failure"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "time": f"{report.run.duration_s:.3f}",
    }
    for key, value in attrs.items():
        suite.set(key, value)
        if key != "skipped":
            root.set(key, value)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
