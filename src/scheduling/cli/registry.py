"""The subcommand registry of the ``scheduling`` console script.

Each subcommand module registers itself with ``command(...)``: a function that adds its
arguments to a subparser and the function that runs it (returning the exit status).
``scheduling.cli`` imports every subcommand module and builds the parser from
``COMMANDS``; subcommand modules import only this registry, never ``scheduling.cli``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class Command:
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]


COMMANDS: dict[str, Command] = {}


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[
    [Callable[[argparse.Namespace, TextIO], int]], Callable[[argparse.Namespace, TextIO], int]
]:
    """Register ``name`` as a subcommand (decorate its run function)."""

    def register(
        run: Callable[[argparse.Namespace, TextIO], int],
    ) -> Callable[[argparse.Namespace, TextIO], int]:
        COMMANDS[name] = Command(help, configure, run)
        return run

    return register
