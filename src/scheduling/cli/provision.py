"""Provisioning without Python (docs/operations/provisioning.md):

* ``scheduling principals import FILE`` - upsert principals into the durable directory;
* ``scheduling agents import FILE`` - add immutable agent versions, move active pointers;
* ``scheduling tokens add --tenant T --principal P`` - issue a bearer token (printed once;
  the token file keeps its SHA-256 digest) for a principal the durable directory holds
  enabled (else ``schedule.provision.unknown_principal`` / ``principal_disabled``, exit
  code 2, nothing written), ``tokens revoke TOKEN_ID``, ``tokens list``.

Imports are idempotent and validated completely before one transaction writes them. They
connect with the migration/trusted login (``--url`` or ``AGENT_SCHEDULE_DATABASE_URL``).
The token file is ``--tokens-file`` or ``AGENT_SCHEDULE_API_TOKENS_FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.adapters.token_file import issue_token, read_entries, revoke_token
from scheduling.cli.edge import load_settings, system_edge
from scheduling.cli.registry import command
from scheduling.domain.errors import SchedulingError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.service.provisioning import ImportReport, ProvisioningService

TOKENS_ENV = "AGENT_SCHEDULE_API_TOKENS_FILE"

UNKNOWN_PRINCIPAL = reason(
    "schedule.provision.unknown_principal",
    "tokens add names a tenant/principal the durable directory does not hold",
)
PRINCIPAL_DISABLED = reason(
    "schedule.provision.principal_disabled",
    "tokens add names a principal the durable directory holds disabled",
)


def _error(exc: SchedulingError) -> int:
    print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
    for problem in exc.details.get("problems", []):
        print(f"  {problem}", file=sys.stderr)
    return 2


def _database_url(args: argparse.Namespace) -> str | None:
    if args.url:
        return str(args.url)
    settings = load_settings()
    return None if settings is None else settings.database_url


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"error: {path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {path}: not JSON ({exc.msg}, line {exc.lineno})") from None


def _run_import(
    args: argparse.Namespace,
    out: TextIO,
    action: Callable[[ProvisioningService, Any], Awaitable[ImportReport]],
) -> int:
    document = _read_json(args.file)
    url = _database_url(args)
    if not url:
        print("error: give --url or set AGENT_SCHEDULE_DATABASE_URL", file=sys.stderr)
        return 2
    clock, _ = system_edge()

    async def run() -> ImportReport:
        uow = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
        try:
            return await action(ProvisioningService(uow, clock), document)
        finally:
            await uow.dispose()

    try:
        report = asyncio.run(run())
    except SchedulingError as exc:
        return _error(exc)
    for line in report.lines():
        print(line, file=out)
    return 0


def _configure_import(what: str) -> Callable[[argparse.ArgumentParser], None]:
    def configure(parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        imp = sub.add_parser("import", help=f"import {what} from a JSON file (idempotent)")
        imp.add_argument("file", metavar="FILE", help=f"the JSON file of {what}")
        imp.add_argument("--url", default=None, help="trusted login URL")

    return configure


@command(
    "principals", "import principals into the durable directory", _configure_import("principals")
)
def principals(args: argparse.Namespace, out: TextIO) -> int:
    return _run_import(args, out, lambda service, doc: service.import_principals(doc))


@command("agents", "import immutable agent versions", _configure_import("agent versions"))
def agents(args: argparse.Namespace, out: TextIO) -> int:
    return _run_import(args, out, lambda service, doc: service.import_agents(doc))


def _configure_tokens(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens-file", default=None, help=f"default: ${TOKENS_ENV}")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = sub.add_parser("add", help="issue a token for a principal (printed once)")
    add.add_argument("--tenant", required=True, help="the tenant the token acts in")
    add.add_argument("--principal", required=True, help="the principal the token acts as")
    add.add_argument(
        "--url", default=None, help="trusted login URL (the principal directory is checked)"
    )
    revoke = sub.add_parser("revoke", help="remove a token by its id")
    revoke.add_argument("token_id", metavar="TOKEN_ID", help="the id printed by `tokens add`")
    sub.add_parser("list", help="list token ids and their principals (never a token)")


async def _check_principal(url: str, tenant_id: str, principal_id: str) -> None:
    """The principal must be in the durable directory and enabled: a token for anyone
    else would be a credential that names nobody (or someone who may not act)."""
    uow = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with uow.begin() as tx:
            record = await tx.principals.get(tenant_id, principal_id)
    finally:
        await uow.dispose()
    if record is None:
        raise ValidationError(
            UNKNOWN_PRINCIPAL, "the directory has no such principal in this tenant"
        )
    if not record.enabled:
        raise ValidationError(PRINCIPAL_DISABLED, "the principal is disabled")


def tokens_path(value: str | None) -> Path | None:
    raw = value or os.environ.get(TOKENS_ENV)
    return Path(raw) if raw else None


@command("tokens", "issue, revoke and list API bearer tokens", _configure_tokens)
def tokens(args: argparse.Namespace, out: TextIO) -> int:
    path = tokens_path(args.tokens_file)
    if path is None:
        print(f"error: give --tokens-file or set {TOKENS_ENV}", file=sys.stderr)
        return 2
    try:
        if args.action == "add":
            url = _database_url(args)
            if not url:
                print("error: give --url or set AGENT_SCHEDULE_DATABASE_URL", file=sys.stderr)
                return 2
            asyncio.run(_check_principal(url, args.tenant, args.principal))
            clock, _ = system_edge()
            entry, token = issue_token(path, args.tenant, args.principal, clock.now())
            print(f"token_id: {entry.token_id}", file=out)
            print(f"token: {token}", file=out)
            print("(shown once; the file keeps only its SHA-256 digest)", file=sys.stderr)
        elif args.action == "revoke":
            entry = revoke_token(path, args.token_id)
            print(f"revoked: {entry.token_id} ({entry.tenant_id}/{entry.principal_id})", file=out)
        else:
            for entry in read_entries(path):
                print(f"{entry.token_id} {entry.tenant_id}/{entry.principal_id}", file=out)
    except SchedulingError as exc:
        return _error(exc)
    return 0
