"""Release validation of the schedule worker's database login.

``scheduler_release_problems(url)`` connects AS the scheduler login and verifies that
it holds exactly the privileges the materializer needs (the allowlist below): read the
schema head, read definitions and authority, insert the occurrence, session, seed
events, run and checkpoint, append process events, and advance the schedule's
control fields. Anything more (UPDATE on an event log, DELETE anywhere, a column it
does not advance), superuser or BYPASSRLS authority, or membership in another
deployment role is a problem. An empty list means the login may be released.

``connection_pooling(url)`` finds out whether ``url`` reaches PostgreSQL through a
pooler that hands out a server connection per transaction (pgbouncer's
``transaction`` or ``statement`` pool mode): the product's hot path uses
protocol-level prepared statements kept for the life of a connection and the wake
listener holds a LISTEN session, and neither survives such pooling (ADR 2230).
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import AsyncExitStack
from typing import Any, Literal

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.adapters.postgres.roles import (
    RUN_CLAIM_COLUMNS,
    RUN_MUTABLE_COLUMNS,
    RoleNames,
    role_names,
)
from scheduling.adapters.postgres.schema_head import HEAD_REVISION, recorded_revisions
from scheduling.adapters.postgres.urls import named_engine, to_asyncpg_url
from scheduling.instance import server_settings

RELEASE_CHECK = "release-check"
"""The role in the ``application_name`` of every connection this check opens (ADR 2270):
an operator sees ``release-check@<instance id>`` in ``pg_stat_activity``."""

TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
COLUMN_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "REFERENCES")

# Table privileges of the scheduler role; every table not listed gets none.
SCHEDULER_TABLES: dict[str, frozenset[str]] = {
    "alembic_version": frozenset({"SELECT"}),
    "principals": frozenset({"SELECT"}),
    "agent_versions": frozenset({"SELECT"}),
    "agent_active_versions": frozenset({"SELECT"}),
    "schedules": frozenset({"SELECT"}),
    "schedule_revisions": frozenset({"SELECT"}),
    "schedule_occurrences": frozenset({"SELECT", "INSERT"}),
    "sessions": frozenset({"SELECT", "INSERT"}),
    "session_events": frozenset({"SELECT", "INSERT"}),
    "runs": frozenset({"SELECT", "INSERT"}),
    "run_checkpoints": frozenset({"SELECT", "INSERT"}),
    "process_events": frozenset({"SELECT", "INSERT"}),
    # The outcome outbox: appended with the decision or the accounting, then drained.
    "schedule_outbox": frozenset({"SELECT", "INSERT"}),
}
# Column-level UPDATE: the control fields a materialization or accounting advances.
SCHEDULER_COLUMN_UPDATES: dict[str, frozenset[str]] = {
    "schedules": frozenset(
        {"state", "pause_reason", "next_fire_at", "consecutive_failures", "updated_at"}
    ),
    "schedule_outbox": frozenset({"delivered_at"}),
}
# Never UPDATE on an event log: it could take the row lock that serializes session
# history projection with erasure (spec "Configuration and deployment").
EVENT_TABLES = ("session_events", "process_events")

# Table privileges of the run-worker role: claim, heartbeat, checkpoint, finish.
RUN_WORKER_TABLES: dict[str, frozenset[str]] = {
    "alembic_version": frozenset({"SELECT"}),
    "agent_versions": frozenset({"SELECT"}),
    "agent_active_versions": frozenset({"SELECT"}),
    "sessions": frozenset({"SELECT"}),
    "session_events": frozenset({"SELECT", "INSERT"}),
    "runs": frozenset({"SELECT"}),
    "run_checkpoints": frozenset({"SELECT", "INSERT"}),
}
RUN_WORKER_COLUMN_UPDATES: dict[str, frozenset[str]] = {
    "runs": frozenset(RUN_MUTABLE_COLUMNS) | frozenset(RUN_CLAIM_COLUMNS),
}


async def scheduler_release_problems(
    url: str, roles: RoleNames | None = None, *, expected_head: str | None = None
) -> list[str]:
    """Connect as the login in ``url`` and list every deviation from the allowlist."""
    roles = roles or role_names()
    return await _login_problems(
        url, roles, roles.scheduler, SCHEDULER_TABLES, SCHEDULER_COLUMN_UPDATES, expected_head
    )


async def run_worker_release_problems(
    url: str, roles: RoleNames | None = None, *, expected_head: str | None = None
) -> list[str]:
    """The same check for the run-worker login against its own allowlist."""
    roles = roles or role_names()
    return await _login_problems(
        url, roles, roles.run_worker, RUN_WORKER_TABLES, RUN_WORKER_COLUMN_UPDATES, expected_head
    )


async def _login_problems(
    url: str,
    roles: RoleNames,
    own_role: str,
    tables: dict[str, frozenset[str]],
    column_updates: dict[str, frozenset[str]],
    expected_head: str | None,
) -> list[str]:
    engine = named_engine(url, RELEASE_CHECK)
    try:
        async with engine.connect() as conn:
            problems = await _authority_problems(conn, roles, own_role)
            problems += await _privilege_problems(conn, tables, column_updates)
            problems += await _head_problems(conn, expected_head or HEAD_REVISION)
            await conn.rollback()
            return problems
    finally:
        await engine.dispose()


async def _rows(conn: AsyncConnection, sql: str, **params: Any) -> list[Any]:
    return list((await conn.execute(text(sql), params)).all())


async def _authority_problems(conn: AsyncConnection, roles: RoleNames, own_role: str) -> list[str]:
    problems = []
    me = (
        await _rows(
            conn,
            "SELECT current_user AS name, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb"
            " FROM pg_roles WHERE rolname = current_user",
        )
    )[0]
    if me.rolsuper:
        problems.append(f"{me.name} is a superuser")
    if me.rolbypassrls:
        problems.append(f"{me.name} has BYPASSRLS")
    if me.rolcreaterole or me.rolcreatedb:
        problems.append(f"{me.name} may create roles or databases")
    for role, wanted in ((name, name == own_role) for name in roles.every()):
        member = await _rows(
            conn,
            "SELECT pg_has_role(current_user, oid, 'USAGE') AS m FROM pg_roles WHERE rolname = :r",
            r=role,
        )
        has = bool(member and member[0].m)
        if has != wanted:
            problems.append(
                f"{me.name} {'lacks' if wanted else 'holds'} the privileges of role {role}"
            )
    # Superuser or BYPASSRLS inherited through any granted role is as bad as holding it.
    inherited = await _rows(
        conn,
        "SELECT rolname FROM pg_roles WHERE (rolsuper OR rolbypassrls)"
        " AND rolname <> current_user AND pg_has_role(current_user, oid, 'USAGE')",
    )
    problems += [f"{me.name} inherits superuser/BYPASSRLS from {r.rolname}" for r in inherited]
    return problems


async def _privilege_problems(
    conn: AsyncConnection,
    allowlist: dict[str, frozenset[str]],
    column_updates: dict[str, frozenset[str]],
) -> list[str]:
    problems = []
    tables = [
        r.relname
        for r in await _rows(
            conn,
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
            " AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1",
        )
    ]
    for table in tables:
        allowed = allowlist.get(table, frozenset())
        for privilege in TABLE_PRIVILEGES:
            held = (
                await _rows(conn, "SELECT has_table_privilege(:t, :p) AS h", t=table, p=privilege)
            )[0].h
            if held and privilege not in allowed:
                problems.append(f"{table}: holds {privilege} beyond the allowlist")
            if not held and privilege in allowed:
                problems.append(f"{table}: lacks {privilege} the role needs")
        for privilege in COLUMN_PRIVILEGES:
            if privilege in allowed:
                continue
            columns = {
                r.attname
                for r in await _rows(
                    conn,
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(:t)"
                    " AND attnum > 0 AND NOT attisdropped"
                    " AND has_column_privilege(:t, attname, :p)",
                    t=table,
                    p=privilege,
                )
            }
            wanted = (
                column_updates.get(table, frozenset()) if privilege == "UPDATE" else frozenset()
            )
            if columns - wanted:
                problems.append(f"{table}: holds column {privilege} on {sorted(columns - wanted)}")
            if wanted - columns:
                problems.append(f"{table}: lacks column {privilege} on {sorted(wanted - columns)}")
    missing = sorted(set(allowlist) - set(tables))
    problems += [f"{table}: missing" for table in missing]
    return problems


async def _head_problems(conn: AsyncConnection, expected_head: str) -> list[str]:
    try:
        heads = list(await recorded_revisions(conn))
    except Exception as exc:
        return [f"cannot read the schema head: {type(exc).__name__}"]
    if heads != [expected_head]:
        return [f"schema head is {heads}, expected [{expected_head!r}]"]
    return []


Pooling = Literal["session", "transaction", "statement"]
# Client connections that each hold a transaction open while the probe looks again.
POOLING_HOLDERS = 3
POOLING_TIMEOUT = 10.0
STATEMENT_POOLING_MARKERS = ("transaction blocks not allowed", "long transactions not allowed")


async def connection_pooling(url: str, *, holders: int = POOLING_HOLDERS) -> Pooling:
    """``session`` when every client connection of ``url`` keeps one server backend
    for its whole life (a direct connection, or a pooler in session mode);
    ``transaction`` when two client connections were served by one backend, or one
    client connection by two; ``statement`` when the pooler refuses a transaction block.

    The probe: connection A reads its ``pg_backend_pid()`` inside a transaction and
    commits; then, one at a time, up to ``holders`` other connections each open a
    transaction, read their backend pid and keep the transaction open, and A reads its
    pid again inside a new transaction. Without per-transaction pooling, A keeps its
    backend and no other open session can have it. With it, A's backend returns to
    the pool at each COMMIT: a holder is handed it (pgbouncer reuses the most recently
    released server first), or A's next transaction gets another backend because the
    holders occupy it. Only simple-query statements and an unnamed statement inside an
    explicit transaction are sent, so the probe itself works in every pool mode.
    """
    engine = create_async_engine(to_asyncpg_url(url), poolclass=NullPool)
    try:
        _, options = engine.dialect.create_connect_args(engine.url)
    finally:
        await engine.dispose()

    async def connect() -> Any:
        return await asyncpg.connect(
            **options,
            statement_cache_size=0,
            timeout=POOLING_TIMEOUT,
            server_settings=server_settings(RELEASE_CHECK),
        )

    async with AsyncExitStack() as stack:
        probe = await connect()
        stack.push_async_callback(probe.close, timeout=POOLING_TIMEOUT)
        try:
            first = await _backend_pid(probe, commit=True)
        except asyncpg.PostgresError as exc:
            if any(marker in str(exc) for marker in STATEMENT_POOLING_MARKERS):
                return "statement"
            raise
        for _ in range(holders):
            holder = await connect()
            stack.push_async_callback(holder.close, timeout=POOLING_TIMEOUT)
            if await _backend_pid(holder, commit=False) == first:
                return "transaction"
            if await _backend_pid(probe, commit=True) != first:
                return "transaction"
        return "session"


async def _backend_pid(conn: Any, *, commit: bool) -> int:
    await asyncio.wait_for(conn.execute("BEGIN"), POOLING_TIMEOUT)
    pid = int(await asyncio.wait_for(conn.fetchval("SELECT pg_backend_pid()"), POOLING_TIMEOUT))
    if commit:
        await asyncio.wait_for(conn.execute("COMMIT"), POOLING_TIMEOUT)
    return pid


async def pooling_problems(url: str) -> list[str]:
    """One problem when ``url`` is pooled per transaction or statement, else none."""
    mode = await connection_pooling(url)
    if mode == "session":
        return []
    return [
        f"the connection is pooled per {mode} (a pooler such as pgbouncer in {mode} mode):"
        " the scheduler and run workers keep prepared statements for a connection's life"
        " and the wake listener holds a LISTEN session; use session pooling or connect"
        " directly (docs/operations/pgbouncer.md)"
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m scheduling.adapters.postgres.release_check [URL]`` (default: the
    ``AGENT_SCHEDULE_SCHEDULER_DATABASE_URL`` environment variable). Exit 0 when clean."""
    args = sys.argv[1:] if argv is None else argv
    url = args[0] if args else os.environ.get("AGENT_SCHEDULE_SCHEDULER_DATABASE_URL", "")
    if not url:
        print("usage: release_check URL (a libpq URL of the scheduler login)", file=sys.stderr)
        return 2
    problems = asyncio.run(scheduler_release_problems(url))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not problems:
        print("scheduler login matches the release allowlist")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
