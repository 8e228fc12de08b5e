"""Process logs an operator can attribute (issue 25 item 3, ADR 2271).

Every line carries a UTC ISO-8601 timestamp with its zone (``2026-12-02T08:01:02.345Z``),
the level, the process's role and instance id (``scheduler@db-host-4242``, the same
instance id its PostgreSQL connections carry as ``application_name``), the logger and the
message; ``AGENT_SCHEDULE_LOG_FORMAT=json`` writes one JSON object per line instead.

A timestamp is the record's own creation time (``record.created``, which ``logging``
stamps): formatting it reads no clock. Repeated failures are written once: the
``RepeatFilter`` lets the first WARNING-or-worse record of a kind (same logger, level,
message template, ``code``/``fault`` and exception type) through in full, suppresses
the identical ones that follow within its window, and then writes one summary line
"repeated N times since T" (without a traceback) per window while they keep coming.
Windows are measured on ``record.created`` too.

No secret reaches a line: callers already log no token, body, SQL or bound value
(``scheduling.http.middleware`` logs a route template and a token id only); as a second
line of defence every formatted message and traceback passes through the schedule
secret scanner and what it finds is replaced by ``[redacted <kind>]``. The one exception
is a record marked ``SAFE_FIELDS`` (``extra=safe_fields()``): its caller built the message
only from values that cannot hold client text (the access log: a method from a fixed set,
a route template, a status, a duration, a generated request id, a token id), so the scan,
a quarter of a millisecond per line, is skipped; a traceback or extra on it is still
scanned (ADR 2300).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Literal

from scheduling.domain.secrets import DETECTOR_KINDS, SecretFinding, SecretScanner
from scheduling.domain.secrets.detectors import FALLBACK_KINDS
from scheduling.instance import ProcessIdentity, current

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
REPEAT_WINDOW_SECONDS = 60.0

_KEYED_EXTRAS = ("code", "fault")
"""Attributes a record may carry (``extra=``) that are part of its kind and its line."""

SAFE_FIELDS = "safe_fields"
"""The record attribute saying its message holds no client text (see the module doc)."""
_SAFE_EXTRA = {SAFE_FIELDS: True}


def safe_fields() -> dict[str, bool]:
    """``extra=`` for a message built only from known-safe fields: written unscanned."""
    return _SAFE_EXTRA


def _is_safe(record: logging.LogRecord) -> bool:
    return getattr(record, SAFE_FIELDS, False) is True


def _iso_timestamp(created: float) -> str:
    moment = datetime.fromtimestamp(created, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_second: tuple[int, str] = (-1, "")
"""The last whole second ``utc_timestamp`` wrote and its ``YYYY-MM-DDTHH:MM:SS``
(one tuple, replaced whole: safe for the threads that log)."""


def utc_timestamp(created: float) -> str:
    """``record.created`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ``.

    Every line formats one (the access log: one per request), and building a
    ``datetime`` and its ISO text was 4.5 µs of it (ADR 2660); lines mostly share their
    second, so the date and time of day are formatted once per second and only the
    milliseconds per line. The rounding is ``datetime.fromtimestamp``'s (to the
    microsecond, half to even, a carry into the next second), then truncated to the
    millisecond as ``isoformat`` does, so the text is the same character for character."""
    global _second
    if not created >= 0:  # before 1970 (or NaN): never a record's time; the plain path
        return _iso_timestamp(created)
    fraction, whole = math.modf(created)
    seconds, micros = int(whole), round(fraction * 1e6)
    if micros >= 1_000_000:
        seconds, micros = seconds + 1, micros - 1_000_000
    cached_second, prefix = _second
    if cached_second != seconds:
        prefix = datetime.fromtimestamp(seconds, tz=UTC).isoformat()[:19]
        _second = (seconds, prefix)
    return f"{prefix}.{micros // 1000:03d}Z"


PRODUCT_TOKEN_KIND = "schedule_api_token"  # noqa: S105 (a kind, not a token)
_PRODUCT_TOKEN = re.compile(r"sch_[0-9a-f]{16}_[A-Za-z0-9_-]{20,}")
"""The product's own bearer token (``sch_<token id hex>_<secret>``, adapters/token_file),
redacted wherever it appears, with or without a keyword before it."""
_TOKEN_ID = re.compile(r"tok_[0-9a-f]{16}")
"""A token id (``tok_<hex>``) names a token without revealing it: the access log writes
it on purpose, so it is never redacted."""

REDACTED_KINDS = DETECTOR_KINDS - FALLBACK_KINDS
"""What a log line is redacted for: every kind the scanner recognizes by a keyword, a
structure or a vendor's shape. The kinds recognized by entropy alone are left out: in a
traceback they match exception and module names (``ConnectionRefusedError``)."""


class Redactor:
    """Replaces what the secret scanner finds in a text (of ``kinds``) by
    ``[redacted <kind>]``."""

    def __init__(
        self, scanner: SecretScanner | None = None, kinds: frozenset[str] = REDACTED_KINDS
    ) -> None:
        self._scanner = scanner or SecretScanner()
        self._kinds = kinds

    def __call__(self, text: str) -> str:
        if not text:
            return text
        spans: list[tuple[int, int, str]] = []
        found = [
            f
            for f in self._scanner.scan(text)
            if f.kind in self._kinds and not _TOKEN_ID.fullmatch(text[f.start : f.end])
        ]
        found += [
            SecretFinding(kind=PRODUCT_TOKEN_KIND, start=m.start(), end=m.end())
            for m in _PRODUCT_TOKEN.finditer(text)
        ]
        # At one start the value as written wins over a decoded or re-joined reading
        # (a token "unwrapped" across a line break would swallow the next line's start).
        for finding in sorted(found, key=lambda f: (f.start, bool(f.transforms), -f.end)):
            start, end = max(0, finding.start), min(len(text), finding.end)
            if spans and start == spans[-1][0]:
                continue
            if spans and start < spans[-1][1]:  # overlapping: widen the previous one
                previous = spans[-1]
                spans[-1] = (previous[0], max(previous[1], end), previous[2])
            elif start < end:
                spans.append((start, end, finding.kind))
        for start, end, kind in reversed(spans):
            text = f"{text[:start]}[redacted {kind}]{text[end:]}"
        return text


# ------------------------------------------------------------------ identity


class IdentityFilter(logging.Filter):
    """Stamps ``role`` and ``instance`` on every record (from the process identity)."""

    def __init__(self, identity: Callable[[], ProcessIdentity] = current) -> None:
        super().__init__()
        self._identity = identity

    def filter(self, record: logging.LogRecord) -> bool:
        who = self._identity()
        record.role = who.role
        record.instance = who.instance_id
        return True


# ------------------------------------------------------------------ formatters


def _extras(record: logging.LogRecord) -> dict[str, str]:
    return {
        key: str(value)
        for key in _KEYED_EXTRAS
        if (value := getattr(record, key, None)) not in (None, "")
    }


def _repeat(record: logging.LogRecord) -> tuple[int, float, float] | None:
    """(count, first, last) of a summary record; ``None`` for any other."""
    count = getattr(record, "repeated", None)
    since = getattr(record, "repeated_since", None)
    until = getattr(record, "repeated_until", None)
    if isinstance(count, int) and isinstance(since, float) and isinstance(until, float):
        return count, since, until
    return None


def _times(count: int) -> str:
    return "1 time" if count == 1 else f"{count} times"


class TextFormatter(logging.Formatter):
    """``<UTC time> <LEVEL> <role>@<instance> <logger>: <message> [fault=..]`` and, for
    a summary, ``[repeated N times from <UTC time> to <UTC time>]``; then the
    traceback, if any."""

    def __init__(self, redact: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self._redact = redact or Redactor()

    def format(self, record: logging.LogRecord) -> str:
        role = getattr(record, "role", None) or current().role
        who = getattr(record, "instance", None) or current().instance_id
        line = (
            f"{utc_timestamp(record.created)} {record.levelname} {role}@{who}"
            f" {record.name}: {record.getMessage()}"
        )
        extras = _extras(record)  # read once: the line and the scan decision share it
        for key, value in extras.items():
            line += f" [{key}={value}]"
        repeat = _repeat(record)
        if repeat is not None:
            line += (
                f" [repeated {_times(repeat[0])} from {utc_timestamp(repeat[1])}"
                f" to {utc_timestamp(repeat[2])}]"
            )
        trace = self.trace(record)
        if trace:
            return self._redact(f"{line}\n{trace}")
        # Extras come from callers' own values and could hold anything: scanned.
        return line if _is_safe(record) and not extras else self._redact(line)

    def trace(self, record: logging.LogRecord) -> str:
        parts: list[str] = []
        if record.exc_info:
            parts.append(self.formatException(record.exc_info))
        elif record.exc_text:
            parts.append(record.exc_text)
        if record.stack_info:
            parts.append(self.formatStack(record.stack_info))
        return "\n".join(parts)


class JsonFormatter(TextFormatter):
    """One JSON object per line: ``time``, ``level``, ``role``, ``instance``, ``logger``,
    ``message``, and when present ``code``, ``fault``, ``repeated``,
    ``repeated_since``, ``repeated_until`` and ``exception`` (no other record attribute
    is written)."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": utc_timestamp(record.created),
            "level": record.levelname,
            "role": getattr(record, "role", None) or current().role,
            "instance": getattr(record, "instance", None) or current().instance_id,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if not _is_safe(record):
            body["message"] = self._redact(body["message"])
        body.update({key: self._redact(value) for key, value in _extras(record).items()})
        repeat = _repeat(record)
        if repeat is not None:
            body["repeated"] = repeat[0]
            body["repeated_since"] = utc_timestamp(repeat[1])
            body["repeated_until"] = utc_timestamp(repeat[2])
        trace = self.trace(record)
        if trace:
            body["exception"] = self._redact(trace)
        return json.dumps(body, ensure_ascii=False)


def formatter(kind: LogFormat, redact: Callable[[str], str] | None = None) -> TextFormatter:
    return JsonFormatter(redact) if kind == "json" else TextFormatter(redact)


# ------------------------------------------------------------------ repeats


Kind = tuple[str, int, str, tuple[str, ...], str]


def kind_of(record: logging.LogRecord) -> Kind:
    """What makes two records "the same failure": logger, level, message template, the
    ``code``/``fault`` they carry and the exception's type (not the arguments)."""
    extras = _extras(record)
    exc_type = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    return (
        record.name,
        record.levelno,
        str(record.msg),
        tuple(extras.get(key, "") for key in _KEYED_EXTRAS),
        exc_type,
    )


@dataclass
class _Window:
    ends: float
    count: int = 0
    first: float = 0.0
    last: logging.LogRecord | None = None


class RepeatFilter(logging.Filter):
    """Collapses identical WARNING-or-worse records (``kind_of``) within
    ``window_seconds`` of ``record.created``.

    The first record of a kind passes in full and opens a window; the identical ones
    inside it are suppressed and counted. When the window has passed (seen at the next
    record of any kind, or at ``close``), ``due`` yields one summary record: the last
    suppressed one without its traceback, stamped with the time of the record that
    revealed it (so the log stays in time order), with ``repeated`` (the count),
    ``repeated_since`` and ``repeated_until`` (the first and the last suppressed
    one's time). While they keep coming, each
    following window is counted the same way (no second traceback); a window with none
    ends the storm, and the next occurrence passes in full again. Records below
    ``level`` (the access log, progress) are never collapsed.
    """

    def __init__(
        self, window_seconds: float = REPEAT_WINDOW_SECONDS, *, level: int = logging.WARNING
    ) -> None:
        super().__init__()
        if not window_seconds > 0:
            raise ValueError("the repeat window must be positive")
        self.window_seconds = window_seconds
        self.level = level
        self._windows: dict[Kind, _Window] = {}
        self._latest = 0.0
        self.suppressed = 0
        """How many records were suppressed (and counted in a summary) so far."""

    def filter(self, record: logging.LogRecord) -> bool:
        self._latest = max(self._latest, record.created)
        if record.levelno < self.level or _repeat(record) is not None:
            return True
        key = kind_of(record)
        window = self._windows.get(key)
        if window is not None and record.created >= window.ends and window.count == 0:
            window = None  # the storm ended (``due`` was not asked in between)
        if window is None:
            self._windows[key] = _Window(ends=record.created + self.window_seconds)
            return True
        if window.count == 0:
            window.first = record.created
        window.count += 1
        window.last = record
        self.suppressed += 1
        return False

    def due(self, now: float) -> list[logging.LogRecord]:
        """Summaries of the windows that have passed by ``now`` (a record's time)."""
        out: list[logging.LogRecord] = []
        for key, window in list(self._windows.items()):
            if now < window.ends:
                continue
            if window.count == 0:
                del self._windows[key]
                continue
            out.append(self._summary(window, now))
            # Keep counting the storm in the next window (no second traceback), unless
            # that one has passed too, with nothing in it: the storm is over.
            window.ends += self.window_seconds
            if window.ends <= now:
                del self._windows[key]
        return out

    def pending(self) -> list[logging.LogRecord]:
        """Summaries of every window still counting (at exit)."""
        out = [self._summary(w, self._latest) for w in self._windows.values() if w.count]
        self._windows.clear()
        return out

    @staticmethod
    def _summary(window: _Window, now: float) -> logging.LogRecord:
        last = window.last
        assert last is not None
        summary = logging.makeLogRecord(last.__dict__)
        summary.created = max(now, last.created)
        summary.msecs = (summary.created - int(summary.created)) * 1000
        summary.exc_info = None
        summary.exc_text = None
        summary.stack_info = None
        summary.repeated = window.count
        summary.repeated_since = window.first
        summary.repeated_until = last.created
        window.count = 0
        window.last = None
        return summary


# ------------------------------------------------------------------ the handler


class ProcessLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The process's one log handler: identity on every record, repeats collapsed,
    the summaries of passed windows written before the record that reveals them."""

    def __init__(
        self,
        stream: IO[str],
        *,
        kind: LogFormat = "text",
        repeats: RepeatFilter | None = None,
        identity: Callable[[], ProcessIdentity] = current,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(stream)
        self.identity = IdentityFilter(identity)
        self.repeats = repeats or RepeatFilter()
        self.setFormatter(formatter(kind, redact))

    def handle(self, record: logging.LogRecord) -> bool:
        assert self.lock is not None  # created by Handler.__init__ (an RLock)
        with self.lock:  # the repeat windows are shared by every thread that logs
            self.identity.filter(record)
            for summary in self.repeats.due(record.created):
                super().handle(summary)
            if not self.repeats.filter(record):
                return False
            return bool(super().handle(record))

    def close(self) -> None:
        assert self.lock is not None
        with self.lock:
            for summary in self.repeats.pending():
                self.identity.filter(summary)
                super().handle(summary)
        super().close()


def configure(
    stream: IO[str],
    *,
    kind: LogFormat = "text",
    level: str = "INFO",
    repeat_window_seconds: float = REPEAT_WINDOW_SECONDS,
    root: logging.Logger | None = None,
) -> ProcessLogHandler:
    """Install the process's handler on ``root`` (default: the root logger), replacing
    one installed before; other handlers (a test's capture) are left alone."""
    target = root or logging.getLogger()
    for old in [h for h in target.handlers if isinstance(h, ProcessLogHandler)]:
        target.removeHandler(old)
        old.close()
    handler = ProcessLogHandler(stream, kind=kind, repeats=RepeatFilter(repeat_window_seconds))
    target.addHandler(handler)
    target.setLevel(level)
    return handler
