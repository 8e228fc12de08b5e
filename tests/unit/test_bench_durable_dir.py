"""The drain bench's durable server is on disk (ADR 2340): ``--durable-dir`` on tmpfs
is refused before anything runs, a directory on disk is taken (and created)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from testsupport.bench import load_bench


def _bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "bench_materialize.py", "bench_durable_dir")


def test_tmpfs_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench(monkeypatch)
    with pytest.raises(SystemExit, match="tmpfs"):
        bench.durable_base(Path("/dev/shm/h5-durable"))
    assert not Path("/dev/shm/h5-durable").exists()


def test_a_directory_on_disk_is_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bench = _bench(monkeypatch)
    target = tmp_path / "durable"
    assert bench.durable_base(target) == target
    assert target.is_dir()
