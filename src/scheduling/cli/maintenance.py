"""``scheduling purge [--tenant T ...]`` (one retention sweep) and
``scheduling repair-next-fire SCHEDULE_ID`` (check and repair one ``next_fire_at``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from typing import TextIO
from uuid import UUID

# Read when the command runs: the composition root imports the maintenance role (its
# storage and repositories) on first access, so ``purge --help`` does not (issue 26).
from scheduling import bootstrap
from scheduling.cli.edge import load_settings, report, system_edge
from scheduling.cli.registry import command
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import SchedulingError


def _configure_purge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tenant",
        action="append",
        default=None,
        help="a tenant to sweep (repeatable; default: AGENT_SCHEDULE_TENANTS)",
    )


@command("purge", "delete one batch of expired terminal schedules per tenant", _configure_purge)
def purge(args: argparse.Namespace, out: TextIO) -> int:
    settings = load_settings()
    if settings is None:
        return 1
    if args.tenant:
        settings = settings.model_copy(update={"tenants": tuple(args.tenant)})
    if not settings.tenants:
        print("error: give --tenant or set AGENT_SCHEDULE_TENANTS", file=sys.stderr)
        return 2
    clock, ids = system_edge()

    async def run() -> dict[str, int]:
        role = bootstrap.build_maintenance(settings, clock=clock, ids=ids)
        try:
            return await role.purge_once()
        finally:
            await role.close()

    try:
        deleted = asyncio.run(run())
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    for tenant, count in deleted.items():
        print(f"{tenant}: {count} terminal schedule(s) purged", file=out)
    return 0


def _schedule_id(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {text!r}") from None


def _configure_repair(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "schedule_id", metavar="SCHEDULE_ID", type=_schedule_id, help="the schedule's UUID"
    )


def _instant(value: datetime | None) -> str:
    return "none" if value is None else format_instant(value)


@command("repair-next-fire", "check one schedule's next_fire_at and repair it", _configure_repair)
def repair_next_fire(args: argparse.Namespace, out: TextIO) -> int:
    settings = load_settings()
    if settings is None:
        return 1
    clock, ids = system_edge()

    async def run() -> str:
        role = bootstrap.build_maintenance(settings, clock=clock, ids=ids)
        try:
            repair = await role.repair_next_fire(args.schedule_id)
        finally:
            await role.close()
        verdict = "repaired" if repair.repaired else "consistent"
        return f"{verdict}: {_instant(repair.previous)} -> {_instant(repair.current)}"

    try:
        print(asyncio.run(run()), file=out)
    except bootstrap.StartupRefused as exc:
        report(exc.problems)
        return 1
    except SchedulingError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    return 0
