"""The default instance id is computed once per process (``<short host>-<pid>``): stable
for the life of the process, as ``scheduling.instance`` promises, and a forked child
computes its own."""

from __future__ import annotations

import os
import socket

import pytest

from scheduling import instance


@pytest.fixture(autouse=True)
def undeclared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instance, "_declared", None)
    monkeypatch.setattr(instance, "_default", None, raising=False)


def test_a_host_renamed_later_does_not_rename_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "first.example.com")
    assert instance.current().instance_id == f"first-{os.getpid()}"
    # Computed per call, the id would become ``renamed-<pid>`` mid-process.
    monkeypatch.setattr(socket, "gethostname", lambda: "renamed")
    assert instance.current().instance_id == f"first-{os.getpid()}"


def test_a_forked_child_computes_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    assert instance.current().instance_id == f"box-{os.getpid()}"
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(write, instance.current().instance_id.encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        assert pipe.read() == f"box-{child}"
