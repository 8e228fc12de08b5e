"""Suite-wide configuration.

An asyncpg connection that is never closed fails whichever later test the garbage
collector happens to free it in (``filterwarnings = error`` turns its ResourceWarning
into an error), so the failing test is rarely the one that leaked it. asyncpg names a
connection's origin in that warning only under asyncio's debug mode, which would slow
every test; instead each connection records, when it is made, the test that was running
and a short stack, and asyncpg's own warning prints them. Nothing else changes: the
warning still fails the run.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from asyncpg.connection import Connection

pytest_plugins = ["pytester"]


class _Origin:
    """Where a connection was made; formatted only if it leaks."""

    __slots__ = ("stack", "test")

    def __init__(self) -> None:
        self.test = os.environ.get("PYTEST_CURRENT_TEST", "(no test running)")
        self.stack = traceback.extract_stack(limit=32)[:-2]

    def __str__(self) -> str:
        return f"during {self.test}\n" + "".join(traceback.format_list(self.stack))


_made = Connection.__init__


def _recording_origin(self: Connection, *args: Any, **kwargs: Any) -> None:
    _made(self, *args, **kwargs)
    if self._source_traceback is None:  # asyncio debug mode already records one
        self._source_traceback = _Origin()


Connection.__init__ = _recording_origin  # type: ignore[method-assign]
