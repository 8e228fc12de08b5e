"""``scheduling serve`` serves on uvloop when it imports, as the scheduler and run-worker
roles do and as uvicorn's own ``loop="auto"`` would (ADR 2700); on asyncio's loop when
uvloop does not import. Both the one-process path and each ``--workers N`` process.

The serving itself is replaced by a probe that records the running loop: the parts
under test are the CLI's choice of runner, not uvicorn."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scheduling.cli import http as http_cli
from testsupport.loops import without_uvloop

uvloop = pytest.importorskip("uvloop")  # a dependency on CPython outside Windows


class _Plane:
    async def close(self) -> None:
        return None


def _probe(monkeypatch: pytest.MonkeyPatch) -> list[type[Any]]:
    """Replace the settings, the plane and the serving with stand-ins; returns the
    loop types the serving ran on."""
    seen: list[type[Any]] = []

    async def serve_http(*args: Any, **kwargs: Any) -> None:
        seen.append(type(asyncio.get_running_loop()))

    monkeypatch.setattr(http_cli.bootstrap, "serve_http", serve_http)
    monkeypatch.setattr(http_cli, "_plane", lambda settings, tokens: _Plane())
    monkeypatch.setattr(
        http_cli, "load_settings", lambda: SimpleNamespace(production=False, storage="postgres")
    )
    monkeypatch.setattr(http_cli, "configure_logging", lambda *a, **k: None)
    return seen


def _serve_once(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text('{"tokens": []}', encoding="utf-8")
    args = argparse.Namespace(host="127.0.0.1", port="8080", workers="1", tokens_file=str(tokens))
    assert http_cli.serve(args, io.StringIO()) == 0


def _serve_as_worker(tmp_path: Path) -> None:
    parent = os.getppid()  # the supervisor's pid, as ``supervise`` passes it
    with socket.socket() as sock:
        http_cli._worker(sock, "127.0.0.1", 0, str(tmp_path / "tokens.json"), 0, parent)


def test_serve_runs_on_uvloop_when_it_imports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _probe(monkeypatch)
    _serve_once(tmp_path)
    _serve_as_worker(tmp_path)
    assert len(seen) == 2
    assert all(issubclass(loop, uvloop.Loop) for loop in seen), seen


def test_serve_runs_on_asyncio_when_uvloop_does_not_import(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _probe(monkeypatch)
    without_uvloop(monkeypatch)
    _serve_once(tmp_path)
    _serve_as_worker(tmp_path)
    assert len(seen) == 2
    assert not any(issubclass(loop, uvloop.Loop) for loop in seen), seen
    assert all(issubclass(loop, asyncio.BaseEventLoop) for loop in seen), seen
