"""The event loop the long-running roles run on: the scheduler and run worker (ADR 2640)
and ``scheduling serve`` (ADR 2700).

uvloop where it imports (a CPython dependency, not on Windows), asyncio's own loop
otherwise. A round trip on uvloop costs about 15-30 % less client CPU (ADR 2440), and
the drain makes five per decision. For ``serve`` it is also what uvicorn's own
``loop="auto"`` picks, so the HTTP anchor (``uvicorn.run``) and the API run on the same
loop. The deterministic simulator calls ``asyncio.run`` itself and never comes here.
``uvloop.run`` builds its loop through a loop factory and sets no event-loop policy, so
the process's other ``asyncio.run`` calls still get asyncio's loop.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def role_loop_name() -> str:
    """``"uvloop"`` if uvloop imports, else ``"asyncio"``: the loop the roles run on."""
    return "uvloop" if _uvloop() is not None else "asyncio"


def run_role(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on the roles' loop. A new loop each time, as
    ``asyncio.run`` makes, with the same debug default and the same cancellation and
    shutdown of leftover tasks, because ``uvloop.run`` is ``asyncio.Runner`` with
    uvloop's loop factory."""
    uvloop = _uvloop()
    if uvloop is None:
        return asyncio.run(main)
    result: T = uvloop.run(main)
    return result


def _uvloop() -> Any:
    # Checked at each call, not once at import: a test can make the import fail
    # (monkeypatching ``importlib.import_module``), and the check costs microseconds
    # once per process life.
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        return None
