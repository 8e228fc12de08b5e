"""The one line a rendering shows for the latest sensitivity run (``RunMetadata.sensitivity``)."""

from __future__ import annotations

from reports.model import Sensitivity


def sensitivity_line(sensitivity: Sensitivity | None) -> str:
    """What the report can say about sensitivity: the linked run, or that there is none."""
    if sensitivity is None:
        return "Sensitivity: not recorded by this run"
    run = sensitivity.run
    if run is None:
        note = sensitivity.note or "no sensitivity run"
        return f"Sensitivity: {note} (looked for {sensitivity.path})"
    when = run.finished_at.isoformat() if run.finished_at is not None else "undated"
    scope = "all shipped mutants" if not run.selection else f"{len(run.selection)} selected"
    survivors = f"; not killed: {', '.join(run.not_killed)}" if run.not_killed else ""
    untargeted = f"; {len(run.untargeted)} gates/rules untargeted" if run.untargeted else ""
    digest = (sensitivity.sha256 or "")[:12]
    return (
        f"Sensitivity: latest mutate run {sensitivity.path} (sha256 {digest}, {when}, "
        f"commit {(run.commit or 'unknown')[:12]}): {run.killed} of {run.total} mutants "
        f"killed, {scope}{survivors}{untargeted}"
    )
