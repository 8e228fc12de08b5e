"""What ``release-check`` reads of the deployment logins: whether a login is pooled per
transaction, and whether the scheduler and run-worker logins hold exactly their release
allowlists (``docs/operations/deployment.md``); and the role names a prefix gives."""

from __future__ import annotations

from scheduling.adapters.postgres.release_check import (
    pooling_problems,
    run_worker_release_problems,
    scheduler_release_problems,
)
from scheduling.adapters.postgres.roles import DEFAULT_ROLE_PREFIX, role_names

__all__ = [
    "DEFAULT_ROLE_PREFIX",
    "pooling_problems",
    "role_names",
    "run_worker_release_problems",
    "scheduler_release_problems",
]
