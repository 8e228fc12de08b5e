"""gate.schedule.no_credentials, the log path: overlapping findings are redacted whole.

The scanner can report two findings of one credential whose spans overlap without one
holding the other. A key pasted from a wrapped terminal, ``OPENAI_API_KEY=sk-<head>``
then a line break and ``<tail>``: the keyword assignment covers the value up to the
break, the vendor shape (seen in the view that rejoins the lines) starts at ``sk-`` and
runs to the tail's end. A log line must lose the union of both. A redactor that keeps
the first span and skips an overlapping later one writes the tail
(``logs.overlap_skipped``); one that replaces both in turn garbles the line around them
(``logs.overlap_replaced_in_turn``). Both formats (text and JSON), the message as
callers write it (``%s`` arguments), over a seeded draw of wrap positions.
"""

from __future__ import annotations

import json
import logging
import random
import string

import pytest

from scheduling.logs import LogFormat, formatter

pytestmark = [pytest.mark.gate("gate.schedule.no_credentials")]

SEED = 20261207
ALPHABET = string.ascii_letters + string.digits


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("scheduling.probe", logging.WARNING, __file__, 1, message, args, None)


def wrapped_keys(count: int) -> list[tuple[str, str]]:
    """``count`` (head, tail) pairs: a 48-character ``sk-`` key cut 16 to 28 characters in."""
    rng = random.Random(SEED)
    keys = []
    for _ in range(count):
        key = "sk-" + "".join(rng.choice(ALPHABET) for _ in range(48))
        cut = rng.randint(19, 31)
        keys.append((key[:cut], key[cut:]))
    return keys


@pytest.mark.parametrize("kind", ["text", "json"])
def test_overlapping_findings_are_redacted_whole(kind: LogFormat) -> None:
    for head, tail in wrapped_keys(8):
        value = f"OPENAI_API_KEY={head}\n{tail}"
        line = formatter(kind).format(record("translate failed with %s; retry at noon", value))
        message = json.loads(line)["message"] if kind == "json" else line
        where = f"seed {SEED}, {kind}: {message!r}"
        assert "[redacted " in message, where
        assert head[3:] not in message, where
        assert tail not in message, where
        # Only the credential goes: the words around it stay as written.
        assert "translate failed with " in message, where
        assert message.rstrip().endswith("; retry at noon"), where
