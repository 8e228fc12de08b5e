"""Catalog inspection: does the live schema encode the spec's trust boundaries?

Every check returns a list of human-readable problems (empty means sound), so a gate
can assert emptiness and a test-of-the-test can break one object in a scratch
database and assert the matching problem is reported. The functions take a
synchronous SQLAlchemy connection (use ``AsyncConnection.run_sync``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import ForeignKeyConstraint, Index, MetaData, Table, UniqueConstraint, text
from sqlalchemy.engine import Connection

from scheduling.adapters.postgres.migrations import include_object
from scheduling.adapters.postgres.roles import RUN_CLAIM_COLUMNS
from scheduling.adapters.postgres.tables import (
    ADMISSION_WINDOW_INDEXES,
    DISPOSITIONS,
    NAMING_CONVENTION,
    SUBSTRATE_TABLES,
    metadata,
)

# Tables whose rows belong to a tenant: row-level security must be enabled AND forced.
TENANT_TABLES = (
    "principals",
    "sessions",
    "runs",
    "session_events",
    "run_checkpoints",
    "process_events",
    "schedules",
    "schedule_revisions",
    "schedule_occurrences",
    "schedule_idempotency_keys",
    "tool_invocations",
    "tool_approval_requests",
    "tool_approval_decisions",
    "schedule_outbox",
)

# The indexes the spec names, by what they serve: (table, name, columns-as-in-catalog, where).
REQUIRED_INDEXES = (
    ("schedules", "ix_schedules_state_next_fire_at", "state, next_fire_at", None),
    (
        "schedules",
        "ix_schedules_tenant_id_principal_id_updated_at_id",
        "tenant_id, principal_id, updated_at, id",
        None,
    ),
    (
        "schedules",
        "ix_schedules_terminal_retention",
        "tenant_id, updated_at, id",
        "COMPLETED",
    ),
    (
        "schedule_occurrences",
        "ix_schedule_occurrences_history",
        "schedule_id, nominal_fire_at DESC",
        None,
    ),
    ("schedule_occurrences", "uq_schedule_occurrences_run_id", "run_id", "run_id IS NOT NULL"),
)


def _rows(conn: Connection, sql: str, **params: Any) -> list[Any]:
    return list(conn.execute(text(sql), params).all())


def metadata_problems(conn: Connection, tables: Iterable[Table] | None = None) -> list[str]:
    """Keys, uniqueness, columns, FK options and indexes of the metadata exist as declared."""
    problems: list[str] = []
    for table in tables if tables is not None else metadata.sorted_tables:
        problems += _table_problems(conn, table)
    return problems


def _table_problems(conn: Connection, table: Table) -> list[str]:
    name = table.name
    exists = _rows(conn, "SELECT 1 FROM pg_class WHERE oid = to_regclass(:t)", t=name)
    if not exists:
        return [f"{name}: table missing"]
    problems: list[str] = []
    columns = {
        r.attname: (r.attnotnull, r.type)
        for r in _rows(
            conn,
            "SELECT attname, attnotnull, format_type(atttypid, atttypmod) AS type"
            " FROM pg_attribute WHERE attrelid = to_regclass(:t) AND attnum > 0"
            " AND NOT attisdropped",
            t=name,
        )
    }
    for column in table.columns:
        if column.name not in columns:
            problems.append(f"{name}.{column.name}: column missing")
        elif columns[column.name][0] != (not column.nullable):
            problems.append(f"{name}.{column.name}: nullability differs from the metadata")
    constraints = {
        r.conname: r
        for r in _rows(
            conn,
            "SELECT conname, contype::text AS contype, condeferrable, condeferred,"
            " confdeltype::text AS confdeltype,"
            " (SELECT array_agg(a.attname ORDER BY k.i) FROM unnest(conkey) WITH ORDINALITY"
            "   AS k(n, i) JOIN pg_attribute a ON a.attrelid = conrelid AND a.attnum = k.n)"
            "   AS cols,"
            " confrelid::regclass::text AS referred"
            " FROM pg_constraint WHERE conrelid = to_regclass(:t)",
            t=name,
        )
    }
    pk = table.primary_key
    pk_row = constraints.get(str(pk.name))
    if pk_row is None or pk_row.contype != "p":
        problems.append(f"{name}: primary key {pk.name} missing")
    elif list(pk_row.cols) != [c.name for c in pk.columns]:
        problems.append(f"{name}: primary key columns differ")
    for constraint in table.constraints:
        cname = str(constraint.name)
        row = constraints.get(cname)
        if isinstance(constraint, ForeignKeyConstraint):
            if row is None or row.contype != "f":
                problems.append(f"{name}: foreign key {cname} missing")
                continue
            if list(row.cols) != list(constraint.column_keys):
                problems.append(f"{name}: foreign key {cname} columns differ")
            if row.referred != constraint.referred_table.name:
                problems.append(f"{name}: foreign key {cname} refers to {row.referred}")
            want_delete = {"CASCADE": "c", "SET NULL": "n"}.get(constraint.ondelete or "", "a")
            if row.confdeltype != want_delete:
                problems.append(f"{name}: foreign key {cname} ON DELETE action differs")
            deferred = constraint.initially == "DEFERRED"
            if (
                bool(row.condeferrable) != bool(constraint.deferrable)
                or bool(row.condeferred) != deferred
            ):
                problems.append(f"{name}: foreign key {cname} deferrability differs")
        elif isinstance(constraint, UniqueConstraint):
            if row is None or row.contype != "u":
                problems.append(f"{name}: unique constraint {cname} missing")
            elif list(row.cols) != [c.name for c in constraint.columns]:
                problems.append(f"{name}: unique constraint {cname} columns differ")
        elif constraint.__visit_name__ == "check_constraint" and (
            row is None or row.contype != "c"
        ):
            problems.append(f"{name}: check constraint {cname} missing")
    indexes = {
        r.name: r
        for r in _rows(
            conn,
            "SELECT c.relname AS name, i.indisunique AS is_unique,"
            " pg_get_indexdef(i.indexrelid) AS definition"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = to_regclass(:t)",
            t=name,
        )
    }
    for index in table.indexes:
        problems += _index_problems(name, index, indexes)
    return problems


def _index_problems(table: str, index: Index, live: dict[str, Any]) -> list[str]:
    row = live.get(str(index.name))
    if row is None:
        return [f"{table}: index {index.name} missing"]
    problems = []
    if bool(row.is_unique) != bool(index.unique):
        problems.append(f"{table}: index {index.name} uniqueness differs")
    where = index.dialect_options["postgresql"].get("where")
    if (where is not None) != (" WHERE " in row.definition):
        problems.append(f"{table}: index {index.name} partial predicate differs")
    return problems


def spec_problems(conn: Connection) -> list[str]:
    """The spec's named guarantees, independent of the metadata."""
    problems: list[str] = []
    uq = _rows(
        conn,
        "SELECT 1 FROM pg_constraint c WHERE conrelid = 'schedule_occurrences'::regclass"
        " AND contype = 'u' AND (SELECT array_agg(a.attname ORDER BY k.i) FROM unnest(conkey)"
        " WITH ORDINALITY AS k(n, i) JOIN pg_attribute a ON a.attrelid = conrelid"
        " AND a.attnum = k.n) = ARRAY['schedule_id', 'nominal_fire_at']::name[]",
    )
    if not uq:
        problems.append("schedule_occurrences: UNIQUE (schedule_id, nominal_fire_at) missing")
    for column, parent in (("session_id", "sessions"), ("run_id", "runs")):
        fk = _rows(
            conn,
            "SELECT condeferrable, condeferred, confdeltype::text AS confdeltype FROM pg_constraint"
            " WHERE conrelid = 'schedule_occurrences'::regclass AND contype = 'f'"
            " AND confrelid = to_regclass(:p) AND conkey = ARRAY[(SELECT attnum FROM"
            " pg_attribute WHERE attrelid = 'schedule_occurrences'::regclass"
            " AND attname = :c)]::int2[]",
            p=parent,
            c=column,
        )
        if not fk:
            problems.append(f"schedule_occurrences.{column}: foreign key to {parent} missing")
        elif not (fk[0].condeferrable and fk[0].condeferred and fk[0].confdeltype == "n"):
            problems.append(
                f"schedule_occurrences.{column}: link must be DEFERRABLE INITIALLY DEFERRED"
                " ON DELETE SET NULL"
            )
    revision_fk = _rows(
        conn,
        "SELECT 1 FROM pg_constraint WHERE conrelid = 'schedule_occurrences'::regclass"
        " AND contype = 'f' AND confrelid = 'schedule_revisions'::regclass",
    )
    if not revision_fk:
        problems.append("schedule_occurrences: no reference to its immutable revision")
    trigger = _rows(
        conn,
        "SELECT 1 FROM pg_trigger WHERE tgrelid = 'schedule_revisions'::regclass"
        " AND NOT tgisinternal AND tgenabled <> 'D' AND (tgtype & 16) <> 0",
    )
    if not trigger:
        problems.append("schedule_revisions: no trigger rejects UPDATE (revisions are immutable)")
    for table, name, columns, where in REQUIRED_INDEXES:
        problems += _required_index(conn, table, name, columns, where)
    return problems


def _required_index(
    conn: Connection, table: str, name: str, columns: str, where: str | None
) -> list[str]:
    rows = _rows(
        conn,
        "SELECT pg_get_indexdef(indexrelid) AS definition FROM pg_index"
        " WHERE indrelid = to_regclass(:t)",
        t=table,
    )
    for row in rows:
        definition: str = row.definition
        partial = " WHERE " in definition
        same_where = (where is None and not partial) or (where is not None and where in definition)
        if f"({columns})" in definition and same_where:
            return []
    return [f"{table}: no index on ({columns}) for {name}"]


def rls_problems(conn: Connection, api_role: str) -> list[str]:
    """Row-level security enabled and forced on every tenant table, with an API policy."""
    problems: list[str] = []
    for table in TENANT_TABLES:
        rows = _rows(
            conn,
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = to_regclass(:t)",
            t=table,
        )
        if not rows:
            problems.append(f"{table}: table missing")
            continue
        if not rows[0].relrowsecurity:
            problems.append(f"{table}: row-level security not enabled")
        if not rows[0].relforcerowsecurity:
            problems.append(f"{table}: row-level security not forced")
        policies = _rows(
            conn,
            "SELECT policyname, roles::text[] AS roles, qual FROM pg_policies"
            " WHERE schemaname = current_schema() AND tablename = :t",
            t=table,
        )
        api_policies = [p for p in policies if api_role in p.roles]
        if not api_policies:
            problems.append(f"{table}: no row-level policy for {api_role}")
        for policy in policies:
            if "public" in policy.roles:
                problems.append(f"{table}: policy {policy.policyname} applies to PUBLIC")
            if api_role in policy.roles and (policy.qual or "").strip() in ("", "true"):
                problems.append(f"{table}: policy {policy.policyname} lets {api_role} see all")
    return problems


def occurrence_form_legal(
    disposition: str,
    session: bool,
    run: bool,
    erased: bool,
    materialized_at: bool,
    authority: bool,
    reason: bool,
) -> bool:
    """Whether an occurrence with these fields present is legal (the spec's and the
    domain value's rules; tests/integration/test_persistence_link_rules.py ties the two)."""
    if disposition == "MATERIALIZED":
        live = session and run and not erased
        gone = not session and not run and erased
        return materialized_at and authority and not reason and (live or gone)
    return not session and not run and not erased and not materialized_at and reason


def link_rule_problems(conn: Connection) -> list[str]:
    """Evaluate the occurrence table's CHECKs over every nullable-field combination.

    The database must accept exactly the legal forms of the spec and the domain value:
    MATERIALIZED live-linked or explicitly erased (nothing in between), with its
    materialization time and authority version and no reason code; every other
    disposition unlinked, unerased, unmaterialized and with a reason code.
    """
    checks = [
        r.definition
        for r in _rows(
            conn,
            "SELECT pg_get_expr(conbin, conrelid) AS definition FROM pg_constraint"
            " WHERE conrelid = 'schedule_occurrences'::regclass AND contype = 'c'",
        )
    ]
    combos: list[tuple[str, bool, bool, bool, bool, bool, bool]] = [
        (d, s, r, e, m, a, c)
        for d in DISPOSITIONS
        for s, r, e, m, a, c in itertools.product((False, True), repeat=6)
    ]
    values = ", ".join(
        f"('{d}', {_u(s)}, {_u(r)}, {_t(e)}, {_t(m)}, {_s(a)}, {_s(c)}, {_t(True)})"
        for d, s, r, e, m, a, c in combos
    )
    # A CHECK passes unless it is false (NULL passes), exactly as PostgreSQL applies it.
    verdict = " AND ".join(f"(({c}) IS NOT FALSE)" for c in checks) or "true"
    columns = "disposition, session_id, run_id, links_erased_at, materialized_at,"
    columns += " authority_version, reason_code, nominal_fire_at"
    sql = _verdict_sql(verdict, values, columns)
    accepted = [bool(r.ok) for r in _rows(conn, sql)]
    problems = []
    for combo, ok in zip(combos, accepted, strict=True):
        if ok != occurrence_form_legal(*combo):
            verb = "accepts" if ok else "rejects"
            d, s, r, e, m, a, c = combo
            problems.append(
                f"schedule_occurrences {verb} {d} with session={s} run={r} erased={e}"
                f" materialized_at={m} authority_version={a} reason_code={c}"
            )
    return problems


def _verdict_sql(verdict: str, values: str, columns: str) -> str:
    # Catalog expressions and literals built in this module; no outside input.
    return " ".join(["SELECT", verdict, "AS ok FROM (VALUES", values, ") AS v(", columns, ")"])


def _u(present: bool) -> str:
    return "'00000000-0000-0000-0000-000000000001'::uuid" if present else "NULL::uuid"


def _t(present: bool) -> str:
    return "'2026-01-01T00:00:00Z'::timestamptz" if present else "NULL::timestamptz"


def _s(present: bool) -> str:
    return "'x'::text" if present else "NULL::text"


def pause_rule_problems(conn: Connection) -> list[str]:
    """The schedules CHECKs accept exactly: PAUSED with user/failure_limit, else no reason."""
    checks = [
        r.definition
        for r in _rows(
            conn,
            "SELECT pg_get_expr(conbin, conrelid) AS definition FROM pg_constraint"
            " WHERE conrelid = 'schedules'::regclass AND contype = 'c'",
        )
    ]
    states = ("ACTIVE", "PAUSED", "COMPLETED", "CANCELLED", "BOGUS")
    reasons = (None, "user", "failure_limit", "other")
    verdict = " AND ".join(f"(({c}) IS NOT FALSE)" for c in checks) or "true"
    problems = []
    for state, reason in itertools.product(states, reasons):
        literal = "NULL::text" if reason is None else f"'{reason}'::text"
        row = f"('{state}'::text, {literal}, 1, 0)"
        sql = _verdict_sql(
            verdict, row, "state, pause_reason, current_revision, consecutive_failures"
        )
        ok = bool(_rows(conn, sql)[0].ok)
        legal = state != "BOGUS" and (
            reason in ("user", "failure_limit") if state == "PAUSED" else reason is None
        )
        if ok != legal:
            problems.append(
                f"schedules {'accepts' if ok else 'rejects'} state={state} pause_reason={reason}"
            )
    return problems


def schema_problems(conn: Connection, api_role: str) -> list[str]:
    """Everything ``gate.schedule.persistence_schema`` requires."""
    return (
        metadata_problems(conn)
        + spec_problems(conn)
        + link_rule_problems(conn)
        + pause_rule_problems(conn)
        + rls_problems(conn, api_role)
    )


def substrate_metadata() -> MetaData:
    """The metadata of the predecessor revision: the substrate tables only."""
    later = {index.name for index in ADMISSION_WINDOW_INDEXES}
    target = MetaData(naming_convention=NAMING_CONVENTION)
    for table in SUBSTRATE_TABLES:
        copy = table.to_metadata(target)
        # Indexes a later revision adds to a substrate table are not the predecessor's.
        copy.indexes = {index for index in copy.indexes if index.name not in later}
    # Columns a later revision adds to a substrate table (0006: the claim facts) are
    # left out of the comparison (``schema_diff`` reads this; a table's columns cannot
    # be removed through SQLAlchemy's public API).
    target.info[_LEFT_OUT] = frozenset(
        (table, column) for table, columns in LATER_COLUMNS.items() for column in columns
    )
    return target


LATER_COLUMNS: dict[str, tuple[str, ...]] = {"runs": RUN_CLAIM_COLUMNS}
_LEFT_OUT = "scheduling.left_out_columns"


def schema_diff(conn: Connection, target: MetaData | None = None) -> list[str]:
    """What Alembic autogenerate would change to make the database equal ``target``
    (default: the product metadata). Empty means the migrated schema equals it."""
    chosen = target if target is not None else metadata
    left_out: frozenset[tuple[str, str]] = chosen.info.get(_LEFT_OUT, frozenset())

    def included(obj: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        table = getattr(obj, "table", None) if type_ == "column" else None
        if table is not None and (table.name, name) in left_out:
            return False
        return include_object(obj, name, type_, reflected, other)

    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "compare_server_default": True,
            "include_object": included,
        },
    )
    return [repr(d) for d in compare_metadata(context, chosen)]
