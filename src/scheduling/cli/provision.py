"""Provisioning without Python (docs/operations/provisioning.md):

* ``scheduling principals import FILE`` - upsert principals into the durable directory;
* ``scheduling agents import FILE`` - add immutable agent versions, move active pointers;
* ``scheduling tokens add --tenant T --principal P [--name N] [--json]`` - issue a bearer
  token (printed once; the token file keeps its SHA-256 digest) for a principal the
  durable directory holds enabled (else ``schedule.provision.unknown_principal`` /
  ``principal_disabled``, exit code 2, nothing written), ``tokens revoke TOKEN_ID``,
  ``tokens list [--json]``;
* ``scheduling provision apply FILE`` - ONE file (TOML or JSON) of tenants, their
  principals and named tokens, and agent versions, applied idempotently (ADR 2260): a
  second run changes nothing and says ``no changes``; new tokens' secrets are printed
  once (``--json`` for scripts); ``provision plan FILE`` says what apply would do.

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
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# Read when a command runs: the composition root imports the provisioning service, the
# database stack and the token file on first access, so these commands' ``--help`` does
# not (issue 26 item 4).
from scheduling import bootstrap
from scheduling.cli.edge import load_settings, system_edge
from scheduling.cli.registry import command
from scheduling.domain.errors import SchedulingError, ValidationError

if TYPE_CHECKING:
    from scheduling.bootstrap import TokenEntry, TokenName
    from scheduling.service.provisioning import BatchReport, ImportReport, ProvisioningService

TOKENS_ENV = "AGENT_SCHEDULE_API_TOKENS_FILE"


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
    """An import file's JSON document, or ``schedule.provision.file_invalid`` (as for a
    batch file) when it cannot be read as one."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        problem = f"cannot read ({exc.strerror})"
    except UnicodeDecodeError:
        problem = "not UTF-8 text"
    except json.JSONDecodeError as exc:
        problem = f"not JSON ({exc.msg}, line {exc.lineno})"
    except RecursionError:  # nested past the parser's own limit
        problem = "not JSON (nested too deeply)"
    raise ValidationError(bootstrap.FILE_INVALID, f"{path}: {problem}")


def _run_import(
    args: argparse.Namespace,
    out: TextIO,
    action: Callable[[ProvisioningService, Any], Awaitable[ImportReport]],
) -> int:
    try:
        document = _read_json(args.file)
    except SchedulingError as exc:
        return _error(exc)
    url = _database_url(args)
    if not url:
        print("error: give --url or set AGENT_SCHEDULE_DATABASE_URL", file=sys.stderr)
        return 2
    clock, _ = system_edge()

    async def run() -> ImportReport:
        async with bootstrap.open_provisioning(url, clock) as service:
            return await action(service, document)

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
    add.add_argument(
        "--name", default=None, help="a label unique per principal (what batch files name)"
    )
    add.add_argument(
        "--json", action="store_true", help="print one JSON object (token_id, token, ...)"
    )
    revoke = sub.add_parser("revoke", help="remove a token by its id")
    revoke.add_argument("token_id", metavar="TOKEN_ID", help="the id printed by `tokens add`")
    listing = sub.add_parser("list", help="list token ids and their principals (never a token)")
    listing.add_argument("--json", action="store_true", help="print a JSON list")


async def _check_principal(url: str, tenant_id: str, principal_id: str) -> None:
    async with bootstrap.open_provisioning(url, system_edge()[0]) as service:
        await service.check_principal(tenant_id, principal_id)


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
            bootstrap.read_entries(path)  # a broken token file is refused before the directory read
            asyncio.run(_check_principal(url, args.tenant, args.principal))
            clock, _ = system_edge()
            entry, token = bootstrap.issue_token(
                path, args.tenant, args.principal, clock.now(), name=args.name
            )
            if args.json:
                print(json.dumps({**_entry_json(entry), "token": token}), file=out)
            else:
                print(f"token_id: {entry.token_id}", file=out)
                print(f"token: {token}", file=out)
            print("(shown once; the file keeps only its SHA-256 digest)", file=sys.stderr)
        elif args.action == "revoke":
            entry = bootstrap.revoke_token(path, args.token_id)
            print(f"revoked: {entry.token_id} ({entry.tenant_id}/{entry.principal_id})", file=out)
        elif args.json:
            print(json.dumps([_entry_json(e) for e in bootstrap.read_entries(path)]), file=out)
        else:
            for entry in bootstrap.read_entries(path):
                named = "" if entry.name is None else f" {entry.name}"
                print(f"{entry.token_id} {entry.tenant_id}/{entry.principal_id}{named}", file=out)
    except SchedulingError as exc:
        return _error(exc)
    return 0


def _entry_json(entry: TokenEntry) -> dict[str, str | None]:
    """A token file entry for scripts, without its digest."""
    return {
        "token_id": entry.token_id,
        "tenant_id": entry.tenant_id,
        "principal_id": entry.principal_id,
        "name": entry.name,
        "created_at": entry.created_at,
    }


def _configure_provision(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, help in (
        ("apply", "apply a batch file idempotently (a second run changes nothing)"),
        ("plan", "say what apply would change, change nothing"),
    ):
        one = sub.add_parser(action, help=help)
        one.add_argument(
            "file", metavar="FILE", help="the batch file: tenants, principals, tokens, agents"
        )
        one.add_argument("--url", default=None, help="trusted login URL")
        one.add_argument("--tokens-file", default=None, help=f"default: ${TOKENS_ENV}")
        one.add_argument(
            "--json", action="store_true", help="print one JSON object (new tokens included)"
        )


def read_batch(path: str) -> Any:
    """A batch document from ``FILE.toml`` or ``FILE.json``; ``FILE_INVALID`` otherwise."""
    where = Path(path)
    if where.suffix not in (".toml", ".json"):
        raise ValidationError(
            bootstrap.FILE_INVALID, f"{path}: a batch file ends in .toml or .json"
        )
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(
            bootstrap.FILE_INVALID, f"{path}: cannot read ({exc.strerror})"
        ) from None
    except UnicodeDecodeError:
        raise ValidationError(bootstrap.FILE_INVALID, f"{path}: not UTF-8 text") from None
    try:
        return tomllib.loads(text) if where.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(
            bootstrap.FILE_INVALID, f"{path}: not {where.suffix[1:]} ({exc})"
        ) from None
    except RecursionError:  # nested past the parser's own limit
        raise ValidationError(
            bootstrap.FILE_INVALID, f"{path}: not {where.suffix[1:]} (nested too deeply)"
        ) from None


def _batch_json(report: BatchReport, issued: list[tuple[TokenName, TokenEntry, str]]) -> Any:
    def kinds(part: ImportReport) -> dict[str, list[str]]:
        return {k: getattr(part, k) for k in ("created", "updated", "unchanged", "activated")}

    return {
        "changed": report.changed,
        "principals": kinds(report.principals),
        "agents": kinds(report.agents),
        "tokens": {
            "created": [{**_entry_json(entry), "token": token} for _, entry, token in issued],
            "to_create": [str(n) for n in report.tokens_to_issue] if not issued else [],
            "unchanged": [str(n) for n in report.tokens_held],
        },
    }


def _batch_lines(
    report: BatchReport, issued: list[tuple[TokenName, TokenEntry, str]], apply: bool
) -> list[str]:
    lines = [f"{kind}: principal {name}" for kind, name in _kinds(report.principals)]
    lines += [f"{kind}: agent {name}" for kind, name in _kinds(report.agents)]
    if apply:
        lines += [f"created: token {n} {entry.token_id} {token}" for n, entry, token in issued]
    else:
        lines += [f"to create: token {n}" for n in report.tokens_to_issue]
    lines += [f"unchanged: token {n}" for n in report.tokens_held]
    if not report.changed:
        lines.append("no changes")
    return lines


def _kinds(part: ImportReport) -> list[tuple[str, str]]:
    verbs = {"created": "created", "updated": "updated", "unchanged": "unchanged"}
    if part.activated:
        verbs["activated"] = "activated"
    return [(verbs[k], item) for k in verbs for item in getattr(part, k)]


@command(
    "provision",
    "apply ONE batch file of tenants, principals, tokens, agents",
    _configure_provision,
)
def provision(args: argparse.Namespace, out: TextIO) -> int:
    path = tokens_path(args.tokens_file)
    apply = args.action == "apply"
    try:
        document = read_batch(args.file)
        url = _database_url(args)
        if not url:
            raise ValidationError(
                bootstrap.INPUT_MISSING, "give --url or set AGENT_SCHEDULE_DATABASE_URL"
            )
        if path is None and _names_tokens(document):
            raise ValidationError(
                bootstrap.INPUT_MISSING,
                f"the file names tokens: give --tokens-file or set {TOKENS_ENV}",
            )
        entries = [] if path is None else bootstrap.read_entries(path)
        held = {bootstrap.TokenName(e.tenant_id, e.principal_id, e.name) for e in entries if e.name}
        clock, _ = system_edge()

        async def run() -> BatchReport:
            async with bootstrap.open_provisioning(url, clock) as service:
                return await service.apply_batch(document, held, commit=apply)

        report = asyncio.run(run())
        issued: list[tuple[TokenName, TokenEntry, str]] = []
        if apply and path is not None:
            for named in report.tokens_to_issue:
                entry, token = bootstrap.issue_token(
                    path, named.tenant_id, named.principal_id, clock.now(), name=named.name
                )
                issued.append((named, entry, token))
    except SchedulingError as exc:
        return _error(exc)
    if args.json:
        print(json.dumps(_batch_json(report, issued)), file=out)
    else:
        for line in _batch_lines(report, issued, apply):
            print(line, file=out)
    if issued:
        print(
            "(new tokens are shown once; the file keeps only their SHA-256 digests)",
            file=sys.stderr,
        )
    return 0


def _names_tokens(document: Any) -> bool:
    tenants = document.get("tenants") if isinstance(document, dict) else None
    if not isinstance(tenants, dict):
        return False
    return any(isinstance(t, dict) and t.get("tokens") for t in tenants.values())
