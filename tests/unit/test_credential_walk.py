"""The structural credential walk flags credential-named fields and passes clean models."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel, Field
from sqlalchemy import Column, Integer, MetaData, String, Table

from gates.checks.credential_walk import (
    DEFAULT_ALLOWED,
    CredentialField,
    credential_fields,
    credential_words,
    discover_models,
)


class CleanLimits(BaseModel):
    max_steps: int
    max_model_calls: int
    max_tool_calls: int
    max_cost: str


class CleanSchedule(BaseModel):
    schedule_id: str
    authority_version: str
    idempotency_key: str
    session_id: str
    limits: CleanLimits


class Connector(BaseModel):
    name: str
    api_token: str


class Wrapper(BaseModel):
    title: str
    connectors: list[Connector] | None = None


class Aliased(BaseModel):
    value: str = Field(alias="sessionCookie")


@dataclass(frozen=True)
class Lease:
    owner: str
    fencing_token: int


@dataclass(frozen=True)
class Login:
    user: str
    passwordHash: str  # camelCase on purpose


def _metadata(*extra: Column[object]) -> MetaData:
    metadata = MetaData()
    Table(
        "schedules",
        metadata,
        Column("id", String, primary_key=True),
        Column("principal_id", String),
        Column("max_tool_calls", Integer),
        *extra,
    )
    return metadata


def test_clean_models_and_tables_pass() -> None:
    assert credential_fields([CleanSchedule, Lease], _metadata()) == []


def test_a_planted_api_token_field_is_flagged() -> None:
    problems = credential_fields([CleanSchedule, Connector])
    assert problems == [
        CredentialField(f"model:{__name__}.Connector", "api_token", ("token",)),
    ]
    assert "api_token" in str(problems[0])


def test_nested_models_are_walked_through_containers() -> None:
    problems = credential_fields([Wrapper])
    assert [(p.owner.rsplit(".", 1)[-1], p.name) for p in problems] == [("Connector", "api_token")]


def test_aliases_dataclasses_and_camel_case_are_checked() -> None:
    names = {p.name for p in credential_fields([Aliased, Login])}
    assert names == {"sessionCookie", "passwordHash"}


def test_planted_columns_and_tables_are_flagged() -> None:
    metadata = _metadata(Column("session_cookie", String), Column("bearer", String))
    Table("api_keys", metadata, Column("id", Integer, primary_key=True))
    found = {(p.owner, p.name) for p in credential_fields(metadata=metadata)}
    assert found == {
        ("table:schedules", "session_cookie"),
        ("table:schedules", "bearer"),
        ("table:api_keys", "api_keys"),
    }


def test_fencing_token_is_allowed_only_by_its_explicit_entry() -> None:
    assert "fencing_token" in DEFAULT_ALLOWED
    assert credential_fields([Lease]) == []
    flagged = credential_fields([Lease], allowed={})
    assert [p.name for p in flagged] == ["fencing_token"]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("max_tool_calls", ()),
        ("authority_version", ()),
        ("idempotency_key", ()),
        ("session_id", ()),
        ("tokenizer_name", ()),
        ("api_key", ("api_key",)),
        ("apiKey", ("api_key",)),
        ("X-API-Key", ("api_key",)),
        ("refreshToken", ("token",)),
        ("client_secret", ("secret", "client_secret")),
        ("private_key_pem", ("private_key",)),
        ("sessionKey", ("session_key",)),
        ("Authorization", ("authorization",)),
        ("id_token", ("token",)),
        ("saml_assertion", ("assertion",)),
    ],
)
def test_name_classification(name: str, words: tuple[str, ...]) -> None:
    assert credential_words(name) == words


def test_non_models_are_refused_not_skipped() -> None:
    with pytest.raises(TypeError, match="not a pydantic model or a dataclass"):
        credential_fields([int])


def test_discovery_finds_models_defined_in_a_package() -> None:
    models = discover_models("scheduling.domain")
    names = {m.__name__ for m in models}
    assert {"Schedule", "ScheduleRevision", "ScheduleOccurrence", "SecretFinding"} <= names
    assert all(m.__module__.startswith("scheduling.domain") for m in models)


def test_the_product_models_and_tables_are_clean_today() -> None:
    # Regression for the product itself (the gate check will repeat this walk): the
    # only credential-like names are explicitly allowed ones.
    from scheduling.adapters.postgres.tables import metadata

    models = discover_models("scheduling.domain", "scheduling.ports")
    assert len(models) > 10
    assert credential_fields(models, metadata) == []
    allowed_hits = {p.name for p in credential_fields(models, metadata, allowed={})}
    assert allowed_hits <= set(DEFAULT_ALLOWED)
