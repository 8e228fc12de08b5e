"""Support for the HTTP edge rule checks (not a test module): the route x scope table the
spec states, the principal's scopes switched in the durable directory between requests,
a fingerprint of every product table, and a capture of every log record.

The durable principal directory is read on every request (``scheduling.http.auth``), so
one owner whose scope set is rewritten between requests calls each route with each
single scope against its own, real resources."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from scheduling.domain.identity import Principal
from simulation.worlds.http import HttpWorld

# The spec's mapping ("Identity, authorization, and policy"; the run and session scopes
# of the existing vocabulary); erasing one's own session needs no scope.
ROUTE_SCOPES: dict[tuple[str, str], str | None] = {
    ("GET", "/v1/schedules"): "schedule.read",
    ("POST", "/v1/schedules"): "schedule.write",
    ("GET", "/v1/schedules/{schedule_id}"): "schedule.read",
    ("PATCH", "/v1/schedules/{schedule_id}"): "schedule.write",
    ("POST", "/v1/schedules/{schedule_id}/pause"): "schedule.write",
    ("POST", "/v1/schedules/{schedule_id}/resume"): "schedule.write",
    ("DELETE", "/v1/schedules/{schedule_id}"): "schedule.cancel",
    ("GET", "/v1/schedules/{schedule_id}/occurrences"): "schedule.read",
    ("GET", "/v1/runs/{run_id}"): "run.read",
    ("POST", "/v1/runs/{run_id}/cancel"): "run.cancel",
    ("GET", "/v1/sessions/{session_id}/transcript"): "session.read",
    ("DELETE", "/v1/sessions/{session_id}"): None,
}
PUBLIC_ROUTES = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}
"""Unauthenticated probes (no security requirement)."""

VOCABULARY = (
    "schedule.read",
    "schedule.write",
    "schedule.cancel",
    "run.read",
    "run.cancel",
    "session.read",
    "memory.read",
    "web.search",
    "browser.profile.read",
)
AUTH_CODES = {
    "schedule.auth.scope_required",
    "schedule.auth.principal_unavailable",
    "schedule.http.unauthenticated",
}
_UNTRACKED = {"alembic_version", "principals"}


async def set_scopes(world: HttpWorld, who: Principal, scopes: Iterable[str]) -> None:
    """Rewrite ``who``'s current scopes in the durable directory (admin login)."""
    await world.sql(
        "UPDATE principals SET scopes = :s WHERE tenant_id = :t AND principal_id = :p",
        s=sorted(scopes),
        t=who.tenant_id,
        p=who.principal_id,
    )


async def set_enabled(world: HttpWorld, who: Principal, enabled: bool) -> None:
    await world.sql(
        "UPDATE principals SET enabled = :e WHERE tenant_id = :t AND principal_id = :p",
        e=enabled,
        t=who.tenant_id,
        p=who.principal_id,
    )


async def tables(world: HttpWorld) -> list[str]:
    rows = await world.sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
    )
    return [str(r["tablename"]) for r in rows if r["tablename"] not in _UNTRACKED]


async def fingerprint(world: HttpWorld, names: list[str]) -> dict[str, str]:
    """An md5 of every row of every product table (the principal rows excepted)."""
    parts = [
        f"SELECT '{n}' AS t, md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), ''))"
        f" AS h FROM {n} x"
        for n in names
    ]
    rows = await world.sql(" UNION ALL ".join(parts))
    return {str(r["t"]): str(r["h"]) for r in rows}


async def dump(world: HttpWorld, names: list[str]) -> str:
    """Every row of every product table as text (to search for what must not be there)."""
    out: list[str] = []
    for n in names:
        rows = await world.sql(f"SELECT x::text AS r FROM {n} x")
        out.extend(str(r["r"]) for r in rows)
    return "\n".join(out)


def error_code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return code if isinstance(code, str) else None
    return None


class Records(logging.Handler):
    """Every log record of the process, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.records: list[logging.LogRecord] = []
        self._format = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self._format.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


SERVER_LOGGERS = ("scheduling", "uvicorn", "starlette", "fastapi")
"""The server's loggers (the product's, access log included, and the ASGI stack's),
captured down to DEBUG; every other logger's records reach the capture at the level
it is configured for (the root logger's level is left alone, so SQLAlchemy does not
start echoing statements because of the capture)."""


@contextlib.contextmanager
def captured_logs() -> Iterator[Records]:
    """Capture every record reaching the root logger while the block runs."""
    handler = Records()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in SERVER_LOGGERS}
    root.addHandler(handler)
    for name in SERVER_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
