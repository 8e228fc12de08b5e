"""One PostgreSQL provider for tests, gates, the simulator and benchmarks.

After ``from simulation.provider import acquire_server``::

    with acquire_server() as server:           # see acquire_server for the order
        url = server.create_database()        # a fresh, uniquely named database
        ...
        server.drop_database(url)

See ``docs/operations/database-provider.md``.
"""

from simulation.provider._broker import BrokerError
from simulation.provider._database_server import DatabaseServer, template_name
from simulation.provider._info import ProviderUnavailable, ServerInfo, async_url
from simulation.provider._provider import (
    INFO_ENV,
    PROVIDER_ENV,
    URL_ENV,
    acquire_server,
    redact,
)

__all__ = [
    "INFO_ENV",
    "PROVIDER_ENV",
    "URL_ENV",
    "BrokerError",
    "DatabaseServer",
    "ProviderUnavailable",
    "ServerInfo",
    "acquire_server",
    "async_url",
    "redact",
    "template_name",
]
