"""The CLI starts instantly (issue 26 item 4, ADR 2201): ``scheduling --version``,
``--help`` and building the parser import no web, database or MCP stack, and choosing a
subcommand imports that subcommand's module only. The composition root imports a role's
module only when asked (ADR 2200).

Every probe runs in a fresh interpreter, so what other tests imported cannot leak in.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import scheduling.cli
from scheduling.cli.registry import COMMANDS, SUBCOMMANDS, load

HEAVY = ("fastapi", "starlette", "uvicorn", "alembic", "mcp", "sqlalchemy", "asyncpg")
"""Third-party stacks the parser and ``--version`` must not import."""

PROBE = """
import json, sys
{prelude}
import scheduling.cli as cli
parser = cli.build_parser()
for argv in {argvs!r}:
    try:
        cli.main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def imported_after(*argvs: list[str], prelude: str = "") -> set[str]:
    """The modules a fresh interpreter holds after building the parser and running
    ``scheduling ARGV`` for each of ``argvs``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(prelude=prelude, argvs=list(argvs))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_version_help_and_the_parser_import_no_heavy_stack() -> None:
    modules = imported_after(["--version"], ["--help"])
    assert heavy(modules) == []
    assert "scheduling.bootstrap" not in modules
    subcommand_modules = {f"scheduling.cli.{entry.module}" for entry in SUBCOMMANDS.values()}
    assert modules & subcommand_modules == set()


def test_the_guard_sees_a_heavy_import() -> None:
    """The test of the test: the same probe, with SQLAlchemy imported first, fails it."""
    assert "sqlalchemy" in heavy(imported_after(["--version"], prelude="import sqlalchemy"))


def test_choosing_a_subcommand_imports_its_module_only() -> None:
    modules = imported_after(["preview", '{"kind": "DAILY"}'])
    assert "scheduling.cli.preview" in modules
    others = {f"scheduling.cli.{e.module}" for e in SUBCOMMANDS.values()} - {
        "scheduling.cli.preview"
    }
    assert modules & others == set()
    assert heavy(modules) == []


def test_mcp_help_parses_through_the_lazy_subparser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        scheduling.cli.build_parser().parse_args(["mcp", "--help"])
    assert done.value.code == 0
    assert "--transport" in capsys.readouterr().out


def test_the_registry_and_the_modules_agree() -> None:
    """Every registry row names the module that registers it with the same help, and
    every module's command has a row (a command missing here would be unreachable)."""
    for name, entry in SUBCOMMANDS.items():
        registered = load(name)
        assert registered.run.__module__ == f"scheduling.cli.{entry.module}", name
        assert registered.help == entry.help, name
    for info in pkgutil.iter_modules(scheduling.cli.__path__):
        importlib.import_module(f"scheduling.cli.{info.name}")
    assert set(COMMANDS) == set(SUBCOMMANDS)


def imported_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``statement``."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_a_scheduler_build_imports_no_web_or_mcp_stack() -> None:
    modules = imported_by("from scheduling.bootstrap import build_scheduler, build_api")
    roots = {m.split(".")[0] for m in modules}
    assert roots & {"fastapi", "starlette", "uvicorn", "mcp"} == set()
    assert "scheduling.bootstrap.serving" not in modules
    assert "scheduling.bootstrap.mcp" not in modules


SERVING = ("fastapi", "starlette", "uvicorn", "mcp")
"""The web and MCP stacks: none of a one-shot command's business."""

ONE_SHOT = ["tokens", "principals", "agents", "provision", "logins", "purge",
            "repair-next-fire"]  # fmt: skip
"""Commands that connect, do their few statements and exit."""

CONNECTING = [*ONE_SHOT, "scheduler", "run-worker"]
"""Commands that connect but neither migrate nor compare the schema with the migration
head: Alembic (about 0.1 s of imports) is none of their business (issue 26 item 4). The
two roles serve their ``/metrics`` on uvicorn, so only Alembic is refused for them."""


@pytest.mark.parametrize("name", CONNECTING)
def test_a_connecting_command_imports_no_alembic(name: str) -> None:
    modules = imported_after([name, "--help"])
    assert f"scheduling.cli.{SUBCOMMANDS[name].module}" in modules
    roots = {m.split(".")[0] for m in modules}
    forbidden = {"alembic", *SERVING} if name in ONE_SHOT else {"alembic"}
    assert roots & forbidden == set(), name


def test_the_connecting_guard_sees_alembic() -> None:
    """The test of the test: with Alembic reached the way the unit of work used to reach
    it (the URL helper in the migration runner), the same probe sees it."""
    prelude = "import scheduling.adapters.postgres.migrations"
    modules = imported_after(["tokens", "--help"], prelude=prelude)
    assert "alembic" in {m.split(".")[0] for m in modules}


ROLE_COMMANDS = ["serve", "scheduler", "run-worker", "mcp", "purge", "repair-next-fire",
                 "migrate", "release-check", "tokens", "principals", "agents", "provision",
                 "dev"]  # fmt: skip
"""Commands whose run reaches the database, a role or the migration runner through the
composition root: their modules read the root's names when they run, so asking for
their help builds nothing and imports no database stack (ADR 2750)."""


@pytest.mark.parametrize("name", ROLE_COMMANDS)
def test_a_role_commands_help_imports_no_role_and_no_heavy_stack(name: str) -> None:
    modules = imported_after([name, "--help"])
    assert f"scheduling.cli.{SUBCOMMANDS[name].module}" in modules
    assert heavy(modules) == [], name
    assert sorted(m for m in modules if m.startswith("scheduling.bootstrap.")) == [], name


def test_the_logins_help_lists_the_role_kinds_without_the_database_stack() -> None:
    """``logins --help`` names the role kinds a login may join: it reads them from the
    root's light ``deployment_roles``; the SCRAM login statements (SQLAlchemy) load
    only when the command runs (the previous tree imported the adapter: about 400 ms)."""
    modules = imported_after(["logins", "--help"])
    assert "scheduling.cli.logins" in modules
    assert heavy(modules) == []
    assert sorted(m for m in modules if m.startswith("scheduling.bootstrap.")) == [
        "scheduling.bootstrap.deployment_roles"
    ]


def test_the_role_guard_sees_a_builder_imported_at_module_level() -> None:
    """The test of the test: a subcommand module that imported a builder by name (as
    they did) pulls the role's module and its stack into the same probe."""
    prelude = "from scheduling.bootstrap import build_maintenance"
    modules = imported_after(["purge", "--help"], prelude=prelude)
    assert "scheduling.bootstrap.maintenance" in modules
    assert "sqlalchemy" in {m.split(".")[0] for m in modules}


def test_the_api_composition_and_the_release_checks_import_no_alembic() -> None:
    """The API's readiness and ``release-check`` compare the database with the head this
    build ships (``HEAD_REVISION``) instead of asking Alembic for it, so ``serve``,
    ``mcp`` and ``release-check`` load no migration runner (ADR 2751); the previous tree
    imported it here."""
    modules = imported_by(
        "import scheduling.bootstrap.control_plane, scheduling.bootstrap.serving,"
        " scheduling.bootstrap.privileges"
    )
    assert "alembic" not in {m.split(".")[0] for m in modules}
    assert "scheduling.adapters.postgres.migrations" not in modules


def test_reading_the_token_file_loads_no_database_stack(tmp_path: Path) -> None:
    """``tokens list`` and ``tokens revoke`` only read or rewrite the token file: they
    reach it through ``bootstrap.token_entries``, not the provisioning service's
    database stack (ADR 2751; the previous tree imported the unit of work here)."""
    tokens = str(tmp_path / "tokens.json")
    modules = imported_after(["tokens", "--tokens-file", tokens, "list"])
    assert "scheduling.bootstrap.token_entries" in modules
    assert heavy(modules) == []
    assert "scheduling.bootstrap.provisioning" not in modules
