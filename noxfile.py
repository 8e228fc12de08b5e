"""Developer sessions: nox -s lint types layers tests gates sim bench;
lanes: mutate, schemathesis."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["lint", "types", "layers", "tests"]
nox.options.reuse_existing_virtualenvs = True
PYTHON = "3.11"


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (incl. the banned ambient-clock APIs) and formatting."""
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "bench", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "bench", "noxfile.py")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy --strict over the product and the harness."""
    _install(session)
    session.run("mypy")


@nox.session(python=PYTHON)
def layers(session: nox.Session) -> None:
    """import-linter: a pure domain, ports over the domain, no harness in the product."""
    _install(session)
    session.run("lint-imports")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite (real PostgreSQL from the provider), in parallel."""
    _install(session)
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def gates(session: nox.Session) -> None:
    """The gate suite and its reports (reports/out/)."""
    _install(session)
    session.run("scheduling-gates", "run", *session.posargs)


@nox.session(python=PYTHON)
def sim(session: nox.Session) -> None:
    """The simulator's scenarios (see docs/simulator.md)."""
    _install(session)
    session.run("scheduling-sim", *(session.posargs or ["list"]))


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmark in bench/, each writing JSON to bench/results/."""
    _install(session)
    results = Path("bench/results")
    results.mkdir(parents=True, exist_ok=True)
    for script in sorted(Path("bench").glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        session.run("python", str(script), "--output", str(results / f"{name}.json"))
    # One Markdown table: every target beside its anchor from this run (table.md).
    session.run("python", "bench/table.py", str(results))


@nox.session(python=PYTHON)
def mutate(session: nox.Session) -> None:
    """The sensitivity lane (nightly, not main CI): every shipped mutant of
    src/gates/runner/mutants.toml on a copy of the tree; fails unless all are killed."""
    _install(session)
    out = Path("reports/out")
    out.mkdir(parents=True, exist_ok=True)
    session.run(
        "scheduling-gates", "mutate", "--output", str(out / "mutants.json"), *session.posargs
    )


@nox.session(python=PYTHON)
def schemathesis(session: nox.Session) -> None:
    """The schemathesis lane (nightly, not main CI): every phase for every caller at the
    issue's example counts (the default suite runs a bounded version; ADR 2132)."""
    _install(session)
    session.run(
        "pytest", "tests/http/test_schemathesis.py", "-m", "slow", "-p", "no:randomly",
        "-n", "auto", "-rA", *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON)
def ha_soak(session: nox.Session) -> None:
    """The HA lane (not main CI): pg_auto_failover and pgbouncer soaks and the pooling
    probe; needs the Debian packages postgresql-15-auto-failover and pgbouncer, which
    .ci/ha-soak installs (ADR 2230)."""
    _install(session)
    session.run(
        "pytest", "-m", "slow", "-p", "no:randomly", "-rA",
        "tests/integration/test_pgbouncer_pooling.py", "tests/integration/test_ha_soak.py",
        *session.posargs,
    )  # fmt: skip
