"""The ``scheduling`` console script (entry point ``scheduling.cli:main``).

One module per subcommand family, named with each subcommand's one-line help in
``scheduling.cli.registry.SUBCOMMANDS`` and imported only when its subcommand is chosen
(ADR 2201: ``scheduling --version`` and ``--help`` import no FastAPI, uvicorn, Alembic,
SQLAlchemy or MCP):

* ``preview``, ``diagnostics`` - a cadence's next firings explained; the versions
  results depend on;
* ``migrate``, ``release-check``, ``scheduler``, ``run-worker``, ``purge``,
  ``repair-next-fire`` - the operator commands (see docs/operations/deployment.md);
* ``serve``, ``principals``, ``agents``, ``tokens``, ``provision``, ``dev`` - the HTTP
  control plane, provisioning and the development stack
  (docs/operations/provisioning.md).
* ``logins`` - create a login for a deployment role, rotate its password.
* ``mcp`` - the model tools over MCP, stdio or streamable HTTP (ADRs 1601, 2110).

``edge`` holds what only the process edges do: read ``os.environ`` for settings and
construct the system clock and id generator.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from scheduling.cli.registry import COMMANDS, SUBCOMMANDS, load
from scheduling.cli.usage import refuse_error
from scheduling.console import add_version, guarded
from scheduling.domain.errors import SchedulingError

__all__ = ["COMMANDS", "build_parser", "main"]


class _LazyParser(argparse.ArgumentParser):
    """A subcommand's parser whose arguments are added on first use: parsing (or asking
    for help on) ``scheduling NAME ...`` imports NAME's module, nothing else does. (A
    subcommand's own nested subparsers are of this class too, with no ``command``.)"""

    def __init__(self, *args: Any, command: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._command: str | None = command

    def configure(self) -> None:
        if self._command is not None:
            name, self._command = self._command, None
            load(name).configure(self)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.configure()
        return super().parse_known_args(args, namespace)


def build_parser(*, configure_all: bool = False) -> argparse.ArgumentParser:
    """The parser, listing every subcommand with its help from the registry. Each
    subcommand's own arguments are added when it is parsed; ``configure_all`` adds them
    all now (imports every subcommand module: for tests walking every option)."""
    parser = argparse.ArgumentParser(
        prog="scheduling",
        description="The scheduling control plane: preview cadences, migrate, run the roles.",
    )
    add_version(parser, "scheduling")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_LazyParser
    )
    add: Callable[..., _LazyParser] = subparsers.add_parser
    for name, entry in SUBCOMMANDS.items():
        sub = add(name, help=entry.help, description=entry.help, command=name)
        if configure_all:
            sub.configure()
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    return guarded(lambda: _main(argv, out or sys.stdout))


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    args = build_parser().parse_args(argv)
    try:
        return load(args.command).run(args, out)
    except SchedulingError as exc:  # the last word: one line with the code, no traceback
        return refuse_error(f"scheduling {args.command}", exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
