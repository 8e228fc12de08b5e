"""The package works outside the checkout, and its pytest plugins stay out of other
projects' test runs.

* The wheel is built from the checkout and installed (``--no-deps``) into a fresh
  virtual environment in a temporary directory; the dependencies come from this
  environment's site-packages through a ``.pth`` line (offline, and without this
  environment's editable finder, which would import the checkout instead). From a
  directory outside the checkout, ``scheduling migrate`` migrates a provider-started
  database to the packaged head and ``scheduling-gates list`` prints the catalog.
* A foreign pytest project in this same environment runs with none of our options,
  markers, Hypothesis profiles, modules or database watchdog; naming the plugin with
  ``-p`` (what this repository's configuration does) brings them in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from scheduling.adapters.postgres.migrations import current_revision, head_revision

CHECKOUT = Path(__file__).resolve().parents[2]
HARNESS_ENV = ("SCHEDULING_DATABASE_URL", "SCHEDULING_DATABASE_INFO", "SCHEDULING_DATABASE_BROKER")


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with only the wheel installed (and deps on a path)."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(CHECKOUT),
        ],
        cwd=root,
    )
    wheels = list(dist.glob("scheduling-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=root
        ).strip()
    )
    (purelib / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "-q",
            str(wheels[0]),
        ],
        cwd=root,
    )
    return env_dir


def _outside_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and k not in HARNESS_ENV}


def test_the_wheel_ships_the_migrations_and_imports_from_itself(
    installed: Path, tmp_path: Path
) -> None:
    where = _run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import scheduling, gates, simulation, reports, catalog;"
            "from scheduling.adapters.postgres.migrations import migrations_dir;"
            "print(scheduling.__file__); print(migrations_dir())",
        ],
        cwd=tmp_path,
        env=_outside_env(),
    ).split()
    assert all(str(installed) in line for line in where), where
    assert CHECKOUT.as_posix() not in " ".join(where)
    assert (Path(where[1]) / "versions").is_dir()


async def test_scheduling_migrate_from_the_wheel(
    installed: Path, tmp_path: Path, pg_empty_url: str
) -> None:
    out = _run(
        [str(installed / "bin" / "scheduling"), "migrate", "--url", pg_empty_url],
        cwd=tmp_path,
        env=_outside_env(),
    )
    assert f"database at migration head {head_revision()}" in out
    assert await current_revision(pg_empty_url) == head_revision()


def test_scheduling_gates_list_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    out = _run(
        [str(installed / "bin" / "scheduling-gates"), "list"], cwd=tmp_path, env=_outside_env()
    )
    lines = [line for line in out.splitlines() if line.startswith("gate.")]
    assert len(lines) == 46, out[-2000:]


# ----------------------------------------------------- a foreign pytest project

FOREIGN_TEST = textwrap.dedent(
    """
    import os, sys

    from hypothesis import settings

    def test_nothing_of_scheduling_is_loaded():
        harness = ("gates", "simulation", "reports", "catalog")
        ours = sorted(m for m in sys.modules if m.split(".")[0] in harness)
        assert ours == []
        assert "SCHEDULING_DATABASE_BROKER" not in os.environ  # no watchdog was spawned
        # Hypothesis picks its own "ci" profile when CI is set; never one of ours.
        assert settings._current_profile not in ("quick", "deep")
        for profile in ("quick", "deep"):
            try:
                settings.get_profile(profile)
            except Exception:
                continue
            raise AssertionError(f"hypothesis profile {profile!r} was registered")
    """
)


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    project = tmp_path / "foreign"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (project / "test_foreign.py").write_text(FOREIGN_TEST)
    return project


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in _outside_env().items() if not k.startswith("SCHEDULING_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_foreign_pytest_run_sees_nothing_of_ours(foreign: Path) -> None:
    run = _pytest(foreign, "-n", "2", "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    assert "PostgreSQL:" not in run.stdout  # the provider's summary line
    help_text = _pytest(foreign, "--help").stdout
    assert "--gate-results" not in help_text
    assert "--database-info" not in help_text
    markers = _pytest(foreign, "--markers").stdout
    assert "gate(id" not in markers
    assert "postgres:" not in markers


def test_naming_the_plugins_brings_them_in(foreign: Path) -> None:
    """A test of the test: the same project with ``-p`` gets our options and markers,
    and its check that nothing of ours is loaded fails."""
    args = ("-p", "gates.runner.pytest_plugin", "-p", "simulation.provider.pytest_plugin")
    help_text = _pytest(foreign, *args, "--help").stdout
    assert "--gate-results" in help_text
    assert "--database-info" in help_text
    assert "gate(id" in _pytest(foreign, *args, "--markers").stdout
    run = _pytest(foreign, *args, "-q")
    assert run.returncode == 1
    assert "ours == []" in run.stdout or "AssertionError" in run.stdout
