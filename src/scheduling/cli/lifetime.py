"""How a long-running subcommand lives and stops: the first SIGINT/SIGTERM sets the stop
event (graceful), the second cancels the body (a crash every transaction tolerates).

``supervise`` runs N copies of one process (``serve --workers N``, ADR 2320): the
parent owns the signals and the children's lives; a child stops when the parent tells
it (SIGTERM) or when the parent is gone (an orphan serves no one)."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

_log = logging.getLogger(__name__)

ORPHAN_POLL_SECONDS = 0.5
"""How often a supervised child checks that its parent is still alive."""

CHILD_STOP_SECONDS = 30
"""How long the parent waits for a child to stop gracefully before killing it."""


async def until_signalled(
    body: Callable[[asyncio.Event], Awaitable[None]], *, parent: int | None = None
) -> None:
    """Run ``body(stop)``; the first SIGINT/SIGTERM sets ``stop``, the second cancels.

    ``parent`` (a child of ``supervise``, the supervisor's pid): every signal only sets
    ``stop`` (a terminal's Ctrl-C reaches the child and the parent's SIGTERM follows it;
    the parent escalates, not the child), and so does the parent's death."""
    supervised = parent is not None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.ensure_future(body(stop))
    watcher = None if parent is None else asyncio.ensure_future(_orphaned(parent, stop))

    def on_signal() -> None:
        if stop.is_set() and not supervised:
            task.cancel()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        await task
    except asyncio.CancelledError:
        _log.warning("stopped by a second signal")
    finally:
        if watcher is not None:
            watcher.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _orphaned(parent: int, stop: asyncio.Event) -> None:
    # The pid the parent passed, not getppid() at start: it may be gone already.
    while True:  # nothing to await: an orphan is re-parented silently
        if os.getppid() != parent:
            break
        await asyncio.sleep(ORPHAN_POLL_SECONDS)
    _log.warning("parent process %d is gone: stopping", parent)
    stop.set()


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound once by the parent; every worker accepts on it (the kernel spreads the
    connections), so a port is never half-served while a worker starts or stops."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP;
    # without it every response waits out the client's delayed ACK (45 ms, measured).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # uvicorn's default backlog
    return sock


def supervise(
    target: Callable[..., None], args: Callable[[int], tuple[object, ...]], n: int
) -> int:
    """Run ``target(*args(i))`` in ``n`` spawned processes until a signal or a child's exit.

    The first SIGINT/SIGTERM sends each child SIGTERM (graceful), the second SIGKILL;
    then 0. A child that exits on its own (it crashed, or refused to start) stops the
    others: 1, reported once here; the orchestrator restarts the whole, not a worker."""
    spawn = multiprocessing.get_context("spawn")  # no inherited event loop, pools or locks
    children = [spawn.Process(target=target, args=args(i), name=f"worker-{i}") for i in range(n)]
    signalled = 0

    def tell(sig: int) -> None:
        for child in children:
            if child.pid is not None and child.exitcode is None:
                os.kill(child.pid, sig)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal signalled
        signalled += 1
        tell(signal.SIGTERM if signalled == 1 else signal.SIGKILL)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    failed: multiprocessing.process.BaseProcess | None = None
    try:
        for child in children:
            child.start()
        if signalled:  # a signal before every child had a pid
            tell(signal.SIGTERM)
        while running := [c for c in children if c.exitcode is None]:
            multiprocessing.connection.wait([c.sentinel for c in running])
            gone = next((c for c in children if c.exitcode is not None), None)
            if failed is None and not signalled and gone is not None:
                failed = gone
                tell(signal.SIGTERM)
    finally:
        for child in children:
            child.join(CHILD_STOP_SECONDS)
            if child.exitcode is None:
                child.kill()
                child.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed is not None:
        _log.error(
            "worker %s (pid %s) exited with %s: stopped the others",
            failed.name,
            failed.pid,
            failed.exitcode,
        )
        return 1
    return 0
