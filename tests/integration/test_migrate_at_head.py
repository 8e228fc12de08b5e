"""``scheduling migrate`` on a database already at the head runs no migration and
imports no Alembic (ADR 2751); on an empty database, or one behind the head, it
upgrades through Alembic as before. Each run is a fresh interpreter, so the probe sees
exactly what the command imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scheduling.testing import current_revision, head_revision, upgrade_to

pytestmark = pytest.mark.postgres

PROBE = """
import json, sys
from scheduling.cli import main
status = main(["migrate", "--url", sys.argv[1]])
print(json.dumps({"status": status, "alembic": "alembic" in sys.modules}))
"""


def migrate(url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"database at migration head {head_revision()}" in done.stdout
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


async def test_an_empty_database_is_upgraded_then_a_second_run_skips_alembic(
    pg_empty_url: str,
) -> None:
    assert migrate(pg_empty_url) == {"status": 0, "alembic": True}
    assert await current_revision(pg_empty_url) == head_revision()
    assert migrate(pg_empty_url) == {"status": 0, "alembic": False}
    assert await current_revision(pg_empty_url) == head_revision()


async def test_a_database_one_revision_behind_is_upgraded(pg_empty_url: str) -> None:
    """The test of the test: a fast path that took any migrated database for one at the
    head would leave this one behind."""
    await upgrade_to(pg_empty_url, "0008_deployment_keys")
    assert migrate(pg_empty_url) == {"status": 0, "alembic": True}
    assert await current_revision(pg_empty_url) == head_revision()
