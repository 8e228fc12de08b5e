"""HTTP control plane throughput through uvicorn against PostgreSQL.

    python bench/bench_http.py --output bench/results/http.json

One uvicorn server (its own thread and event loop) serves the real control plane
(``bootstrap.build_control_plane`` over a fresh migrated database) plus a trivial
FastAPI endpoint on the same app. In the same run, a client with a fixed concurrency
measures requests/s and p50/p99 latency of ``POST /v1/schedules``, ``GET /v1/schedules``
(one page of 50) and the trivial endpoint; the anchor ratios (create/trivial,
list/trivial) are what to compare across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from scheduling.bootstrap import ControlPlane
from scheduling.http.app import create_app
from scheduling.testing import upgrade_to_head
from simulation.provider import acquire_server
from simulation.worlds.http import OWNER, body, http_world


def with_trivial(plane: ControlPlane) -> Any:
    app = create_app(plane)

    @app.get("/bench/trivial")
    async def trivial() -> dict[str, bool]:
        return {"ok": True}

    return app


class Server:
    def __init__(self, url: str) -> None:
        self.url = url
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.base = ""
        self.auth: dict[str, str] = {}
        self.thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        async with http_world(self.url, app_factory=with_trivial) as world:
            self.base, self.auth = world.base_url, world.auth(OWNER)
            self.ready.set()
            await asyncio.to_thread(self.stop.wait)


async def measure(
    client: httpx.AsyncClient, make: Any, total: int, concurrency: int
) -> dict[str, Any]:
    latencies: list[float] = []
    counter = iter(range(total))

    async def one_worker() -> None:
        for n in counter:
            started = time.perf_counter()
            response = await make(client, n)
            latencies.append(time.perf_counter() - started)
            assert response.status_code in (200, 201), response.text

    started = time.perf_counter()
    await asyncio.gather(*(one_worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": total,
        "requests_per_second": round(total / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 2),
    }


async def run(server: Server, total: int, concurrency: int) -> dict[str, Any]:
    auth = server.auth

    async def create(client: httpx.AsyncClient, n: int) -> httpx.Response:
        return await client.post(
            "/v1/schedules",
            json=body(title=f"bench {n}"),
            headers={**auth, "Idempotency-Key": f"bench-{n}"},
        )

    async def listing(client: httpx.AsyncClient, n: int) -> httpx.Response:
        return await client.get("/v1/schedules", params={"limit": 50}, headers=auth)

    async def trivial(client: httpx.AsyncClient, n: int) -> httpx.Response:
        return await client.get("/bench/trivial")

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=server.base, limits=limits, timeout=60) as client:
        await measure(client, trivial, 50, concurrency)  # warm up
        results = {
            "trivial": await measure(client, trivial, total, concurrency),
            "create": await measure(client, create, total, concurrency),
            "list": await measure(client, listing, total, concurrency),
        }
    base = results["trivial"]["requests_per_second"]
    results["ratio_create_to_trivial"] = round(results["create"]["requests_per_second"] / base, 3)
    results["ratio_list_to_trivial"] = round(results["list"]["requests_per_second"] / base, 3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    db = acquire_server()
    try:
        url = db.create_database()
        asyncio.run(upgrade_to_head(url))
        server = Server(url)
        server.thread.start()
        assert server.ready.wait(60), "server did not start"
        try:
            results = asyncio.run(run(server, args.requests, args.concurrency))
        finally:
            server.stop.set()
            server.thread.join(30)
        db.drop_database(url)
    finally:
        db.close()
    report = {
        "benchmark": "http",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "concurrency": args.concurrency,
        **results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
