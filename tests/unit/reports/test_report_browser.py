"""The report's first screen in a real headless browser (Chromium from Debian).

At 1280x800 the first screen must show the ceiling, the run's bar and the start of
the not-passing list (failing run) or say every gate passes (passing run). Layout is
measured by a copy of the page with a probe script added; the report itself carries
no script. Skips, saying how to install it, when no Chromium is on PATH; CI
(.ci/run) installs it. Set REPORT_SHOTS_DIR to keep the screenshots.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from reports.model import CheckOutcome, Requirements
from reports.render_html import render_html
from testsupport.reports import check, report_of

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium on PATH: `apt-get install -y chromium` (Debian) to run the browser test",
)
WIDTH, HEIGHT = 1280, 800

PROBE = """<script>
const r = s => { const e = document.querySelector(s); if (!e) return null;
  const b = e.getBoundingClientRect(); return {top: b.top, bottom: b.bottom}; };
document.body.setAttribute('data-layout', JSON.stringify({
  ceiling: r('#ceiling'), bar: r('#bar'), milestones: r('#milestones'),
  heading: r('#gate-not-passing'), first: r('tr.np'), passing: r('#gate-passing')}));
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    return subprocess.run(
        [
            BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", f"--window-size={WIDTH},{HEIGHT}", *args,
        ],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _layout(page: Path) -> dict[str, dict[str, float] | None]:
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--virtual-time-budget=3000", "--dump-dom", probe.as_uri()).stdout
    match = re.search(r"data-layout=\"([^\"]*)\"", dom)
    assert match is not None, dom[:500]
    return json.loads(match.group(1).replace("&quot;", '"'))  # type: ignore[no-any-return]


def _png_is_not_blank(path: Path) -> bool:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (WIDTH, HEIGHT)
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    pixels = zlib.decompress(idat)
    return len(set(pixels[: len(pixels) // 2])) > 16  # text and colours, not one flat fill


def _shoot(tmp_path: Path, name: str, html: str) -> tuple[Path, dict[str, dict[str, float] | None]]:
    page = tmp_path / f"{name}.html"
    page.write_text(html, encoding="utf-8")
    shot = tmp_path / f"{name}.png"
    _chromium(f"--screenshot={shot}", page.as_uri())
    assert shot.exists()
    assert _png_is_not_blank(shot)
    keep = os.environ.get("REPORT_SHOTS_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot, _layout(page)


def _on_first_screen(box: dict[str, float] | None) -> bool:
    return box is not None and box["top"] >= 0 and box["bottom"] <= HEIGHT


def test_failing_run_shows_ceiling_bar_and_not_passing_list_first(tmp_path: Path) -> None:
    report = report_of(
        [
            check("gate.schedule.civil_time", CheckOutcome.FAILED, detail="fold picked later"),
            check("gate.schedule.calendar_values", CheckOutcome.ERROR, detail="not covered"),
        ],
        every_facet_passes=False,
        bar=Requirements(ceiling=9, complete=[11]),
    )
    html = render_html(report)
    assert "<script" not in html
    assert not re.search(r"(src|href)=['\"]?https?:", html)  # self-contained
    _, layout = _shoot(tmp_path, "failing-run", html)
    for part in ("ceiling", "bar", "milestones", "heading", "first"):
        assert _on_first_screen(layout[part]), (part, layout)
    assert layout["passing"] is None or layout["passing"]["top"] > layout["first"]["top"]  # type: ignore[index]
    assert "NOT MET" in html
    first_row = html[html.index("<tr class='np'") :]
    assert "gate.schedule.civil_time" in first_row[:600]  # FAIL sorts first


def test_passing_run_says_every_gate_passes_on_the_first_screen(tmp_path: Path) -> None:
    report = report_of([], every_facet_passes=True, bar=Requirements(ceiling=9, complete=[11]))
    html = render_html(report)
    _, layout = _shoot(tmp_path, "passing-run", html)
    for part in ("ceiling", "bar", "heading"):
        assert _on_first_screen(layout[part]), (part, layout)
    assert layout["first"] is None
    assert _on_first_screen(layout["passing"])
    assert "Every gate passes." in html
    assert "MET" in html
