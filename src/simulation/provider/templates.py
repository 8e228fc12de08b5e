"""The migrated template database every test, gate, scenario and benchmark clones."""

from __future__ import annotations

import hashlib
from pathlib import Path

from scheduling.adapters.postgres import migrations
from scheduling.adapters.postgres.migrations import upgrade_to_head
from simulation.provider._database_server import DatabaseServer


def migrated_template_key() -> str:
    """A template key that changes whenever the migration chain changes.

    A server from ``SCHEDULING_DATABASE_URL`` keeps its templates between runs, so
    the key carries a digest of every file of the migration chain.
    """
    digest = hashlib.sha256()
    files = [Path(migrations.__file__)]
    files += sorted(
        p
        for p in migrations.migrations_dir().rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "migrated-" + digest.hexdigest()[:16]


async def build_migrated(url: str) -> None:
    """Migrate the template at ``url`` to the head of the chain."""
    await upgrade_to_head(url)


def migrated_template(server: DatabaseServer) -> str:
    """The name of ``server``'s template migrated to head (built once per server)."""
    return server.ensure_template(migrated_template_key(), build_migrated)
