"""The ``scheduling`` console script (entry point ``scheduling.cli:main``).

One module per subcommand family, each registering itself in
``scheduling.cli.registry.COMMANDS`` when imported (below, at module level):

* ``preview``, ``diagnostics`` - a cadence's next firings explained; the versions
  results depend on;
* ``migrate``, ``release-check``, ``scheduler``, ``run-worker``, ``purge``,
  ``repair-next-fire`` - the operator commands (see docs/operations/deployment.md).

``edge`` holds what only the process edges do: read ``os.environ`` for settings and
construct the system clock and id generator.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from scheduling.cli import diagnostics, maintenance, migrate, preview, release, serve
from scheduling.cli.registry import COMMANDS

# The order subcommands are listed in ``scheduling --help``.
SUBCOMMAND_MODULES = (preview, diagnostics, maintenance, migrate, release, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scheduling", description="The ``scheduling`` console script."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    order = [module.__name__ for module in SUBCOMMAND_MODULES]
    listed = sorted(COMMANDS.items(), key=lambda item: order.index(item[1].run.__module__))
    for name, spec in listed:
        spec.configure(subparsers.add_parser(name, help=spec.help, description=spec.help))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args, out or sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
