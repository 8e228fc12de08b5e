"""The ``scheduling`` console script: preview and diagnostics."""

from __future__ import annotations

import io
import json

import pytest

from scheduling.cli import COMMANDS, main

NY_DAILY = '{"kind":"DAILY","local_time":"02:30","timezone":"America/New_York"}'


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out)
    return status, out.getvalue()


def test_preview_explains_a_spring_forward_gap() -> None:
    status, text = run("preview", NY_DAILY, "--from", "2026-03-06T00:00:00Z", "--count", "4")
    assert status == 0
    lines = text.splitlines()
    assert (
        lines[0]
        == 'cadence: {"kind": "DAILY", "local_time": "02:30:00", "timezone": "America/New_York"}'
    )
    assert lines[4] == (
        "2026-03-08T07:00:00Z  Sun 2026-03-08 03:00:00 -04:00 (EDT, America/New_York)  "
        "gap->first valid (requested 02:30:00)"
    )
    assert lines[5].startswith("2026-03-09T06:30:00Z  Mon 2026-03-09 02:30:00 -04:00")
    assert len(lines) == 6


def test_preview_json_lines_mark_the_fold() -> None:
    payload = '{"kind":"DAILY","local_time":"01:30","timezone":"America/New_York"}'
    status, text = run(
        "preview", payload, "--from", "2026-10-31T12:00:00Z", "--count", "2", "--json"
    )
    assert status == 0
    rows = [json.loads(line) for line in text.splitlines()]
    assert rows[0]["instant"] == "2026-11-01T05:30:00Z"
    assert rows[0]["resolution"] == "fold->earlier"
    assert rows[0]["utc_offset_seconds"] == -4 * 3600
    assert rows[1]["instant"] == "2026-11-02T06:30:00Z"
    assert rows[1]["resolution"] == "exact"


def test_preview_of_a_past_one_time_cadence_says_so() -> None:
    status, text = run(
        "preview", '{"kind":"ONCE","at":"2020-01-01T00:00:00Z"}', "--from", "2026-01-01T00:00:00Z"
    )
    assert status == 0
    assert text.splitlines()[-1] == "no further firings"


def test_preview_defaults_to_the_clock() -> None:
    status, text = run("preview", NY_DAILY, "--count", "1")
    assert status == 0
    assert len(text.splitlines()) == 3


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            '{"kind":"DAILY","local_time":"25:00","timezone":"UTC"}',
            "schedule.cadence.invalid_local_time",
        ),
        ("not json", "not JSON"),
        ("[" * 5000 + "]" * 5000, "nests too deeply"),
        ('{"kind":"HOURLY"}', "schedule.cadence.unknown_kind"),
    ],
)
def test_preview_rejects_bad_input_with_its_code(
    payload: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, text = run("preview", payload)
    assert status == 2
    assert text == ""
    assert message in capsys.readouterr().err


def test_preview_rejects_a_naive_from() -> None:
    with pytest.raises(SystemExit) as exit_:
        run("preview", NY_DAILY, "--from", "2026-03-06T00:00:00")
    assert exit_.value.code == 2


def test_diagnostics_reports_the_versions() -> None:
    import tzdata

    status, text = run("diagnostics", "--json")
    assert status == 0
    facts = json.loads(text)
    assert facts["tzdata"] == tzdata.IANA_VERSION
    assert facts["scheduling"] == "0.1.0"
    assert set(COMMANDS) >= {"preview", "diagnostics"}
