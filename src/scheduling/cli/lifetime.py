"""How a long-running subcommand lives and stops: the first SIGINT/SIGTERM sets the stop
event (graceful), the second cancels the body (a crash every transaction tolerates)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

_log = logging.getLogger(__name__)


async def until_signalled(body: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``body(stop)``; the first SIGINT/SIGTERM sets ``stop``, the second cancels."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.ensure_future(body(stop))

    def on_signal() -> None:
        if stop.is_set():
            task.cancel()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        await task
    except asyncio.CancelledError:
        _log.warning("stopped by a second signal")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
