"""Batch provisioning (ADR 2260) and ``tokens add --json`` on real PostgreSQL: one file of
tenants, principals, named tokens and agents applied twice (the second run changes
nothing and says so), the new tokens' secrets shown once and authenticating, and every
bad input refused with a stable ``schedule.*`` code, exit code 2 and nothing changed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.adapters.token_file import TokenFile
from scheduling.cli import main

pytestmark = pytest.mark.postgres

BATCH = """\
[[tenants.acme.principals]]
principal_id = "alice"
scopes = ["schedule.read", "schedule.write", "run.read", "session.read"]
authority_inputs = { roles = ["member"] }

[[tenants.acme.principals]]
principal_id = "bob"
scopes = ["schedule.read"]
enabled = false

[[tenants.acme.tokens]]
principal_id = "alice"
name = "cli"

[[tenants.acme.tokens]]
principal_id = "alice"
name = "ci"

[[tenants.globex.principals]]
principal_id = "carol"
scopes = ["schedule.read"]

[[tenants.globex.tokens]]
principal_id = "carol"
name = "cli"

[[agents]]
agent_id = "0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e07"
version = "v1"
policy_profile = "default"
limits = { max_steps = 10, max_model_calls = 10, max_tool_calls = 10, max_cost = "1" }
spec = { model = "scripted", tools = [] }
active = true
"""


def run_cli(*argv: str) -> tuple[int, str]:
    out: list[str] = []

    class Sink:
        def write(self, text: str) -> int:
            out.append(text)
            return len(text)

        def flush(self) -> None:
            return None

    code = main(list(argv), Sink())  # type: ignore[arg-type]
    return code, "".join(out)


async def _rows(url: str) -> list[Any]:
    """Every provisioned row, for "nothing changed" comparisons."""
    uow = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with uow.engine.begin() as conn:
            principals = (await conn.execute(text("SELECT * FROM principals ORDER BY 1, 2"))).all()
            agents = (await conn.execute(text("SELECT * FROM agent_versions ORDER BY 1, 2"))).all()
        return [tuple(r) for r in principals] + [tuple(r) for r in agents]
    finally:
        await uow.dispose()


def rows(url: str) -> list[Any]:
    return asyncio.run(_rows(url))


def test_batch_applies_once_and_the_second_run_changes_nothing(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "deployment.toml"
    batch.write_text(BATCH)
    tokens = tmp_path / "tokens.json"
    argv = ("provision", "apply", str(batch), "--url", pg_url, "--tokens-file", str(tokens))
    code, out = run_cli(*argv)
    assert code == 0, capsys.readouterr().err
    lines = out.splitlines()
    assert "created: principal acme/alice" in lines
    assert "created: principal acme/bob" in lines
    assert "created: principal globex/carol" in lines
    assert "created: agent 0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e07@v1" in lines
    assert "activated: agent 0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e07@v1" in lines
    created = [line.split() for line in lines if line.startswith("created: token ")]
    assert sorted(c[2] for c in created) == ["acme/alice/ci", "acme/alice/cli", "globex/carol/cli"]
    directory = TokenFile(tokens)
    for _, _, named, token_id, secret in created:
        identity = directory.authenticate(secret)
        assert identity is not None
        assert identity.token_id == token_id
        assert (identity.tenant_id, identity.principal_id) == tuple(named.split("/")[:2])
        assert secret not in tokens.read_text()
    before_rows, before_file = rows(pg_url), tokens.read_bytes()

    code, out = run_cli(*argv)
    assert code == 0
    assert out.splitlines()[-1] == "no changes"
    assert "created:" not in out
    assert "updated:" not in out
    assert "activated:" not in out
    assert "unchanged: token acme/alice/cli" in out
    assert (rows(pg_url), tokens.read_bytes()) == (before_rows, before_file)

    code, out = run_cli(*argv, "--json")
    report = json.loads(out)
    assert (code, report["changed"], report["tokens"]["created"]) == (0, False, [])
    assert sorted(report["principals"]["unchanged"]) == ["acme/alice", "acme/bob", "globex/carol"]


def test_plan_writes_nothing_and_apply_json_carries_the_new_token(
    pg_url: str, tmp_path: Path
) -> None:
    batch = tmp_path / "deployment.json"
    batch.write_text(
        json.dumps(
            {
                "tenants": {
                    "acme": {
                        "principals": [{"principal_id": "alice", "scopes": ["schedule.read"]}],
                        "tokens": [{"principal_id": "alice", "name": "cli"}],
                    }
                }
            }
        )
    )
    tokens = tmp_path / "tokens.json"
    common = (str(batch), "--url", pg_url, "--tokens-file", str(tokens))
    before = rows(pg_url)
    code, out = run_cli("provision", "plan", *common)
    assert code == 0
    assert "created: principal acme/alice" in out
    assert "to create: token acme/alice/cli" in out
    assert (rows(pg_url), tokens.exists()) == (before, False)
    code, out = run_cli("provision", "apply", *common, "--json")
    report = json.loads(out)
    assert (code, report["changed"], report["principals"]["created"]) == (0, True, ["acme/alice"])
    (made,) = report["tokens"]["created"]
    assert (made["tenant_id"], made["principal_id"], made["name"]) == ("acme", "alice", "cli")
    identity = TokenFile(tokens).authenticate(made["token"])
    assert identity is not None
    assert identity.token_id == made["token_id"]


BAD: dict[str, tuple[str, str]] = {
    "unknown-scope": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = ["root.all"] }]\n',
        "schedule.provision.unknown_scope",
    ),
    "unknown-key": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [], admin = true }]\n',
        "schedule.provision.file_invalid",
    ),
    "not-toml": ("[tenants.acme\n", "schedule.provision.file_invalid"),
    # Unstorable text and deep nesting are refused before the schema, a hash or SQL.
    "nul-in-a-principal": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [],'
        ' authority_inputs = { team = "a\\u0000b" } }]\n',
        "schedule.text.invalid",
    ),
    "nested-agent-spec": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [] }]\n'
        '[[agents]]\nagent_id = "0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e08"\nversion = "v1"\n'
        'policy_profile = "default"\nspec = { steps = ' + "[" * 40 + "]" * 40 + " }\n"
        "limits = { max_steps = 1, max_model_calls = 1, max_tool_calls = 1, max_cost = '1' }\n",
        "schedule.text.too_deep",
    ),
    # Nested past the parser's own limit: refused like any file that is not TOML.
    "nested-toml": ("a = " + "[" * 5000 + "]" * 5000 + "\n", "schedule.provision.file_invalid"),
    "token-for-nobody": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [] }]\n'
        'tokens = [{ principal_id = "nobody", name = "cli" }]\n',
        "schedule.provision.unknown_principal",
    ),
    "token-for-disabled": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [], enabled = false }]\n'
        'tokens = [{ principal_id = "x", name = "cli" }]\n',
        "schedule.provision.principal_disabled",
    ),
    "token-twice": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [] }]\n'
        'tokens = [{ principal_id = "x", name = "a" }, { principal_id = "x", name = "a" }]\n',
        "schedule.provision.duplicate_entry",
    ),
    "agent-limits": (
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [] }]\n'
        '[[agents]]\nagent_id = "0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e08"\nversion = "v1"\n'
        'policy_profile = "default"\nlimits = { max_steps = -1 }\n',
        "schedule.",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_batch_files_change_nothing(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    document, expected = BAD[case]
    batch = tmp_path / "deployment.toml"
    batch.write_text(document)
    tokens = tmp_path / "tokens.json"
    before = rows(pg_url)
    code, out = run_cli(
        "provision", "apply", str(batch), "--url", pg_url, "--tokens-file", str(tokens)
    )
    err = capsys.readouterr().err
    assert (code, out) == (2, "")
    assert f"error: {expected}" in err
    assert "Traceback" not in err
    assert (rows(pg_url), tokens.exists()) == (before, False)


def test_batch_input_refusals(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_SCHEDULE_API_TOKENS_FILE", raising=False)
    wrong = tmp_path / "deployment.yaml"
    wrong.write_text("tenants: {}\n")
    assert run_cli("provision", "apply", str(wrong), "--url", pg_url) == (2, "")
    assert "schedule.provision.file_invalid" in capsys.readouterr().err
    for suffix in (".toml", ".json"):
        binary = tmp_path / f"binary{suffix}"
        binary.write_bytes(b"\xff\xfe\x00 not text")
        assert run_cli("provision", "apply", str(binary), "--url", pg_url) == (2, "")
        err = capsys.readouterr().err
        assert "schedule.provision.file_invalid" in err, err
        assert "not UTF-8" in err, err
    missing = tmp_path / "absent.toml"
    assert run_cli("provision", "apply", str(missing), "--url", pg_url) == (2, "")
    assert "schedule.provision.file_invalid" in capsys.readouterr().err
    named = tmp_path / "named.toml"
    named.write_text(
        '[tenants.acme]\nprincipals = [{ principal_id = "x", scopes = [] }]\n'
        'tokens = [{ principal_id = "x", name = "cli" }]\n'
    )
    assert run_cli("provision", "apply", str(named), "--url", pg_url) == (2, "")
    assert "schedule.provision.input_missing" in capsys.readouterr().err


def test_tokens_add_json_and_names(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "p.toml"
    batch.write_text('[tenants.acme]\nprincipals = [{ principal_id = "alice", scopes = [] }]\n')
    assert run_cli("provision", "apply", str(batch), "--url", pg_url)[0] == 0
    path = tmp_path / "tokens.json"
    add = ("tokens", "--tokens-file", str(path), "add", "--tenant", "acme", "--principal")
    code, out = run_cli(*add, "alice", "--url", pg_url, "--name", "cli", "--json")
    assert code == 0
    made = json.loads(out)
    assert set(made) == {"token_id", "token", "tenant_id", "principal_id", "name", "created_at"}
    assert (made["tenant_id"], made["principal_id"], made["name"]) == ("acme", "alice", "cli")
    identity = TokenFile(path).authenticate(made["token"])
    assert identity is not None
    assert identity.token_id == made["token_id"]
    assert made["token"] not in path.read_text()
    before = path.read_bytes()
    capsys.readouterr()
    assert run_cli(*add, "alice", "--url", pg_url, "--name", "cli", "--json") == (2, "")
    assert "error: schedule.tokens.name_taken" in capsys.readouterr().err
    assert path.read_bytes() == before
    code, out = run_cli("tokens", "--tokens-file", str(path), "list", "--json")
    listed = json.loads(out)
    assert (code, [e["name"] for e in listed]) == (0, ["cli"])
    assert "token" not in listed[0]
    assert "digest" not in listed[0]


async def _principal(url: str, tenant_id: str, principal_id: str) -> dict[str, Any]:
    uow = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with uow.engine.begin() as conn:
            row = (
                await conn.execute(
                    text("SELECT * FROM principals WHERE tenant_id = :t AND principal_id = :p"),
                    {"t": tenant_id, "p": principal_id},
                )
            ).one()
        return dict(row._mapping)
    finally:
        await uow.dispose()


def principal_row(url: str, tenant_id: str, principal_id: str) -> dict[str, Any]:
    return asyncio.run(_principal(url, tenant_id, principal_id))


def test_a_reapplied_principal_holds_exactly_the_file_s_authority(
    pg_url: str, tmp_path: Path
) -> None:
    """The file is the principal's whole authority: a scope or an authority input the
    file no longer lists is gone after apply (replaced, never merged into the stored
    row), and the update keeps the row's created_at."""
    batch = tmp_path / "deployment.toml"
    batch.write_text(
        '[[tenants.acme.principals]]\nprincipal_id = "alice"\n'
        'scopes = ["schedule.read", "schedule.write", "run.cancel"]\n'
        'authority_inputs = { roles = ["admin"], team = "ops" }\n'
    )
    assert run_cli("provision", "apply", str(batch), "--url", pg_url)[0] == 0
    before = principal_row(pg_url, "acme", "alice")
    batch.write_text(
        '[[tenants.acme.principals]]\nprincipal_id = "alice"\n'
        'scopes = ["schedule.read"]\nauthority_inputs = { roles = ["member"] }\n'
    )
    code, out = run_cli("provision", "apply", str(batch), "--url", pg_url)
    assert code == 0
    assert "updated: principal acme/alice" in out.splitlines(), out
    after = principal_row(pg_url, "acme", "alice")
    assert sorted(after["scopes"]) == ["schedule.read"], after
    assert after["authority_inputs"] == {"roles": ["member"]}, after
    assert after["created_at"] == before["created_at"], (before, after)
    assert after["updated_at"] > before["updated_at"], (before, after)


def test_disabling_a_principal_whose_named_token_is_held_is_refused(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token the file names must belong to a principal the directory (after the file)
    holds enabled, whether or not the token file already holds it: a re-apply that
    disables alice while still naming her held token is refused and changes nothing."""
    batch = tmp_path / "deployment.toml"
    tokens = tmp_path / "tokens.json"
    common = ("--url", pg_url, "--tokens-file", str(tokens))
    listed = '[[tenants.acme.tokens]]\nprincipal_id = "alice"\nname = "ci"\n'
    batch.write_text(
        '[[tenants.acme.principals]]\nprincipal_id = "alice"\nscopes = ["schedule.read"]\n' + listed
    )
    assert run_cli("provision", "apply", str(batch), *common)[0] == 0
    before = (rows(pg_url), tokens.read_bytes())
    batch.write_text(
        '[[tenants.acme.principals]]\nprincipal_id = "alice"\nscopes = ["schedule.read"]\n'
        "enabled = false\n" + listed
    )
    capsys.readouterr()
    assert run_cli("provision", "apply", str(batch), *common) == (2, "")
    assert "error: schedule.provision.principal_disabled" in capsys.readouterr().err
    assert (rows(pg_url), tokens.read_bytes()) == before
    assert principal_row(pg_url, "acme", "alice")["enabled"] is True


def test_one_principal_id_in_two_tenants_is_two_principals(pg_url: str, tmp_path: Path) -> None:
    """A principal is named by (tenant, principal): the same principal id under two
    tenants is two principals, each created with its own scopes, not a duplicate."""
    batch = tmp_path / "deployment.toml"
    batch.write_text(
        '[[tenants.acme.principals]]\nprincipal_id = "alice"\nscopes = ["schedule.read"]\n'
        '[[tenants.globex.principals]]\nprincipal_id = "alice"\nscopes = ["run.read"]\n'
    )
    code, out = run_cli("provision", "apply", str(batch), "--url", pg_url)
    assert code == 0, out
    lines = out.splitlines()
    assert "created: principal acme/alice" in lines, out
    assert "created: principal globex/alice" in lines, out
    assert principal_row(pg_url, "acme", "alice")["scopes"] == ["schedule.read"]
    assert principal_row(pg_url, "globex", "alice")["scopes"] == ["run.read"]
