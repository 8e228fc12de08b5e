"""Multi-host database URLs (failover, docs/operations/failover.md) reach asyncpg as
host and port lists in both spellings, with target_session_attrs passed through."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.config import UNPARSEABLE, ConfigurationError


def _connect_args(url: str) -> dict[str, object]:
    engine = create_async_engine(to_asyncpg_url(url))
    _, kwargs = engine.dialect.create_connect_args(engine.url)
    return dict(kwargs)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:pw@db-a:5432,db-b:5433/sched?target_session_attrs=read-write",
        "postgresql://app:pw@/sched?host=db-a:5432&host=db-b:5433&target_session_attrs=read-write",
    ],
)
def test_both_multi_host_spellings_reach_asyncpg_as_lists(url: str) -> None:
    args = _connect_args(url)
    assert args["host"] == ["db-a", "db-b"]
    assert args["port"] == [5432, 5433]
    assert args["target_session_attrs"] == "read-write"
    assert (args["user"], args["password"], args["database"]) == ("app", "pw", "sched")


def test_a_host_without_a_port_gets_the_default_port() -> None:
    assert _connect_args("postgresql://app@db-a,db-b:6000/sched")["port"] == [5432, 6000]


def test_a_single_host_url_is_unchanged() -> None:
    args = _connect_args("postgresql://app@db-a:6000/sched?sslmode=require")
    assert (args["host"], args["port"], args["ssl"]) == ("db-a", 6000, "require")


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "\x00",
        "postgresql://app:hunter2@db:abc/sched",
        "postgresql://app:hunter2@db:99999/sched",
        "postgresql://app:hunter2@[::1/sched",
        "postgresql://app:hunter2@db-a:5432,db-b:x/sched",
        "postgresql://app:hunter2@db/sched\ud800",
    ],
    ids=repr,
)
def test_a_url_that_does_not_parse_is_a_coded_refusal_that_never_quotes_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        to_asyncpg_url(url)
    assert refused.value.code == UNPARSEABLE
    said = f"{refused.value} {refused.value.details}"
    assert "hunter2" not in said
    assert url not in said or not url


def test_a_good_url_with_a_port_is_kept() -> None:
    assert to_asyncpg_url("postgresql://app@[::1]:5433/sched") == (
        "postgresql+asyncpg://app@[::1]:5433/sched"
    )


def test_a_bracketed_ipv6_host_without_a_port_gets_the_default_in_a_host_list() -> None:
    assert to_asyncpg_url("postgresql://app@[::1],db-b:5433/sched") == (
        "postgresql+asyncpg://app@/sched?host=%5B%3A%3A1%5D%3A5432&host=db-b%3A5433"
    )
