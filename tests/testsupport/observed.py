"""A repository transaction that shows each statement to the test before sending it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asyncpg import Record
from sqlalchemy import Executable, text
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.roles import PRINCIPAL_SETTING, TENANT_SETTING
from scheduling.adapters.postgres.uow import Transaction
from scheduling.domain.identity import Principal


async def act_as(conn: AsyncConnection, principal: Principal) -> None:
    """Row-level security's scope settings for ``principal``, local to the open
    transaction (what a unit of work sets at its start)."""
    await conn.execute(
        text("SELECT set_config(:t, :tv, true), set_config(:p, :pv, true)"),
        {
            "t": TENANT_SETTING,
            "tv": principal.tenant_id,
            "p": PRINCIPAL_SETTING,
            "pv": principal.principal_id,
        },
    )


class ObservedTransaction(Transaction):
    """Attached to ``conn``; every statement the repositories send, prepared or
    compiled, is first given to ``observe`` as asyncpg would receive it (SQL with
    ``$n`` parameters and their positional values), then sent as usual."""

    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__()
        self.attach(conn)
        self.conn = conn

    async def observe(self, sql: str, args: list[Any]) -> None:
        raise NotImplementedError

    async def fetch(
        self, prepared: Prepared, params: Mapping[str, Any] | None = None
    ) -> list[Record]:
        await self.observe(prepared.compile(self.conn.dialect), prepared.args(params or {}))
        return await super().fetch(prepared, params)

    async def execute(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> CursorResult[Any]:
        # Values bound first: rendering post-compile parameters needs every value,
        # including those of statements built once with bound parameters.
        bound: Any = statement.params(dict(params)) if params else statement  # type: ignore[attr-defined]
        compiled = bound.compile(
            dialect=self.conn.dialect, compile_kwargs={"render_postcompile": True}
        )
        values = compiled.construct_params()
        await self.observe(str(compiled), [values[name] for name in compiled.positiontup])
        return await super().execute(statement, params)
