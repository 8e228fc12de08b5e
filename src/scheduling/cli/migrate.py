"""``scheduling migrate [--url URL]``: upgrade the database to the migration head."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

# Read when the command runs: the composition root imports the migration runner (Alembic)
# on first access, so ``migrate --help`` does not, nor a run at the head (issue 26).
from scheduling import bootstrap
from scheduling.cli.edge import load_settings
from scheduling.cli.registry import command


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=None, help="migration login URL (default: AGENT_SCHEDULE_DATABASE_URL)"
    )


@command("migrate", "upgrade the database schema to the migration head", _configure)
def migrate(args: argparse.Namespace, out: TextIO) -> int:
    url = args.url
    if url is None:
        settings = load_settings()
        if settings is None:
            return 1
        url = settings.database_url
    if not url:
        print("error: give --url or set AGENT_SCHEDULE_DATABASE_URL", file=sys.stderr)
        return 2

    async def run() -> str | None:
        # At the head already (every deploy after the first): nothing to run, so the
        # migration runner (Alembic, ~0.1 s of imports) is never loaded.
        if await bootstrap.at_head(url):
            return bootstrap.HEAD_REVISION
        await bootstrap.upgrade_to_head(url)
        return await bootstrap.current_revision(url)

    head = asyncio.run(run())
    print(f"database at migration head {head}", file=out)
    return 0
