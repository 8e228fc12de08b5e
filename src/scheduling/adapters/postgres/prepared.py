"""Hot-path statements compiled once and run on the driver connection (ADR 1740).

A ``Prepared`` wraps a SQLAlchemy construct that has only bound parameters. On first use
it is compiled with the connection's dialect into asyncpg's own SQL (``$n``
placeholders, the same casts SQLAlchemy renders), the bound names in order, and their
bind processors (JSON serialization), found through SQLAlchemy's public type API
(``dialect_impl(dialect).bind_processor(dialect)``). ``Transaction.fetch`` then sends
the SQL through asyncpg directly: asyncpg keeps it prepared per connection, and
SQLAlchemy's per-call work (cache key, execution context, result wrapping, the
greenlet hop) disappears. It
runs inside the transaction ``Transaction`` owns on the same connection (ADR 2160),
and driver errors are translated exactly as for ``Transaction.execute``.
Rows are asyncpg records (``row["name"]``); JSON arrives decoded by the codec
SQLAlchemy's dialect installs on every pooled connection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import TypeEngine

Processor = Callable[[Any], Any]


def processor(type_: TypeEngine[Any], dialect: Dialect) -> Processor | None:
    """The bind processor SQLAlchemy applies to a value of ``type_`` on ``dialect``
    (public API: the dialect's implementation of the type, then its processor)."""
    return type_.dialect_impl(dialect).bind_processor(dialect)


class Prepared:
    """One statement, compiled for asyncpg on first use."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._sql: str | None = None
        self._order: tuple[tuple[str, bool, Any], ...] = ()
        self._processors: tuple[tuple[int, Processor], ...] = ()
        """(position, bind processor) of the parameters that have one (JSON)."""

    def compile(self, dialect: Dialect) -> str:
        """The statement's SQL for ``dialect`` (compiled once)."""
        if self._sql is None:
            compiled: Any = self.statement.compile(dialect=dialect)
            binds = compiled.binds
            names = compiled.positiontup
            self._order = tuple((name, binds[name].required, binds[name].value) for name in names)
            found = ((i, processor(binds[name].type, dialect)) for i, name in enumerate(names))
            self._processors = tuple((i, p) for i, p in found if p is not None)
            sql = str(compiled.string)
            if "__[POSTCOMPILE_" in sql:
                raise ValueError("a prepared statement cannot hold an expanding IN parameter")
            self._sql = sql
        return self._sql

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """Positional arguments for ``params`` (literal binds keep their own value; a
        missing required one raises ``KeyError`` rather than binding NULL)."""
        # One comprehension, then the few processors by position: this runs for every
        # hot-path statement, tens of parameters each (ADR 2341).
        out = [
            params[name] if required else params.get(name, default)
            for name, required, default in self._order
        ]
        for i, process in self._processors:
            if out[i] is not None:
                out[i] = process(out[i])
        return out
