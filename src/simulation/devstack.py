"""``python -m simulation.devstack``: ``scheduling dev`` over a throwaway PostgreSQL.

The product may not import the harness (import-linter), so the one-command development
stack that needs the project's database provider lives here: it acquires a server from
``simulation.provider`` (``SCHEDULING_DATABASE_URL`` or a local throwaway cluster),
creates a database, and runs the product's ``run_dev_stack`` on it until Ctrl-C; the
database and server are removed afterwards (ADR 1503).

It prints the URL, the token and lines to paste into another shell: they set ``$URL``
and ``$TOKEN``, compute a firing time one minute after the paste and set ``$ID`` to the
schedule they create (README "Try the control plane"; ``--port 0`` picks a free port,
which the printed lines carry). tests/integration/test_docs_commands.py pastes them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from scheduling.cli.dev import dev_port, print_stack, run_dev_stack
from scheduling.cli.edge import configure_logging, system_edge
from scheduling.cli.lifetime import until_signalled
from simulation.provider import acquire_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulation.devstack", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", default="8080", help="port (default 8080; 0: a free one)")
    args = parser.parse_args(argv)
    port = dev_port(args.port)  # before acquiring a server: nothing to clean up
    if port is None:
        return 1
    configure_logging("dev")  # its arguments are not a subcommand ("--port 0")
    server = acquire_server()
    try:
        url = server.create_database()
        clock, ids = system_edge()
        with tempfile.TemporaryDirectory(prefix="scheduling-dev-") as state:

            async def body(stop: asyncio.Event) -> None:
                await run_dev_stack(
                    url,
                    stop,
                    clock=clock,
                    ids=ids,
                    host=args.host,
                    port=port,
                    state_dir=Path(state),
                    announce=print_stack(sys.stdout),
                )

            asyncio.run(until_signalled(body))
        server.drop_database(url)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
