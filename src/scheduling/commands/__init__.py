"""Operator subcommands of the ``scheduling`` console script (see docs/operations/deployment.md).

Importing this package registers ``migrate``, ``release-check``, ``scheduler``,
``run-worker``, ``purge`` and ``repair-next-fire`` in ``scheduling.cli.COMMANDS``.
These modules are process edges: the only product code that reads ``os.environ``
for settings and constructs the system clock and id generator.
"""

# The HTTP control plane, provisioning and the development stack (issue 11).
from scheduling.commands import dev, http, maintenance, migrate, provision, release, serve

__all__ = ["dev", "http", "maintenance", "migrate", "provision", "release", "serve"]
