"""The planner's choice for the product's own queries (gate.schedule.persistence_schema).

An index named right proves nothing if the query it exists for cannot use it (a
partial predicate the query does not imply, a column order that cannot serve the
ORDER BY). ``explained`` asks PostgreSQL for the plan of each statement the product's
repository code actually sends, with its own parameters, on its own connection right
before it runs (same role, same row-level-security settings, same transaction), with
``enable_seqscan`` and ``enable_sort`` off: sequential scans and sorts become last
resorts, so the plan names an index exactly when one can serve the query at all, and
sorts only when no index can deliver the order. ``index_scans`` lists the
(relation, index, node type) of every index access in a plan; ``sorts`` its Sort nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

INDEX_NODES = ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
# Sequential scans and sorts become last resorts (a cost penalty, never a refusal): on
# the few rows of a check, an index that *can* serve the filter, or the order, is then
# the plan's choice, whatever the row counts would make cheapest.
INSTRUMENT_OFF = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_sort = off")
INSTRUMENT_ON = ("SET LOCAL enable_seqscan = on", "SET LOCAL enable_sort = on")


@dataclass(frozen=True)
class Explained:
    sql: str
    plan: dict[str, Any]


@contextmanager
def explained(engine: AsyncEngine, table: str) -> Iterator[list[Explained]]:
    """While the block runs, every SELECT ``engine`` sends that reads ``table`` is first
    EXPLAINed (not executed twice) on the same connection, in the same transaction,
    with ``INSTRUMENT_OFF``; the statement itself then runs with the settings back on."""
    seen: list[Explained] = []
    busy = False

    def explain(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        nonlocal busy
        if busy or not reads(statement, table):
            return
        busy = True
        try:
            for setting in INSTRUMENT_OFF:
                conn.exec_driver_sql(setting)
            value = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters)
            document = value.scalar_one()
            for setting in INSTRUMENT_ON:
                conn.exec_driver_sql(setting)
        finally:
            busy = False
        document = json.loads(document) if isinstance(document, str) else document
        seen.append(Explained(statement, document[0]["Plan"]))

    event.listen(engine.sync_engine, "before_cursor_execute", explain)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", explain)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def index_scans(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(relation, index, node type) of every index access; for a bitmap scan the
    relation is the one its Bitmap Heap Scan parent reads."""
    found: list[tuple[str, str, str]] = []

    def walk(node: dict[str, Any], relation: str) -> None:
        relation = node.get("Relation Name", relation)
        if node["Node Type"] in INDEX_NODES:
            found.append((relation, node["Index Name"], node["Node Type"]))
        for child in node.get("Plans", []):
            walk(child, relation)

    walk(plan, "")
    return found


def sequential_scans(plan: dict[str, Any]) -> list[str]:
    return [n["Relation Name"] for n in _nodes(plan) if n["Node Type"] == "Seq Scan"]


def sorts(plan: dict[str, Any]) -> int:
    return sum(n["Node Type"] in ("Sort", "Incremental Sort") for n in _nodes(plan))


def reads(statement: str, table: str) -> bool:
    """A SELECT whose FROM names ``table``."""
    sql = statement.lstrip().upper()
    return sql.startswith(("SELECT", "WITH")) and f"FROM {table.upper()}" in sql
