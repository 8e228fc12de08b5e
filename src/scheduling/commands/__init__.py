"""Operator subcommands of the ``scheduling`` console script (see docs/operations/deployment.md).

Importing this package registers ``migrate``, ``release-check``, ``scheduler``,
``run-worker``, ``purge``, ``repair-next-fire`` and ``logins`` in ``scheduling.cli.COMMANDS``.
These modules are process edges: the only product code that reads ``os.environ``
for settings and constructs the system clock and id generator.
"""

from scheduling.commands import logins, maintenance, migrate, release, serve

__all__ = ["logins", "maintenance", "migrate", "release", "serve"]
