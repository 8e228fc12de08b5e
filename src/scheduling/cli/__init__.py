"""The ``scheduling`` console script (entry point ``scheduling.cli:main``).

One module per subcommand family, each registering itself in
``scheduling.cli.registry.COMMANDS`` when imported (below, at module level):

* ``preview``, ``diagnostics`` - a cadence's next firings explained; the versions
  results depend on;
* ``migrate``, ``release-check``, ``scheduler``, ``run-worker``, ``purge``,
  ``repair-next-fire`` - the operator commands (see docs/operations/deployment.md);
* ``serve``, ``principals``, ``agents``, ``tokens``, ``dev`` - the HTTP control plane,
  provisioning and the development stack (docs/operations/provisioning.md).
* ``logins`` - create a login for a deployment role, rotate its password.
* ``mcp`` - the model tools over MCP, stdio or streamable HTTP (ADRs 1601, 2110).

``edge`` holds what only the process edges do: read ``os.environ`` for settings and
construct the system clock and id generator.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from scheduling.cli import (
    dev,
    diagnostics,
    http,
    logins,
    maintenance,
    mcp,
    migrate,
    preview,
    provision,
    release,
    serve,
)
from scheduling.cli.registry import COMMANDS
from scheduling.cli.usage import refuse_error
from scheduling.console import add_version, guarded
from scheduling.domain.errors import SchedulingError

# The order subcommands are listed in ``scheduling --help``.
SUBCOMMAND_MODULES = (
    preview,
    diagnostics,
    maintenance,
    migrate,
    release,
    serve,
    http,
    mcp,
    provision,
    dev,
    logins,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scheduling",
        description="The scheduling control plane: preview cadences, migrate, run the roles.",
    )
    add_version(parser, "scheduling")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    order = [module.__name__ for module in SUBCOMMAND_MODULES]
    listed = sorted(COMMANDS.items(), key=lambda item: order.index(item[1].run.__module__))
    for name, spec in listed:
        spec.configure(subparsers.add_parser(name, help=spec.help, description=spec.help))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    return guarded(lambda: _main(argv, out or sys.stdout))


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args, out)
    except SchedulingError as exc:  # the last word: one line with the code, no traceback
        return refuse_error(f"scheduling {args.command}", exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
