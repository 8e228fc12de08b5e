"""``Prepared.args`` binds what SQLAlchemy would (ADR 1740, 2341): parameters in the
compiled order, a literal bind's own value, JSON through the dialect's bind processor
(``None`` stays SQL NULL, never the JSON text ``null``), and a missing required
parameter raises instead of binding NULL. Each assertion fails on a plausible slip of
the position-indexed processors: a processor applied at the wrong position (the text
column would arrive serialized), or not at all (the dict would reach asyncpg)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, bindparam, insert, literal
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling.adapters.postgres.prepared import Prepared

T = Table(
    "t",
    MetaData(),
    Column("a", Text),
    Column("doc", JSONB),
    Column("n", Integer),
    Column("meta", JSONB),
)


def _prepared() -> Prepared:
    statement = insert(T).values(
        a=bindparam("a", type_=Text),
        doc=bindparam("doc", type_=JSONB),
        n=literal(7),
        meta=bindparam("meta", type_=JSONB),
    )
    prepared = Prepared(statement)
    prepared.compile(create_async_engine("postgresql+asyncpg://u@localhost/d").dialect)
    return prepared


def test_args_in_order_with_json_serialized_by_position() -> None:
    args = _prepared().args({"a": "text", "doc": {"k": [1, 2]}, "meta": {"m": None}})
    assert args == ["text", json.dumps({"k": [1, 2]}), 7, json.dumps({"m": None})]


def test_none_is_null_not_json_null() -> None:
    assert _prepared().args({"a": None, "doc": None, "meta": None}) == [None, None, 7, None]


def test_a_missing_required_parameter_raises() -> None:
    with pytest.raises(KeyError):
        _prepared().args({"a": "x", "doc": {}})
