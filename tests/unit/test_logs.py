"""Process logs (issue 25 item 3, ADR 2271): the line's UTC timestamp with its zone,
role and instance id, the JSON form, redaction, and repeated failures written once with
a count. Records are built with an explicit ``created`` so windows need no clock; the
test of the test writes the same storm through a plain handler and counts a traceback
per attempt."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, cast

import pytest

from scheduling import instance
from scheduling.cli import edge
from scheduling.config import ConfigurationError, ProcessSettings
from scheduling.domain.secrets import SecretFinding, SecretScanner
from scheduling.instance import ProcessIdentity
from scheduling.logs import (
    JsonFormatter,
    ProcessLogHandler,
    Redactor,
    RepeatFilter,
    TextFormatter,
    configure,
    safe_fields,
    utc_timestamp,
)

T0 = datetime(2026, 12, 2, 8, 1, 2, 345000, tzinfo=UTC)
WHO = ProcessIdentity("scheduler", "node-1")
TOKEN = "sch_0123456789abcdef_" + "Zq8" * 15
LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    r" [a-z-]+@[A-Za-z0-9._-]+ [\w.]+: "
)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def at(seconds: float) -> float:
    return (T0 + timedelta(seconds=seconds)).timestamp()


def stamp(seconds: float) -> str:
    return utc_timestamp(at(seconds))


def failure(exc: BaseException | None = None) -> ExcInfo:
    try:
        raise exc or ConnectionRefusedError("connect call failed ('127.0.0.1', 5432)")
    except BaseException:
        info = sys.exc_info()
    assert info[0] is not None
    assert info[1] is not None
    return (info[0], info[1], info[2])


def record(
    seconds: float,
    msg: str = "run worker %s: claim failed",
    *args: object,
    name: str = "scheduling.runtime.worker",
    level: int = logging.WARNING,
    exc: ExcInfo | None = None,
    **extra: object,
) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, msg, args or None, exc)
    made.created = at(seconds)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def handler(kind: str = "text", window: float = 60.0) -> tuple[ProcessLogHandler, io.StringIO]:
    out = io.StringIO()
    made = ProcessLogHandler(
        out,
        kind="json" if kind == "json" else "text",
        repeats=RepeatFilter(window),
        identity=lambda: WHO,
    )
    return made, out


# ------------------------------------------------------------------ the line


def test_a_timestamp_is_utc_iso_8601_with_its_zone() -> None:
    assert utc_timestamp(T0.timestamp()) == "2026-12-02T08:01:02.345Z"
    # Whatever the local zone: a +05:30 instant comes out in UTC.
    local = datetime(2026, 12, 2, 13, 31, 2, 345000, tzinfo=UTC).astimezone()
    assert utc_timestamp(local.timestamp()) == "2026-12-02T13:31:02.345Z"


def test_a_text_line_carries_time_level_role_instance_logger_and_fault() -> None:
    h, out = handler()
    h.handle(record(0, "scheduler started (%d slots)", 2, level=logging.INFO))
    h.handle(record(1, "claim failed", fault="57P03"))
    lines = out.getvalue().splitlines()
    assert lines == [
        "2026-12-02T08:01:02.345Z INFO scheduler@node-1 scheduling.runtime.worker:"
        " scheduler started (2 slots)",
        "2026-12-02T08:01:03.345Z WARNING scheduler@node-1 scheduling.runtime.worker:"
        " claim failed [fault=57P03]",
    ]
    assert all(LINE.match(line) for line in lines)


def test_a_json_line_holds_the_named_fields_only() -> None:
    h, out = handler("json")
    h.handle(
        record(
            0,
            "claim failed for %s",
            "slot-1",
            exc=failure(),
            fault="connect_refused",
            password="hunter2",
            args_leak="x",
        )
    )
    body = json.loads(out.getvalue())
    assert set(body) == {
        "time",
        "level",
        "role",
        "instance",
        "logger",
        "message",
        "fault",
        "exception",
    }
    assert body["time"] == "2026-12-02T08:01:02.345Z"
    assert (body["level"], body["role"], body["instance"]) == ("WARNING", "scheduler", "node-1")
    assert body["message"] == "claim failed for slot-1"
    assert body["exception"].startswith("Traceback (most recent call last):")
    assert "ConnectionRefusedError" in body["exception"]
    assert "hunter2" not in out.getvalue()


@pytest.mark.parametrize("kind", ["text", "json"])
def test_no_secret_reaches_a_line(kind: str) -> None:
    h, out = handler(kind)
    h.handle(
        record(
            0,
            "rejected %s from %s",
            TOKEN,
            "postgresql://a:hunter2secret@db/x",
            level=logging.ERROR,
            exc=failure(PermissionError(f"Authorization: Bearer {TOKEN}")),
        )
    )
    # The access log's own line (route template, request id, token id) is kept as is.
    access = "POST /v1/schedules 201 3.2ms request_id=4b9f0c2e token_id=tok_0123456789abcdef"
    h.handle(record(1, "%s", access, name="scheduling.http.access", level=logging.INFO))
    text = out.getvalue()
    assert TOKEN not in text
    assert TOKEN[25:] not in text
    assert "hunter2secret" not in text
    assert "[redacted schedule_api_token]" in text
    assert "[redacted password_in_url]" in text
    assert access in text
    assert "PermissionError: Authorization: Bearer [redacted bearer_token]" in text


@pytest.mark.parametrize("kind", ["text", "json"])
def test_an_extra_field_is_scanned_even_on_a_safe_record(kind: str) -> None:
    """``code`` and ``fault`` come from callers' own values: scanned in both forms, and a
    record marked safe (its message built from known-safe fields) is no exception."""
    h, out = handler(kind)
    dsn = "postgresql://a:hunter3secret@db/x"
    h.handle(record(0, "claim failed", fault=dsn))
    h.handle(record(1, "request %s done", "4b9f0c2e", code=dsn, **safe_fields()))
    text = out.getvalue()
    assert "hunter3secret" not in text
    assert text.count("[redacted password_in_url]") == 2


class Findings:
    """A scanner that reports fixed spans (the redactor's merging, apart from what
    today's detectors happen to find)."""

    def __init__(self, *spans: tuple[str, int, int]) -> None:
        self.spans = spans

    def scan(self, text: str) -> list[SecretFinding]:
        return [SecretFinding(kind, start, end) for kind, start, end in self.spans]


def test_overlapping_findings_are_redacted_as_one_span() -> None:
    """Two readings whose spans overlap, the later one reaching further: the whole
    union is redacted once, under the first one's kind."""
    text = "a=0123456789 tail"
    scanner = Findings(("jwt", 2, 8), ("bearer_token", 5, 12))
    redacted = Redactor(cast(SecretScanner, scanner))(text)
    assert redacted == "a=[redacted jwt] tail"


# ------------------------------------------------------------------ repeats


def storm(h: logging.Handler, seconds: range, **extra: Any) -> None:
    for s in seconds:
        h.handle(record(s, "run worker %s: claim failed", f"slot-{s % 4}", exc=failure(), **extra))


def test_a_storm_is_one_traceback_then_a_count_per_window() -> None:
    h, out = handler()
    storm(h, range(0, 150), fault="57P03")  # one failed claim a second for 150 s
    h.handle(record(200, "recovered", level=logging.INFO))
    h.close()
    text = out.getvalue()
    assert text.count("Traceback (most recent call last)") == 1
    summaries = re.findall(r"^(\S+) .*\[repeated (\d+) times from (\S+) to (\S+)\]$", text, re.M)
    # 0 passes in full; 1-59, 60-119, 120-149 are counted, one line per window, each
    # stamped when the next record revealed that its window had passed.
    assert summaries == [
        (stamp(60), "59", stamp(1), stamp(59)),
        (stamp(120), "60", stamp(60), stamp(119)),
        (stamp(200), "30", stamp(120), stamp(149)),
    ]
    assert sum(int(n) for _, n, _, _ in summaries) + 1 == 150
    logged = [m for line in text.splitlines() if (m := LINE.match(line))]
    assert len(logged) == 1 + 3 + 1
    assert [m.group(0)[:24] for m in logged] == sorted(m.group(0)[:24] for m in logged)
    assert text.splitlines()[-1].endswith("recovered")


def test_of_the_test_a_plain_handler_writes_a_traceback_per_attempt() -> None:
    out = io.StringIO()
    plain = logging.StreamHandler(out)
    storm(plain, range(0, 150))
    assert out.getvalue().count("Traceback (most recent call last)") == 150


def test_after_a_quiet_window_the_next_failure_is_written_in_full() -> None:
    h, out = handler()
    storm(h, range(0, 3))
    storm(h, range(300, 302))
    h.close()
    text = out.getvalue()
    assert text.count("Traceback (most recent call last)") == 2
    assert re.findall(r"repeated (\d+ times?)", text) == ["2 times", "1 time"]


def test_the_pending_count_is_written_at_close() -> None:
    h, out = handler()
    storm(h, range(0, 5))
    assert "repeated" not in out.getvalue()
    h.close()
    assert re.findall(r"repeated (\d+) times from (\S+) to (\S+)\]", out.getvalue()) == [
        ("4", stamp(1), stamp(4))
    ]


@pytest.mark.parametrize(
    "other",
    [
        {"msg": "schedule scan failed"},
        {"name": "scheduling.service.schedule_worker"},
        {"fault": "53300"},
        {"level": logging.ERROR},
        {"exc": None},
    ],
)
def test_different_failures_are_not_collapsed(other: dict[str, Any]) -> None:
    h, out = handler()
    base: dict[str, Any] = {"msg": "claim failed", "fault": "57P03", "exc": failure()}
    h.handle(record(0, **base))
    h.handle(record(1, **{**base, **other}))
    assert len([line for line in out.getvalue().splitlines() if LINE.match(line)]) == 2


def test_info_lines_are_never_collapsed() -> None:
    h, out = handler()
    for s in range(10):
        h.handle(record(s, "%s %s %d", "GET", "/v1/schedules", 200, level=logging.INFO))
    assert len(out.getvalue().splitlines()) == 10


def test_the_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RepeatFilter(0)


# ------------------------------------------------------------------ configuration


def test_configure_replaces_its_own_handler_and_keeps_others() -> None:
    root = logging.Logger("test-root")
    other = logging.StreamHandler(io.StringIO())
    root.addHandler(other)
    first = configure(io.StringIO(), root=root)
    out = io.StringIO()
    second = configure(out, kind="json", level="WARNING", root=root)
    assert root.handlers == [other, second]
    assert isinstance(second.formatter, JsonFormatter)
    assert isinstance(first.formatter, TextFormatter)
    assert root.level == logging.WARNING


def test_process_settings_parse_and_refuse() -> None:
    chosen = ProcessSettings.from_env(
        {
            "AGENT_SCHEDULE_LOG_FORMAT": "JSON",
            "AGENT_SCHEDULE_LOG_LEVEL": "debug",
            "AGENT_SCHEDULE_INSTANCE_ID": "pod-7f9c",
            "AGENT_SCHEDULE_LOG_REPEAT_WINDOW_SECONDS": "5",
        }
    )
    assert (chosen.log_format, chosen.log_level, chosen.instance_id) == (
        "json",
        "DEBUG",
        "pod-7f9c",
    )
    assert chosen.log_repeat_window_seconds == 5.0
    with pytest.raises(ConfigurationError) as refused:
        ProcessSettings.from_env(
            {
                "AGENT_SCHEDULE_LOG_FORMAT": "xml",
                "AGENT_SCHEDULE_INSTANCE_ID": "a b",
                "AGENT_SCHEDULE_LOG_LEVEL": "loud",
                "AGENT_SCHEDULE_LOG_REPEAT_WINDOW_SECONDS": "0",
            }
        )
    problems = refused.value.details["problems"]
    assert [p.split(": ")[:2] for p in problems] == [
        ["schedule.config.unparseable", f"AGENT_SCHEDULE_{name}"]
        for name in ("INSTANCE_ID", "LOG_FORMAT", "LOG_LEVEL", "LOG_REPEAT_WINDOW_SECONDS")
    ]


def test_the_edge_declares_the_identity_and_refuses_a_bad_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, instance._declared)
    try:
        monkeypatch.setenv("AGENT_SCHEDULE_INSTANCE_ID", "edge-1")
        monkeypatch.setattr(sys, "argv", ["/venv/bin/scheduling", "run-worker", "--class", "async"])
        edge.configure_logging()
        assert instance.current() == ProcessIdentity("run-worker", "edge-1")
        assert sum(isinstance(h, ProcessLogHandler) for h in root.handlers) == 1
        monkeypatch.setenv("AGENT_SCHEDULE_LOG_FORMAT", "xml")
        with pytest.raises(SystemExit) as stopped:
            edge.configure_logging("scheduler")
        assert stopped.value.code == 1
        assert "PROBLEM: schedule.config.unparseable: AGENT_SCHEDULE_LOG_FORMAT" in (
            capsys.readouterr().err
        )
    finally:
        for h in [h for h in root.handlers if h not in saved[0]]:
            root.removeHandler(h)
        root.setLevel(saved[1])
        instance._declared = saved[2]


def test_the_role_is_the_subcommand_else_the_program() -> None:
    name = edge._command_name
    assert name(["/venv/bin/scheduling", "scheduler"]) == "scheduler"
    assert name(["/venv/bin/scheduling", "--verbose", "serve", "--port", "1"]) == "serve"
    assert name(["/src/simulation/devstack.py"]) == "devstack"
    assert name(["-c"]) == "process"
    assert name([]) == "process"


def test_a_json_summary_carries_the_count_and_its_span() -> None:
    h, out = handler("json")
    storm(h, range(0, 3), fault="53300")
    h.close()
    first, summary = (json.loads(line) for line in out.getvalue().splitlines())
    assert "exception" in first
    assert "repeated" not in first
    assert "exception" not in summary
    assert summary["fault"] == "53300"
    assert (summary["repeated"], summary["repeated_since"], summary["repeated_until"]) == (
        2,
        stamp(1),
        stamp(2),
    )


def test_threads_share_one_count() -> None:
    h, out = handler()

    def burst() -> None:
        for _ in range(500):
            h.handle(record(0.5, "claim failed", fault="53300"))

    threads = [threading.Thread(target=burst) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    h.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[1].endswith(
        "[repeated 1999 times from 2026-12-02T08:01:02.845Z to 2026-12-02T08:01:02.845Z]"
    )
