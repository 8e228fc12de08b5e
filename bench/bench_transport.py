"""Client CPU per transport operation under asyncio and uvloop (ADR 2440).

    python bench/bench_transport.py --loops asyncio,uvloop,asyncio,uvloop

On the provider's PostgreSQL, ``--iterations`` of each, ``time.process_time`` per
operation: an empty unit of work (checkout, BEGIN with the scope, COMMIT, check-in), a
rolled-back one (how a read request's ends, ADR 2380 and 2540), a pool checkout and
check-in alone (what holding one connection per drain batch would remove) and one
``select 1`` round trip on a held connection. Loops run interleaved in the order given;
uvloop must be installed for ``uvloop``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import time

from scheduling.testing import PostgresUnitOfWorkFactory
from simulation.provider import acquire_server


async def measure(url: str, iterations: int) -> dict[str, float]:
    factory = PostgresUnitOfWorkFactory.from_url(url)
    out: dict[str, float] = {}
    try:
        for _ in range(200):  # warm the pool and the statement caches
            async with factory.begin(tenant_id="t") as uow:
                await uow.commit()
        started = time.process_time()
        for _ in range(iterations):
            async with factory.begin(tenant_id="t") as uow:
                await uow.commit()
        out["empty_unit_of_work_us"] = (time.process_time() - started) / iterations * 1e6
        # A read request's unit of work ends rolled back (ADR 2380).
        started = time.process_time()
        for _ in range(iterations):
            async with factory.begin(tenant_id="t"):
                pass
        out["rolled_back_unit_of_work_us"] = (time.process_time() - started) / iterations * 1e6
        engine = factory.engine  # what a unit of work checks out through
        started = time.process_time()
        for _ in range(iterations):
            conn = await engine.connect()
            await conn.close()
        out["checkout_checkin_us"] = (time.process_time() - started) / iterations * 1e6
        async with engine.connect() as conn:
            started = time.process_time()
            for _ in range(iterations):
                await conn.exec_driver_sql("select 1")
            out["round_trip_us"] = (time.process_time() - started) / iterations * 1e6
    finally:
        await factory.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loops", default="asyncio,uvloop,asyncio,uvloop")
    parser.add_argument("--iterations", type=int, default=3000)
    args = parser.parse_args()
    with acquire_server() as server:
        url = server.create_database()
        for loop in args.loops.split(","):
            if loop == "uvloop":
                uvloop = importlib.import_module("uvloop")  # optional, only for the A/B

                result = uvloop.run(measure(url, args.iterations))
            else:
                result = asyncio.run(measure(url, args.iterations))
            print(loop, {k: round(v, 1) for k, v in result.items()}, flush=True)


if __name__ == "__main__":
    main()
