"""Work measured by the harness, not reported by the product.

``metered(fn, ...)`` runs ``fn`` under a ``sys.settrace`` tracer that counts every
Python line executed (and every function entered) in the product's own code, the
``scheduling`` package, while ``fn`` runs. A calculator that loops once per missed
date executes at least one product line per iteration whatever counter it keeps or
skips, so boundedness checks compare these counts, never the product's
``OperationCounter`` alone.

Work in C (``datetime`` arithmetic, ``zoneinfo``) is not seen line by line, but a
product loop that drives it is: the loop itself is product Python. Library frames
(SQLAlchemy, asyncpg) are not traced line by line, so metering a whole scan stays
cheap and its count does not depend on driver internals.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import scheduling

T = TypeVar("T")

PRODUCT_ROOT = str(Path(scheduling.__file__).resolve().parent)


@dataclass
class Work:
    """Product lines executed and product functions entered while metered."""

    lines: int = 0
    calls: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"lines": self.lines, "calls": self.calls}


class _Tracer:
    def __init__(self, work: Work, roots: tuple[str, ...]) -> None:
        self.work = work
        self.roots = roots
        self._product: dict[str, bool] = {}

    def _is_product(self, filename: str) -> bool:
        known = self._product.get(filename)
        if known is None:
            try:
                resolved = str(Path(filename).resolve())
            except (OSError, ValueError):
                resolved = filename
            known = resolved.startswith(self.roots)
            self._product[filename] = known
        return known

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and self._is_product(frame.f_code.co_filename):
            self.work.calls += 1
            return self.local_trace
        return None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.work.lines += 1
        return self.local_trace


def metered(
    fn: Callable[..., T], *args: Any, roots: tuple[str, ...] = (), **kwargs: Any
) -> tuple[T, Work]:
    """``fn(*args, **kwargs)`` and the product work it did (on this thread)."""
    work = Work()
    tracer = _Tracer(work, roots or (PRODUCT_ROOT,))
    previous = sys.gettrace()
    sys.settrace(tracer.global_trace)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, work


async def metered_async(
    make: Callable[[], Awaitable[T]], *, roots: tuple[str, ...] = ()
) -> tuple[T, Work]:
    """Await ``make()`` with the tracer on: every product line the event loop runs
    meanwhile (on this thread) counts, so run nothing else concurrently."""
    work = Work()
    tracer = _Tracer(work, roots or (PRODUCT_ROOT,))
    previous = sys.gettrace()
    sys.settrace(tracer.global_trace)
    try:
        result = await make()
    finally:
        sys.settrace(previous)
    return result, work
