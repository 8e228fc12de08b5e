"""The subcommand registry of the ``scheduling`` console script (ADR 2201).

``SUBCOMMANDS`` names every subcommand, the module that implements it and its one-line
help, in the order ``scheduling --help`` lists them: the parser is built from this table
alone, and a subcommand's module is imported only when that subcommand is chosen (so
``scheduling --version`` imports no FastAPI, uvicorn, Alembic, SQLAlchemy or MCP).

Each subcommand module registers itself with ``command(...)`` when imported: a function
that adds its arguments to a subparser and the function that runs it (returning the exit
status). Subcommand modules import only this registry and the edge helpers, never
``scheduling.cli``. A new subcommand needs a row here and a ``command`` in its module
(``tests/unit/test_cli_lazy.py`` checks the two agree).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TextIO


@dataclass(frozen=True)
class Subcommand:
    module: str
    """The module (under ``scheduling.cli``) whose import registers the command."""
    help: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "preview": Subcommand("preview", "print a cadence's next firings, explained"),
    "diagnostics": Subcommand("diagnostics", "print Python, tzdata and package versions"),
    "purge": Subcommand("maintenance", "delete one batch of expired terminal schedules per tenant"),
    "repair-next-fire": Subcommand(
        "maintenance", "check one schedule's next_fire_at and repair it"
    ),
    "migrate": Subcommand("migrate", "upgrade the database schema to the migration head"),
    "release-check": Subcommand(
        "release", "validate release configuration and the scheduler and run-worker logins"
    ),
    "scheduler": Subcommand("serve", "run the schedule worker until SIGINT/SIGTERM"),
    "run-worker": Subcommand("serve", "run a run worker for one priority class"),
    "serve": Subcommand("http", "serve the HTTP control plane (uvicorn) until SIGINT/SIGTERM"),
    "mcp": Subcommand("mcp", "serve the model tools over MCP (stdio or streamable HTTP)"),
    "principals": Subcommand("provision", "import principals into the durable directory"),
    "agents": Subcommand("provision", "import immutable agent versions"),
    "tokens": Subcommand("provision", "issue, revoke and list API bearer tokens"),
    "provision": Subcommand(
        "provision", "apply ONE batch file of tenants, principals, tokens, agents"
    ),
    "dev": Subcommand(
        "dev", "development only: API + schedule worker + run workers in one process"
    ),
    "logins": Subcommand("logins", "create a login for a deployment role, or rotate its password"),
}


@dataclass(frozen=True)
class Command:
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]


COMMANDS: dict[str, Command] = {}
"""The subcommands registered so far (those whose module has been imported)."""


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[
    [Callable[[argparse.Namespace, TextIO], int]], Callable[[argparse.Namespace, TextIO], int]
]:
    """Register ``name`` as a subcommand (decorate its run function). ``help`` repeats
    the registry's line (``SUBCOMMANDS``), which is what ``--help`` shows."""

    def register(
        run: Callable[[argparse.Namespace, TextIO], int],
    ) -> Callable[[argparse.Namespace, TextIO], int]:
        COMMANDS[name] = Command(help, configure, run)
        return run

    return register


def load(name: str) -> Command:
    """Import ``name``'s module (once) and return what it registered."""
    if name not in COMMANDS:
        import_module(f"scheduling.cli.{SUBCOMMANDS[name].module}")
    return COMMANDS[name]
