"""The HTTP benchmark's anchor: the least a FastAPI app can do for an authenticated page.

    python bench/anchor_app.py --database-url postgresql://... --tokens-file F --port P

FastAPI + uvicorn + asyncpg, one process, one event loop. ``GET /anchor`` hashes the
bearer token and finds it among the token file's digests (as the control plane's
token file does), reads that principal's row (the one bearer-token lookup against the
database) and answers one ``SELECT ... LIMIT 50`` of the principal's schedules as JSON.
bench/bench_http_external.py serves it beside ``scheduling serve`` and drives both with
the same external load generator, interleaved; every figure is a ratio to this one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import uvicorn
from fastapi import FastAPI, HTTPException, Request

PRINCIPAL = "SELECT enabled, scopes FROM principals WHERE tenant_id = $1 AND principal_id = $2"
PAGE = (
    "SELECT id, state, current_revision, next_fire_at, updated_at FROM schedules"
    " WHERE tenant_id = $1 AND principal_id = $2 ORDER BY updated_at DESC, id DESC LIMIT 50"
)


def build(database_url: str, tokens_file: str) -> FastAPI:
    document = json.loads(Path(tokens_file).read_text(encoding="utf-8"))
    digests = {t["digest"]: (t["tenant_id"], t["principal_id"]) for t in document["tokens"]}
    pool: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool["pg"] = await asyncpg.create_pool(database_url, min_size=2, max_size=10)
        yield
        await pool["pg"].close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/anchor")
    async def anchor(request: Request) -> list[dict[str, Any]]:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        who = digests.get("sha256:" + hashlib.sha256(token.encode()).hexdigest())
        if who is None:
            raise HTTPException(401)
        async with pool["pg"].acquire() as conn:
            principal = await conn.fetchrow(PRINCIPAL, *who)
            if principal is None or not principal["enabled"]:
                raise HTTPException(403)
            rows = await conn.fetch(PAGE, *who)
        return [
            {
                "id": str(r["id"]),
                "state": r["state"],
                "current_revision": r["current_revision"],
                "next_fire_at": None
                if r["next_fire_at"] is None
                else r["next_fire_at"].isoformat(),
                "updated_at": r["updated_at"].isoformat(),
            }
            for r in rows
        ]

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--tokens-file", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = build(args.database_url, args.tokens_file)
    uvicorn.run(app, host=args.host, port=args.port, access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
