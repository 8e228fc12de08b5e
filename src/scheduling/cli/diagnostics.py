"""``scheduling diagnostics``: the versions recurrence results depend on (Python,
tzdata, this package)."""

from __future__ import annotations

import argparse
import json
import platform
from typing import TextIO

from scheduling import __version__
from scheduling.cli.registry import command
from scheduling.tzdata_info import tzdata_package_version, tzdata_version


def _configure_nothing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def diagnostics_facts() -> dict[str, str]:
    """The versions recurrence results depend on."""
    return {
        "python": platform.python_version(),
        "tzdata": tzdata_version(),
        "tzdata_package": tzdata_package_version(),
        "scheduling": __version__,
        "zone_source": "tzdata package resources (host zone files are not consulted)",
    }


@command("diagnostics", "print Python, tzdata and package versions", _configure_nothing)
def diagnostics(args: argparse.Namespace, out: TextIO) -> int:
    facts = diagnostics_facts()
    if args.json:
        print(json.dumps(facts, sort_keys=True), file=out)
    else:
        for key, value in facts.items():
            print(f"{key}: {value}", file=out)
    return 0
