"""The JUnit XML rendering: one testcase per gate, gate id and milestone as properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reports.model import GateReport, GateStatus


def render_junit(report: GateReport) -> str:
    suite = ET.Element(
        "testsuite",
        {
            "name": "scheduling-gates",
            "tests": str(len(report.gates)),
            "failures": str(report.summary.get("FAIL", 0)),
            "errors": str(report.summary.get("ERROR", 0)),
            "skipped": str(report.summary.get("MISSING", 0) + report.summary.get("NOT_RUN", 0)),
            "time": f"{report.run.duration_s:.3f}",
            "timestamp": report.run.started_at.isoformat(),
        },
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("ceiling", report.ceiling.label),
        ("commit", report.run.commit or ""),
        ("seed", str(report.run.seed)),
        ("profile", report.run.profile),
    ):
        ET.SubElement(props, "property", {"name": name, "value": value})
    for gate in report.gates:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"M{gate.milestone}",
                "name": gate.id,
                "time": f"{sum(c.duration_s for c in gate.checks):.3f}",
            },
        )
        case_props = ET.SubElement(case, "properties")
        for name, value in (
            ("gate", gate.id),
            ("milestone", f"M{gate.milestone}"),
            ("status", gate.status.value),
            ("kind", gate.kind),
        ):
            ET.SubElement(case_props, "property", {"name": name, "value": value})
        message = f"{gate.status.value}: {gate.detail}"
        details = "\n\n".join(f"{c.nodeid}: {c.detail}" for c in gate.checks if c.detail)
        if gate.status == GateStatus.FAIL:
            ET.SubElement(case, "failure", {"message": message}).text = details
        elif gate.status == GateStatus.ERROR:
            ET.SubElement(case, "error", {"message": message}).text = details
        elif gate.status in (GateStatus.MISSING, GateStatus.NOT_RUN):
            ET.SubElement(case, "skipped", {"message": message})
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
