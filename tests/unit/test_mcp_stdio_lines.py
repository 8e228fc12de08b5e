"""The MCP stdio transport's line reader: lines split on newlines across reads, one
over the message limit dropped unread (and the next line still read)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

import pytest

from scheduling.mcp.edge import MAX_BODY_BYTES
from scheduling.mcp.stdio import MAX_LINE_BYTES, _lines


async def read_all(data: bytes) -> list[bytes]:
    """The lines the reader hands over for ``data`` written to a pipe in pieces."""
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as sink:
            for start in range(0, len(data), 50_000):  # pieces that split lines
                sink.write(data[start : start + 50_000])
                sink.flush()

    threading.Thread(target=feed, daemon=True).start()
    with os.fdopen(read_fd, "rb") as source:
        queue = _lines(source)
        lines: list[bytes] = []
        while (line := await asyncio.wait_for(queue.get(), 30)) is not None:
            lines.append(line)
    return lines


def test_one_message_limit_on_both_transports() -> None:
    assert MAX_LINE_BYTES == MAX_BODY_BYTES == 1024 * 1024


async def test_lines_across_reads_and_an_unterminated_last_one() -> None:
    long = b"y" * 120_000  # spans several reads
    assert await read_all(b"a\n" + long + b"\nb\n\nc") == [b"a", long, b"b", b"", b"c"]


async def test_a_line_over_the_limit_is_dropped_and_the_next_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    at_limit = b"z" * MAX_LINE_BYTES
    over = b"x" * (3 * MAX_LINE_BYTES)
    with caplog.at_level(logging.WARNING, logger="scheduling.mcp.stdio"):
        lines = await read_all(b"first\n" + over + b"\n" + at_limit + b"\nlast\n" + over)
    assert lines == [b"first", at_limit, b"last"]
    dropped = [r for r in caplog.records if "was dropped" in r.getMessage()]
    assert len(dropped) == 2
    assert all(b"x" * 20 not in r.getMessage().encode() for r in caplog.records)


async def test_a_line_many_times_the_limit_is_skipped_unread() -> None:
    # Skipped as it streams past, never buffered whole (the reader keeps at most one
    # limit's worth of it), and the line after it is read.
    assert await read_all(b"x" * (8 * MAX_LINE_BYTES) + b"\nok\n") == [b"ok"]
