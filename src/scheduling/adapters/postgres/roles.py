"""Database roles of a deployment and the SQL helpers the migrations use to secure tables.

Roles are cluster-global while tests run many databases on one cluster in parallel,
so role creation is idempotent and tolerates a concurrent creator, downgrades never
drop a role, and every name carries a configurable prefix (``SCHEDULING_ROLE_PREFIX``,
default ``scheduling``). The roles are NOLOGIN groups: a deployment grants membership
to its login users (see docs/operations/roles.md).

Row-level security reads two transaction-local settings written by the unit of work
with ``set_config(name, value, true)``: ``scheduling.tenant_id`` and
``scheduling.principal_id``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from scheduling.ports.records import RUN_MUTABLE_FIELDS

ROLE_PREFIX_ENV = "SCHEDULING_ROLE_PREFIX"
DEFAULT_ROLE_PREFIX = "scheduling"
TENANT_SETTING = "scheduling.tenant_id"
PRINCIPAL_SETTING = "scheduling.principal_id"

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")

TENANT_MATCH = f"tenant_id = current_setting('{TENANT_SETTING}', true)"
PRINCIPAL_MATCH = f"{TENANT_MATCH} AND principal_id = current_setting('{PRINCIPAL_SETTING}', true)"


@dataclass(frozen=True)
class RoleNames:
    """The group roles of one deployment (``all()``: the four the first revision
    creates; the run worker's comes with revision 0005)."""

    owner: str
    api: str
    scheduler: str
    maintenance: str
    run_worker: str = ""

    def all(self) -> tuple[str, str, str, str]:
        return (self.owner, self.api, self.scheduler, self.maintenance)

    def every(self) -> tuple[str, ...]:
        """Every group role, the run worker's included."""
        return (*self.all(), self.run_worker)


RUN_MUTABLE_COLUMNS = RUN_MUTABLE_FIELDS
"""The ``runs`` columns the run-worker role may UPDATE (what ``save`` writes)."""

RUN_CLAIM_COLUMNS = ("first_claimed_at", "lease_reclaims")
"""The ``runs`` claim facts only a claim writes (revision 0006, ADR 1512)."""


def role_names(prefix: str | None = None) -> RoleNames:
    """The role names for ``prefix`` (default: ``$SCHEDULING_ROLE_PREFIX`` or ``scheduling``)."""
    chosen = prefix or os.environ.get(ROLE_PREFIX_ENV) or DEFAULT_ROLE_PREFIX
    if not _IDENT.match(chosen):
        raise ValueError(f"role prefix {chosen!r} must be a lower-case SQL identifier")
    return RoleNames(
        owner=f"{chosen}_owner",
        api=f"{chosen}_api",
        scheduler=f"{chosen}_scheduler",
        maintenance=f"{chosen}_maintenance",
        run_worker=f"{chosen}_run_worker",
    )


def create_role_sql(role: str) -> str:
    """Create a NOLOGIN role unless it exists; a concurrent creator is not an error."""
    if not _IDENT.match(role):
        raise ValueError(f"bad role name {role!r}")
    return f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
        CREATE ROLE {role} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$"""  # noqa: S608 (identifier validated above)


def secure_table_sql(table: str, owner: str) -> list[str]:
    """Hand ``table`` to the owner role and turn row-level security on and forced."""
    return [
        f"ALTER TABLE {table} OWNER TO {owner}",
        f"REVOKE ALL ON {table} FROM PUBLIC",
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
    ]


def policy_sql(table: str, name: str, role: str, predicate: str, command: str = "ALL") -> str:
    """A permissive policy for ``role``; USING and WITH CHECK share the predicate."""
    check = "" if command in ("SELECT", "DELETE") else f" WITH CHECK ({predicate})"
    return (
        f"CREATE POLICY {name} ON {table} AS PERMISSIVE FOR {command} TO {role}"
        f" USING ({predicate}){check}"
    )


def parent_visible(parent: str, parent_key: str, child_key: str) -> str:
    """Predicate: the parent row is visible to the current role (its own policy applies)."""
    return f"EXISTS (SELECT 1 FROM {parent} p WHERE p.{parent_key} = {child_key})"  # noqa: S608
