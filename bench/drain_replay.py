"""The drain's own transactions replayed through bare asyncpg (ADR 2730; not a benchmark
itself, bench_materialize.py runs it).

What share of a decision's cost is the worker's own, and what is the work itself? A
capturing drain (``materialize_world.drain`` with ``CAPTURE``) records on each pooled
connection what the driver sends itself (asyncpg's query logger: the text and the bound
arguments): each decision's ``BEGIN; SELECT set_config(...)``, its prepared lock, context
and decision statements, and ``COMMIT``. The world was copied (``CREATE DATABASE ...
TEMPLATE``) before that drain, so a replay on a copy meets the same due schedules,
principals and agent versions and the same ``now``: it sends the recorded transactions,
in the order they began, from ``concurrency`` connections at once on the roles' event
loop, with nothing between the statements (no domain, no SQLAlchemy, no unit of work).
Same statements, same arguments, same round trips, same rows written: the thinnest
client these writes can have in Python, and the server's cost of the spec's writes.

The replay checks what it did rather than trusting it: every decision statement must
report its occurrence inserted and the schedule advanced, and the copy must then hold as
many occurrences as the drain decided (``bench_materialize.replay_run``). SQLAlchemy's
own statements (the due scans, about 0.03 round trips a decision) are not recorded, so
the replay is a decision's transaction without the scan.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
from backend_cpu import BackendPids

from scheduling.cli.role_loop import run_role

Statement = tuple[str, tuple[Any, ...]]
"""A query's text and its bound arguments (empty: sent by the simple query protocol)."""
Recorded = tuple[int, int, str, tuple[Any, ...]]
"""Sequence number, connection, text, arguments: one query-logger record."""

_OPENS = ("BEGIN",)
_ENDS = ("COMMIT", "ROLLBACK")


class Recorder:
    """Records, per connection and in one global order, what the driver sent: attach
    ``on_query`` bound to a connection's key as that connection's asyncpg query logger."""

    def __init__(self) -> None:
        self.records: list[Recorded] = []
        self._sequence = itertools.count()

    def logger(self, connection: int) -> Any:
        def on_query(record: Any) -> None:
            args = tuple(record.args) if record.args else ()
            self.records.append((next(self._sequence), connection, record.query, args))

        return on_query


def _verb(query: str) -> str:
    return query.lstrip().split(None, 1)[0].upper().rstrip(";") if query.strip() else ""


def transactions_of(records: Iterable[Recorded]) -> list[list[Statement]]:
    """The committed transactions in ``records``, each its statements in the order its
    connection sent them, ordered by when each began. A transaction that rolled back
    or never ended is left out (it wrote nothing); statements outside a transaction
    (none on the decision path) too."""
    open_by_connection: dict[int, tuple[int, list[Statement]]] = {}
    done: list[tuple[int, list[Statement]]] = []
    for sequence, connection, query, args in sorted(records):
        verb = _verb(query)
        if not args and verb in _OPENS:
            open_by_connection[connection] = (sequence, [(query, args)])
            continue
        current = open_by_connection.get(connection)
        if current is None:
            continue
        current[1].append((query, args))
        if not args and verb in _ENDS:
            del open_by_connection[connection]
            if verb == "COMMIT":
                done.append(current)
    done.sort(key=lambda begun: begun[0])
    return [statements for _, statements in done]


@dataclass
class ReplayResult:
    transactions: int
    seconds: float
    cpu_seconds: float
    """Client CPU (user + system) of the replaying process."""
    server_cpu_seconds: float | None
    """CPU of the replay's backends (``None`` if their processes are not readable)."""
    round_trips: int
    unwritten: int
    """Decision statements that did not report (inserted, advanced) as (1, 1)."""


def _wrote(rows: list[Any]) -> bool | None:
    """``True`` or ``False`` for a decision statement's row (``inserted``, ``advanced``),
    ``None`` for any other statement."""
    if len(rows) != 1:
        return None
    keys = tuple(rows[0].keys())
    if keys != ("inserted", "advanced"):
        return None
    return bool(rows[0]["inserted"] == 1 and rows[0]["advanced"] == 1)


async def replay(url: str, transactions: list[list[Statement]], concurrency: int) -> ReplayResult:
    """Send ``transactions`` from ``concurrency`` connections, each taking the next."""
    connections = [await asyncpg.connect(url) for _ in range(concurrency)]
    backends = BackendPids()
    backends.pids.extend(c.get_server_pid() for c in connections)
    queue: Iterator[list[Statement]] = iter(transactions)
    round_trips = unwritten = 0

    async def slot(connection: asyncpg.Connection) -> None:
        nonlocal round_trips, unwritten
        for statements in queue:
            for query, args in statements:
                round_trips += 1
                if args:
                    wrote = _wrote(await connection.fetch(query, *args))
                    unwritten += wrote is False
                else:
                    await connection.execute(query)

    try:
        server_started = backends.cpu_seconds()
        cpu_started = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(slot(c) for c in connections))
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        server_now = backends.cpu_seconds()
    finally:
        for connection in connections:
            await connection.close()
    server_seconds = (
        None if server_now is None or server_started is None else server_now - server_started
    )
    return ReplayResult(
        transactions=len(transactions),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        server_cpu_seconds=server_seconds,
        round_trips=round_trips,
        unwritten=unwritten,
    )


def replay_process(args: tuple[str, list[list[Statement]], int]) -> ReplayResult:
    """Entry of the replaying process (multiprocessing), on the roles' event loop."""
    url, transactions, concurrency = args
    return run_role(replay(url, transactions, concurrency))
