"""scheduling preview CADENCE_JSON [--from INSTANT] [--count N] [--json]: the next
firings of a cadence, each annotated with its local date and wall time, UTC offset and
how it was resolved (exact, fold->earlier, gap->first valid)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TextIO

from scheduling import parse_cadence
from scheduling.adapters.system_clock import SystemClock
from scheduling.cli.registry import command
from scheduling.cli.usage import INVALID_ARGUMENT, INVALID_JSON, refuse, refuse_error, shown
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import SchedulingError
from scheduling.recurrence import Firing, upcoming
from scheduling.tzdata_info import tzdata_version


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
        return refuse(
            "scheduling preview",
            f"{INVALID_JSON}: CADENCE_JSON is not JSON ({exc.msg} at column {exc.colno}): "
            f"{shown(args.cadence)}",
        )
    except RecursionError:  # nested past the parser's own limit
        return refuse(
            "scheduling preview", f"{INVALID_JSON}: CADENCE_JSON nests too deeply to read"
        )
    if args.count < 1 or args.count > 1000:
        return refuse(
            "scheduling preview",
            f"{INVALID_ARGUMENT}: --count must be within 1..1000, got {args.count}",
        )
    try:
        cadence = parse_cadence(payload)
    except SchedulingError as exc:
        return refuse_error(
            "scheduling preview", exc, payload if isinstance(payload, dict) else None
        )
    start = args.start
    if start is None:
        # The CLI is an edge: the one place here allowed to read the system clock.
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
