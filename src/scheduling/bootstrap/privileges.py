"""What ``release-check`` reads of the deployment logins: whether a login is pooled per
transaction, and whether the scheduler and run-worker logins hold exactly their release
allowlists (``docs/operations/deployment.md``). The role names a prefix gives are
``deployment_roles``'s."""

from __future__ import annotations

from scheduling.adapters.postgres.release_check import (
    pooling_problems,
    run_worker_release_problems,
    scheduler_release_problems,
)

__all__ = [
    "pooling_problems",
    "run_worker_release_problems",
    "scheduler_release_problems",
]
