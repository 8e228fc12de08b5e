"""The ``scheduling`` console script.

Subcommands live in ``COMMANDS``: each entry names a function that adds its arguments
to a subparser and the function that runs it (returning the exit status). To add one,
write the two functions and register them with ``command(...)``.

* ``scheduling preview CADENCE_JSON [--from INSTANT] [--count N] [--json]`` prints the
  next firings of a cadence, each annotated with its local date and wall time, UTC
  offset and how it was resolved (exact, fold->earlier, gap->first valid).
* ``scheduling diagnostics`` prints the versions results depend on (Python, tzdata,
  this package).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from scheduling import __version__, parse_cadence
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import SchedulingError
from scheduling.recurrence import Firing, upcoming
from scheduling.timezones import tzdata_package_version, tzdata_version


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


# ------------------------------------------------------------------ preview


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 instant: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError("--from needs a UTC offset, e.g. 2026-03-07T00:00:00Z")
    return value.astimezone(UTC)


def _configure_preview(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cadence", metavar="CADENCE_JSON", help="a cadence payload as JSON")
    parser.add_argument(
        "--from",
        dest="start",
        type=_instant,
        default=None,
        help="list firings strictly after this instant (default: now)",
    )
    parser.add_argument("--count", type=int, default=10, help="how many firings (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of text")


def _firing_json(firing: Firing) -> dict[str, object]:
    return {
        "instant": format_instant(firing.instant),
        "local_date": firing.local_date.isoformat(),
        "local": firing.local.isoformat(),
        "requested_time": firing.requested_time.strftime("%H:%M:%S"),
        "utc_offset_seconds": int(firing.utc_offset.total_seconds()),
        "abbreviation": firing.abbreviation,
        "zone": firing.zone,
        "resolution": firing.resolution.value,
    }


@command("preview", "print a cadence's next firings, explained", _configure_preview)
def preview(args: argparse.Namespace, out: TextIO) -> int:
    try:
        payload = json.loads(args.cadence)
    except json.JSONDecodeError as exc:
        print(f"error: CADENCE_JSON is not JSON: {exc.msg}", file=sys.stderr)
        return 2
    if args.count < 1 or args.count > 1000:
        print("error: --count must be within 1..1000", file=sys.stderr)
        return 2
    try:
        cadence = parse_cadence(payload)
    except SchedulingError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    start = args.start
    if start is None:
        # The CLI is an edge: the one place here allowed to read the system clock.
        from scheduling.adapters.system_clock import SystemClock

        start = SystemClock().now()
    firings = upcoming(cadence, start, args.count)
    if args.json:
        for firing in firings:
            print(json.dumps(_firing_json(firing), sort_keys=True), file=out)
        return 0
    print(f"cadence: {json.dumps(cadence.to_payload(), sort_keys=True)}", file=out)
    print(f"after:   {format_instant(start)}   (tzdata {tzdata_version()})", file=out)
    for firing in firings:
        print(firing.describe(), file=out)
    if not firings:
        print("no further firings", file=out)
    return 0


# -------------------------------------------------------------- diagnostics


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


# -------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    import scheduling.commands  # noqa: F401  (registers the operator commands)

    parser = argparse.ArgumentParser(prog="scheduling", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, spec in COMMANDS.items():
        spec.configure(subparsers.add_parser(name, help=spec.help, description=spec.help))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args, out or sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
