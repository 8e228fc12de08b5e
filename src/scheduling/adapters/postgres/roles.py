"""Database roles of a deployment: their names and the settings row-level security reads.

Roles are cluster-global while tests run many databases on one cluster in parallel,
so role creation is idempotent and tolerates a concurrent creator, downgrades never
drop a role, and every name carries a configurable prefix (``AGENT_SCHEDULE_ROLE_PREFIX``,
default ``scheduling``). The migrations create and secure them with their own literal
SQL and import nothing from here (ADR 2161): editing this module changes no revision.
The roles are NOLOGIN groups: a deployment grants membership to its login users (see
docs/operations/roles.md).

Row-level security reads two transaction-local settings written by the unit of work
with ``set_config(name, value, true)``: ``scheduling.tenant_id`` and
``scheduling.principal_id``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from scheduling.ports.records import RUN_MUTABLE_FIELDS

ROLE_PREFIX_ENV = "AGENT_SCHEDULE_ROLE_PREFIX"
DEFAULT_ROLE_PREFIX = "scheduling"
ROLE_KINDS = ("api", "scheduler", "maintenance", "run-worker")
"""The deployment roles a login may join (``scheduling logins create ROLE LOGIN``)."""
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
    """The role names for ``prefix`` (default: ``$AGENT_SCHEDULE_ROLE_PREFIX``, else
    ``scheduling``)."""
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
