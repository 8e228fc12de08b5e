"""Provisioning without Python, ``scheduling serve``'s refusals, and the development
stack end to end: a schedule created with the printed token fires for real (system
clock), and its run reaches the inbox."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from scheduling.adapters.system_clock import SystemClock
from scheduling.adapters.system_ids import RandomIds
from scheduling.cli import main
from scheduling.cli.dev import DEMO_AGENT, DEMO_LIMITS, run_dev_stack
from scheduling.domain.cadence import format_instant
from scheduling.ports.directories import authority_version

pytestmark = pytest.mark.postgres

PRINCIPALS = {
    "principals": [
        {"tenant_id": "acme", "principal_id": "alice", "scopes": ["schedule.read"]},
        {
            "tenant_id": "acme",
            "principal_id": "bob",
            "scopes": ["schedule.write"],
            "enabled": False,
            "authority_inputs": {"roles": ["ops"]},
        },
    ]
}
AGENTS = {
    "agents": [
        {
            "agent_id": "0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e02",
            "version": "v1",
            "policy_profile": "default",
            "limits": DEMO_LIMITS,
            "active": True,
        }
    ]
}


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


def test_principals_and_agents_import_idempotently(pg_url: str, tmp_path: Path) -> None:
    principals = tmp_path / "principals.json"
    principals.write_text(json.dumps(PRINCIPALS))
    agents = tmp_path / "agents.json"
    agents.write_text(json.dumps(AGENTS))
    code, out = run_cli("principals", "import", str(principals), "--url", pg_url)
    assert code == 0
    assert out.count("created:") == 2
    code, out = run_cli("principals", "import", str(principals), "--url", pg_url)
    assert (code, out.count("unchanged:")) == (0, 2)
    code, out = run_cli("agents", "import", str(agents), "--url", pg_url)
    assert code == 0
    assert "created:" in out
    assert "activated:" in out
    code, out = run_cli("agents", "import", str(agents), "--url", pg_url)
    assert (code, "created:" in out, "unchanged:" in out) == (0, False, True)
    changed = json.loads(json.dumps(AGENTS))
    changed["agents"][0]["policy_profile"] = "other"
    agents.write_text(json.dumps(changed))
    code, _ = run_cli("agents", "import", str(agents), "--url", pg_url)
    assert code == 2  # immutable version with other content: refused


async def _bob(pg_url: str) -> tuple[bool, frozenset[str], Any]:
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow(
            "SELECT enabled, scopes, authority_inputs::text AS inputs FROM principals"
            " WHERE tenant_id = 'acme' AND principal_id = 'bob'"
        )
    finally:
        await conn.close()
    assert row is not None
    return row["enabled"], frozenset(row["scopes"]), json.loads(row["inputs"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("authority_inputs", {"roles": ["ops", "auditor"]}),
        ("scopes", ["schedule.write", "schedule.read"]),
        ("enabled", True),
    ],
)
def test_a_changed_principal_is_updated_and_its_authority_version_moves(
    pg_url: str, tmp_path: Path, field: str, value: Any
) -> None:
    """A re-import that changes only roles (authority inputs), only scopes or only the
    enabled flag updates the row, so the content-derived authority version the scheduler
    pins moves (spec: changed roles or scopes produce a new version). Rejects an import
    that compares a subset of the authority and calls the rest unchanged."""
    principals = tmp_path / "principals.json"
    principals.write_text(json.dumps(PRINCIPALS))
    assert run_cli("principals", "import", str(principals), "--url", pg_url)[0] == 0
    before = asyncio.run(_bob(pg_url))
    changed = json.loads(json.dumps(PRINCIPALS))
    changed["principals"][1][field] = value
    principals.write_text(json.dumps(changed))
    code, out = run_cli("principals", "import", str(principals), "--url", pg_url)
    assert code == 0
    assert "updated: acme/bob" in out, out
    assert "unchanged: acme/alice" in out, out
    after = asyncio.run(_bob(pg_url))
    assert after != before
    stored = {"enabled": after[0], "scopes": after[1], "authority_inputs": after[2]}
    assert stored[field] == (frozenset(value) if field == "scopes" else value)
    assert authority_version("acme", "bob", *after) != authority_version("acme", "bob", *before)


@pytest.mark.parametrize(
    "document",
    [
        {"principals": [{"tenant_id": "a", "principal_id": "b", "scopes": ["root.all"]}]},
        {"principals": [{"tenant_id": "a", "principal_id": "b", "scopes": [], "admin": True}]},
        {"principals": [{"tenant_id": "a", "principal_id": "b", "scopes": []}] * 2},
        {"agents": []},
    ],
)
def test_invalid_principal_files_write_nothing(
    pg_url: str, tmp_path: Path, document: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    code, out = run_cli("principals", "import", str(path), "--url", pg_url)
    assert (code, out) == (2, "")
    assert "schedule.provision." in capsys.readouterr().err


NUL_PRINCIPAL = {"principals": [{"tenant_id": "a\u0000", "principal_id": "b", "scopes": []}]}
DEEP_AGENT = {
    "agents": [
        {
            "agent_id": "0d3c0a4e-5b1f-4c8e-9f57-3a2b1c0d9e08",
            "version": "v1",
            "policy_profile": "default",
            "spec": {"steps": json.loads("[" * 900 + "]" * 900)},
            "limits": {"max_steps": 1, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "1"},
        }
    ]
}


@pytest.mark.parametrize(
    ("kind", "content", "expected"),
    [
        ("principals", json.dumps(NUL_PRINCIPAL).encode(), "schedule.text.invalid"),
        ("agents", json.dumps(DEEP_AGENT).encode(), "schedule.text.too_deep"),
        ("principals", b'{"principals": "\xff"}', "not UTF-8"),
        ("agents", b"\xfe\xff", "not UTF-8"),
    ],
)
def test_unstorable_import_files_are_refused_before_any_sql(
    pg_url: str,
    tmp_path: Path,
    kind: str,
    content: bytes,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "import.json"
    path.write_bytes(content)
    code, out = run_cli(kind, "import", str(path), "--url", pg_url)
    err = capsys.readouterr().err
    assert (code, out) == (2, ""), err
    assert expected in err, err
    assert "Traceback" not in err, err


def test_tokens_add_list_revoke(pg_url: str, tmp_path: Path) -> None:
    principals = tmp_path / "principals.json"
    principals.write_text(json.dumps(PRINCIPALS))
    assert run_cli("principals", "import", str(principals), "--url", pg_url)[0] == 0
    path = tmp_path / "tokens.json"
    code, out = run_cli(
        "tokens",
        "--tokens-file",
        str(path),
        "add",
        "--tenant",
        "acme",
        "--principal",
        "alice",
        "--url",
        pg_url,
    )
    assert code == 0
    token_id = out.split("token_id: ")[1].split()[0]
    token = out.split("token: ")[1].split()[0]
    assert token not in path.read_text()
    code, listed = run_cli("tokens", "--tokens-file", str(path), "list")
    assert (code, listed.strip()) == (0, f"{token_id} acme/alice")
    assert token not in listed
    assert run_cli("tokens", "--tokens-file", str(path), "revoke", token_id)[0] == 0
    assert run_cli("tokens", "--tokens-file", str(path), "revoke", token_id)[0] == 2


@pytest.mark.parametrize(
    ("tenant", "who", "expected"),
    [
        ("acme", "carol", "schedule.provision.unknown_principal"),  # no such principal
        ("globex", "alice", "schedule.provision.unknown_principal"),  # unknown tenant
        ("acme", "bob", "schedule.provision.principal_disabled"),  # disabled
    ],
    ids=["unknown-principal", "unknown-tenant", "disabled"],
)
def test_tokens_add_refuses_who_cannot_act_and_writes_nothing(
    pg_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tenant: str,
    who: str,
    expected: str,
) -> None:
    """Issue 23 finding 6: a token for a principal the directory does not hold, or holds
    disabled, would be a credential that names nobody; refused, exit code 2, the token
    file untouched (absent stays absent, an existing one keeps its bytes)."""
    principals = tmp_path / "principals.json"
    principals.write_text(json.dumps(PRINCIPALS))
    assert run_cli("principals", "import", str(principals), "--url", pg_url)[0] == 0
    capsys.readouterr()
    path = tmp_path / "tokens.json"
    argv = ("tokens", "--tokens-file", str(path), "add", "--tenant", tenant, "--principal", who)
    code, out = run_cli(*argv, "--url", pg_url)
    err = capsys.readouterr().err
    assert (code, out) == (2, "")
    assert f"error: {expected}:" in err
    assert "Traceback" not in err
    assert not path.exists()
    assert (
        run_cli(*argv[:3], "add", "--tenant", "acme", "--principal", "alice", "--url", pg_url)[0]
        == 0
    )
    before = path.read_bytes()
    assert run_cli(*argv, "--url", pg_url)[0] == 2
    assert path.read_bytes() == before


def test_tokens_add_needs_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_SCHEDULE_DATABASE_URL", raising=False)
    path = tmp_path / "tokens.json"
    code, out = run_cli(
        "tokens", "--tokens-file", str(path), "add", "--tenant", "acme", "--principal", "alice"
    )
    assert (code, out, path.exists()) == (2, "", False)


def test_serve_and_dev_refuse_without_their_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_SCHEDULE_API_TOKENS_FILE", raising=False)
    monkeypatch.delenv("AGENT_SCHEDULE_DATABASE_URL", raising=False)
    assert run_cli("serve")[0] == 1
    monkeypatch.setenv("AGENT_SCHEDULE_ENVIRONMENT", "production")
    assert run_cli("dev", "--database-url", "postgresql://x/y")[0] == 1


async def test_dev_stack_fires_a_schedule_for_real(pg_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    stop = asyncio.Event()
    announced: list[tuple[str, str, str]] = []
    stack = asyncio.create_task(
        run_dev_stack(
            pg_url,
            stop,
            clock=clock,
            ids=RandomIds(),
            port=0,
            state_dir=tmp_path,
            announce=lambda *stack: announced.append(stack),
        )
    )
    try:
        for _ in range(300):
            if announced or stack.done():
                break
            await asyncio.sleep(0.05)
        if stack.done():
            stack.result()
        base, bearer, curl = announced[0]
        assert "curl" in curl
        assert bearer in curl
        headers = {"Authorization": f"Bearer {bearer}", "Idempotency-Key": "t1"}
        body = {
            "title": "soon",
            "instruction": "Hello. [script:succeed]",
            "cadence": {"kind": "ONCE", "at": format_instant(clock.now() + timedelta(seconds=2))},
            "agent_id": str(DEMO_AGENT),
            "limits": DEMO_LIMITS,
            "run_timeout_seconds": 60,
            "misfire_grace_seconds": 600,
            "max_consecutive_failures": 2,
        }
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            made = await client.post("/v1/schedules", json=body, headers=headers)
            assert made.status_code == 201, made.text
            sid = made.json()["id"]
            status = None
            for _ in range(200):  # the real firing: about 2 s, bounded at 20 s
                inbox = await client.get(f"/v1/schedules/{sid}/occurrences", headers=headers)
                items = inbox.json()["items"]
                if items and items[0]["run"] and items[0]["run"]["status"] == "COMPLETED":
                    status = "COMPLETED"
                    break
                await asyncio.sleep(0.1)
            assert status == "COMPLETED", inbox.text
            assert (await client.get(f"/v1/schedules/{sid}", headers=headers)).json()[
                "state"
            ] == "COMPLETED"
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(stack, 30)
