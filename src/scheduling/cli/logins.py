"""``scheduling logins create ROLE LOGIN`` and ``scheduling logins rotate LOGIN``:
a login for a deployment role, and a new password for it, without hand-written SQL.

ROLE is ``api``, ``scheduler``, ``maintenance`` or ``run-worker``; the command connects
with ``AGENT_SCHEDULE_DATABASE_URL`` (a login that may create roles). With
``--password-stdin`` the password is the first line of standard input; otherwise one
is generated and printed once on standard output. The password is never logged,
never echoed in an error, and reaches the server only as a SCRAM verifier."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from scheduling import bootstrap
from scheduling.cli.edge import load_settings, report
from scheduling.cli.registry import command
from scheduling.domain.errors import SchedulingError
from scheduling.domain.reasons import reason

ADMIN_URL_MISSING = reason(
    "schedule.logins.admin_url_missing",
    "Creating or rotating a login needs AGENT_SCHEDULE_DATABASE_URL",
)
PASSWORD_EMPTY = reason("schedule.logins.password_empty", "The password read from stdin is empty")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("create", "rotate"),
        help="create a login for a role, or rotate an existing login's password",
    )
    parser.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help=f"create: ROLE LOGIN (ROLE one of {', '.join(bootstrap.ROLE_KINDS)}); rotate: LOGIN",
    )
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of stdin (default: generate one)",
    )


def _password(args: argparse.Namespace) -> tuple[str, bool]:
    """(password, generated)."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n"), False
    return bootstrap.generate_password(), True


@command("logins", "create a login for a deployment role, or rotate its password", _configure)
def logins(args: argparse.Namespace, out: TextIO) -> int:
    settings = load_settings()
    if settings is None:
        return 1
    if not settings.database_url:
        report([f"{ADMIN_URL_MISSING}: AGENT_SCHEDULE_DATABASE_URL is not set"])
        return 1
    expected = 2 if args.action == "create" else 1
    if len(args.names) != expected:
        usage = "create ROLE LOGIN" if args.action == "create" else "rotate LOGIN"
        report([f"schedule.logins.invalid: usage: scheduling logins {usage}"])
        return 2
    password, generated = _password(args)
    if not password:
        report([f"{PASSWORD_EMPTY}: nothing read from stdin"])
        return 1
    roles = bootstrap.role_names(settings.role_prefix or bootstrap.DEFAULT_ROLE_PREFIX)
    try:
        if args.action == "create":
            kind, login = args.names
            result = asyncio.run(
                bootstrap.create_login(settings.database_url, roles, kind, login, password)
            )
            print(f"created login {result.login} in role {result.group}", file=out)
        else:
            (login,) = args.names
            result = asyncio.run(
                bootstrap.rotate_password(settings.database_url, roles, login, password)
            )
            print(f"rotated the password of login {result.login}", file=out)
    except SchedulingError as exc:
        report([f"{exc.code}: {exc.message}"])
        return 1
    if generated:
        print(f"password (shown once): {password}", file=out, flush=True)
    return 0
