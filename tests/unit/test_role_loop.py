"""The scheduler and run-worker roles run on uvloop when it imports, on asyncio's loop
when it does not; the simulator and the process's other ``asyncio.run`` calls stay on
asyncio's loop (ADR 2640)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from scheduling.cli import role_loop, serve
from testsupport.loops import without_uvloop

uvloop = pytest.importorskip("uvloop")  # a dependency on CPython outside Windows


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def _role_body_loop() -> type[Any]:
    """The loop type a role's body runs on, through the roles' own runner."""
    seen: list[type[Any]] = []

    async def body(stop: asyncio.Event) -> None:
        seen.append(type(asyncio.get_running_loop()))

    assert serve._lifetime(body, "stopped", io.StringIO()) == 0
    return seen[0]


def test_the_roles_run_on_uvloop_when_it_imports() -> None:
    assert role_loop.role_loop_name() == "uvloop"
    assert issubclass(role_loop.run_role(_loop_type()), uvloop.Loop)
    assert issubclass(_role_body_loop(), uvloop.Loop)


def test_the_roles_run_on_asyncio_when_uvloop_does_not_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_uvloop(monkeypatch)
    assert role_loop.role_loop_name() == "asyncio"
    assert not issubclass(role_loop.run_role(_loop_type()), uvloop.Loop)
    body_loop = _role_body_loop()
    assert not issubclass(body_loop, uvloop.Loop)
    assert issubclass(body_loop, asyncio.BaseEventLoop)


def test_a_role_leaves_no_uvloop_policy_behind() -> None:
    # uvloop.install() (a global policy) would put every later asyncio.run, the
    # simulator's included, on uvloop: the roles' runner must not.
    _role_body_loop()
    assert not issubclass(asyncio.run(_loop_type()), uvloop.Loop)


def test_the_simulator_stays_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    from simulation import cli as sim_cli

    seen: list[type[Any]] = []

    async def run(args: Any) -> int:
        seen.append(await _loop_type())
        return 0

    monkeypatch.setattr(sim_cli, "_run", run)
    _role_body_loop()  # a role ran earlier in the same process
    assert sim_cli._main(["run", "--scenario", "any"]) == 0
    assert seen
    assert not issubclass(seen[0], uvloop.Loop)
