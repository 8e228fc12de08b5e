"""Which adapter methods a contract suite really called (gate.schedule.repository_contract).

A suite's source calling ``x.insert(...)`` proves nothing about the adapter: ``x`` may
be any object. ``RecordingFactory`` wraps the unit-of-work factory a contract test
receives; every unit of work it begins hands out its port repositories behind a
``RecordingPort`` bound to the adapter's concrete class. A call is recorded only when
it goes through that proxy into the class's own method on the adapter's own instance
(``type(target).<name>`` bound to ``target``), keyed by (suite, adapter, port
attribute, method). The unit-of-work port itself is recorded under attribute ``""``
(its ``commit``/``rollback`` calls and repository property reads).

The contract session writes the log to ``$SCHEDULING_CONTRACT_CALLS`` (JSON) at exit;
the gate reads it and requires every protocol method of every (port, adapter) pair.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

CALLS_ENV = "SCHEDULING_CONTRACT_CALLS"
PORT_ATTRIBUTES = (
    "schedules",
    "occurrences",
    "idempotency",
    "principals",
    "agents",
    "sessions",
    "runs",
    "events",
    "outbox",
    "admission",
    "materialization",
    "pending_accounts",
    "wakeups",
)

Call = tuple[str, str, str, str]
"""(suite ``file.py::Class``, adapter, port attribute or ``""``, method)."""


class CallLog:
    def __init__(self) -> None:
        self.calls: set[Call] = set()

    def add(self, call: Call) -> None:
        self.calls.add(call)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(sorted(self.calls)), encoding="utf-8")


def read_calls(path: Path) -> set[Call]:
    return {(a, b, c, d) for a, b, c, d in json.loads(path.read_text(encoding="utf-8"))}


LOG = CallLog()
"""The contract session's log (one process: the gate runs the suites without xdist)."""


class RecordingPort:
    """``target`` whose public methods, resolved on its concrete class, are recorded."""

    def __init__(self, target: Any, log: CallLog, key: tuple[str, str, str]) -> None:
        self._target = target
        self._log = log
        self._key = key

    def __getattr__(self, name: str) -> Any:
        member = getattr(type(self._target), name, None)
        if name.startswith("_") or member is None or not callable(member):
            return getattr(self._target, name)
        bound = member.__get__(self._target, type(self._target))

        def call(*args: Any, **kwargs: Any) -> Any:
            self._log.add((*self._key, name))
            return bound(*args, **kwargs)

        return call


class RecordingUnitOfWork:
    """A unit of work whose repositories are ``RecordingPort``s."""

    def __init__(self, target: Any, log: CallLog, suite: str, adapter: str) -> None:
        self._target = target
        self._log = log
        self._suite = suite
        self._adapter = adapter

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name in PORT_ATTRIBUTES:
            self._log.add((self._suite, self._adapter, "", name))
            return RecordingPort(value, self._log, (self._suite, self._adapter, name))
        if name in ("commit", "rollback"):
            self._log.add((self._suite, self._adapter, "", name))
        return value

    async def __aenter__(self) -> RecordingUnitOfWork:
        await self._target.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._target.__aexit__(exc_type, exc, tb)


class RecordingFactory:
    """The factory a contract test receives: everything else is the adapter's own."""

    def __init__(self, target: Any, log: CallLog, suite: str, adapter: str) -> None:
        self._target = target
        self._log = log
        self._suite = suite
        self._adapter = adapter

    def begin(self, *args: Any, **kwargs: Any) -> RecordingUnitOfWork:
        return RecordingUnitOfWork(
            self._target.begin(*args, **kwargs), self._log, self._suite, self._adapter
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)
