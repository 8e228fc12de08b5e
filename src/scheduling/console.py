"""What every console script of the project does the same way.

``--version``; a quiet exit when the reader of stdout goes away (``cmd | head``);
progress lines that go to stderr only when a person is watching (a TTY), so piped
or captured output stays clean. Used by ``scheduling``, ``scheduling-gates`` and
``scheduling-sim``; imports nothing of the project.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from importlib import metadata

# What a shell reports for a process ended by SIGPIPE (128 + 13), like `yes | head -1`.
EXIT_CLOSED_PIPE = 141
EXIT_INTERRUPTED = 130


def version_text(prog: str, distribution: str = "scheduling") -> str:
    try:
        number = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        number = "unknown (not installed)"
    return f"{prog} {number}"


def add_version(parser: argparse.ArgumentParser, prog: str) -> None:
    parser.add_argument(
        "--version",
        action="version",
        version=version_text(prog),
        help="print the version and exit",
    )


def guarded(main: Callable[[], int]) -> int:
    """Run ``main``; a closed stdout or Ctrl-C ends it without a traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def progress(message: str) -> None:
    """A progress line for a person at a terminal; nothing when stderr is not a TTY."""
    if sys.stderr.isatty():
        print(message, file=sys.stderr, flush=True)
