"""The demonstration, independent of the scheduling code: read-then-insert.

Two workers each run ``BEGIN; SELECT count(*) ... WHERE k = 'job-1'; INSERT if none;
COMMIT`` under READ COMMITTED. Without a unique key, the interleaving where both read
before either commits inserts the key twice (and both claims report "inserted", which
no sequential order explains: the linearizability checker says so too); with the key,
the second INSERT blocks on the first transaction (the interleaver sees it in
``pg_blocking_pids``) and then fails with a unique violation the worker reports as
"exists".
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from simulation.engine.checkers.linearizable import check_linearizable_per_key
from simulation.engine.checkers.violation import Violation
from simulation.engine.scenario import (
    ExecutionView,
    Footprint,
    Scenario,
    ScenarioWorld,
    WorkerContext,
)
from simulation.scenarios import register

KEY = "job-1"
READ = "demo.read"
INSERTED = "demo.inserted"


def _setup(unique: bool) -> object:
    async def setup(world: ScenarioWorld) -> None:
        conn = await world.connect()
        constraint = " UNIQUE" if unique else ""
        await conn.execute(
            "DROP TABLE IF EXISTS demo_items; "
            f"CREATE TABLE demo_items (k text NOT NULL{constraint}, owner text NOT NULL)"
        )
        await conn.close()

    return setup


async def claim(ctx: WorkerContext) -> None:
    """Insert the key unless a row for it exists (the racy pattern under test)."""
    conn = await ctx.connect()
    op = ctx.history.invoke("claim", key=KEY)
    try:
        async with conn.transaction():
            count = await conn.fetchval("SELECT count(*) FROM demo_items WHERE k = $1", KEY)
            await ctx.probe.step(READ)
            if count == 0:
                await conn.execute(
                    "INSERT INTO demo_items (k, owner) VALUES ($1, $2)", KEY, ctx.name
                )
                await ctx.probe.step(INSERTED)
    except asyncpg.UniqueViolationError:
        op.ok("exists")
        return
    op.ok("inserted" if count == 0 else "exists")


@dataclass(frozen=True)
class ClaimModel:
    """Sequential spec of ``claim``: the first returns "inserted", later ones "exists"."""

    def initial(self) -> Hashable:
        return False

    def apply(self, state: Hashable, op: str, args: Mapping[str, Any]) -> tuple[Hashable, Any]:
        return True, ("exists" if state else "inserted")


async def check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    conn = await world.connect()
    rows = await conn.fetch(
        "SELECT k, count(*) AS n, array_agg(owner ORDER BY owner) AS owners "
        "FROM demo_items GROUP BY k ORDER BY k"
    )
    await conn.close()
    found = [
        Violation(
            "demo.one_row_per_key",
            f"key {r['k']} inserted {r['n']} times (by {', '.join(r['owners'])})",
            {"key": r["k"], "owners": list(r["owners"])},
        )
        for r in rows
        if r["n"] != 1
    ]
    if not rows:
        found.append(Violation("demo.one_row_per_key", f"key {KEY} never inserted"))
    found += check_linearizable_per_key(
        world.history, lambda _key: ClaimModel(), key=lambda op: op.args["key"]
    )
    return found


# Footprints: the code after ``sim.start`` BEGINs and reads; after ``demo.read`` it
# INSERTs (or commits a read-only transaction); after ``demo.inserted`` it COMMITs.
FOOTPRINTS = {
    "sim.start": Footprint.of(reads=["demo_items"]),
    READ: Footprint.of(reads=["demo_items"], writes=["demo_items"]),
    INSERTED: Footprint.of(writes=["demo_items"]),
}

DUPLICATE = register(
    Scenario(
        name="demo.read_then_insert",
        summary="two workers read-then-insert one key, no unique key: finds the duplicate",
        setup=_setup(unique=False),  # type: ignore[arg-type]
        workers={"a": claim, "b": claim},
        check=check,
        steps=(READ, INSERTED),
        footprints=FOOTPRINTS,
    )
)

UNIQUE = register(
    Scenario(
        name="demo.read_then_insert_unique",
        summary="the same race with a unique key: every interleaving keeps one row",
        setup=_setup(unique=True),  # type: ignore[arg-type]
        workers={"a": claim, "b": claim},
        check=check,
        steps=(READ, INSERTED),
        footprints=FOOTPRINTS,
    )
)
