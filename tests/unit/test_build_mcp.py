"""``bootstrap.build_mcp`` and ``scheduling mcp``'s refusals, without a database."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

import pytest

from scheduling import bootstrap as b
from scheduling.cli import build_parser
from scheduling.config import Settings
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import START

AGENT = UUID("5b0f3a52-8c7e-4d3f-9a51-0c6f7e2d1a10")


def build(env: dict[str, str], tmp_path: Path) -> b.McpRole:
    return b.build_mcp(
        Settings.from_env(env),
        clock=VirtualClock(START),
        ids=SeededIds(0),
        tokens=b.token_file(tmp_path / "tokens.json"),
        default_agent_id=AGENT,
    )


@pytest.mark.parametrize(
    "flags",
    [{}, {"AGENT_SCHEDULE_API_ENABLED": "1"}, {"AGENT_SCHEDULE_WORKER_ENABLED": "1"}],
)
@pytest.mark.parametrize("environment", ["production", "development"])
def test_either_flag_off_refuses_with_the_bootstrap_code(
    tmp_path: Path, flags: dict[str, str], environment: str
) -> None:
    with pytest.raises(b.StartupRefused) as refused:
        build({"AGENT_SCHEDULE_ENVIRONMENT": environment, **flags}, tmp_path)
    assert refused.value.codes == ["schedule.bootstrap.feature_disabled"]


def test_production_refuses_memory_storage_and_a_static_directory(tmp_path: Path) -> None:
    on = {"AGENT_SCHEDULE_API_ENABLED": "1", "AGENT_SCHEDULE_WORKER_ENABLED": "1"}
    env = {"AGENT_SCHEDULE_ENVIRONMENT": "production", "AGENT_SCHEDULE_STORAGE": "memory", **on}
    with pytest.raises(b.StartupRefused) as refused:
        build(env, tmp_path)
    assert "schedule.bootstrap.memory_repositories" in refused.value.codes
    assert "schedule.bootstrap.principal_directory_not_durable" in refused.value.codes


def test_development_builds_the_edge_over_the_six_tools(tmp_path: Path) -> None:
    on = {"AGENT_SCHEDULE_API_ENABLED": "1", "AGENT_SCHEDULE_WORKER_ENABLED": "1"}
    role = build({"AGENT_SCHEDULE_STORAGE": "memory", **on}, tmp_path)
    try:
        assert len(role.tools.roster) == 6
        assert role.tools.pipeline.governance is not None
        assert role.tools.pipeline.governance.approvals is role.edge.approvals
        # An unknown token resolves to nobody (the file does not even exist yet).
        assert asyncio.run(role.edge.principal("Bearer sch_0000000000000000_x")) is None
    finally:
        asyncio.run(role.close())


def test_mcp_help_lists_both_transports(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["mcp", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for option in ("--transport {stdio,http}", "--tokens-file", "--bearer-file", "--agent-id"):
        assert option in out
