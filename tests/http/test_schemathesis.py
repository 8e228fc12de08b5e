"""schemathesis over ``/openapi.json`` against the real server (bounded for CI).

The server (uvicorn over the control plane on PostgreSQL) runs in a thread of its own;
schemathesis generates positive and negative cases for every operation and calls them
with a valid owner token, with a token lacking every schedule scope, and with none.
Checks: no server error, every status code declared, every body valid against its
declared schema, every content type declared. Seeded: the hypothesis seed is printed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from simulation.worlds.http import OWNER, http_world
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

NOBODY = principal("no-scopes", scopes={"memory.read"})
SEED = 1101
EXAMPLES = 20
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


class ThreadedServer:
    def __init__(self, pg_url: str) -> None:
        self.pg_url = pg_url
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.base_url = ""
        self.tokens: dict[str, str] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to the test thread
            self.error = exc
            self.ready.set()

    async def _serve(self) -> None:
        async with http_world(self.pg_url, [OWNER, NOBODY]) as world:
            made = await world.create("seeded")
            assert made.status_code == 201
            self.base_url = world.base_url
            for who in (OWNER, NOBODY):
                self.tokens[who.principal_id] = world.auth(who)["Authorization"]
            self.ready.set()
            await asyncio.to_thread(self.stop.wait)


@pytest.fixture
def server(pg_url: str) -> Iterator[ThreadedServer]:
    served = ThreadedServer(pg_url)
    served.thread.start()
    assert served.ready.wait(60), "the server did not start"
    if served.error is not None:
        raise served.error
    try:
        yield served
    finally:
        served.stop.set()
        served.thread.join(30)


@pytest.mark.parametrize("caller", ["owner", "no_scopes", "anonymous"])
def test_openapi_fuzz_finds_no_server_error_or_schema_violation(
    server: ThreadedServer, caller: str
) -> None:
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    headers: dict[str, Any] = {}
    if caller == "owner":
        headers["Authorization"] = server.tokens[OWNER.principal_id]
    elif caller == "no_scopes":
        headers["Authorization"] = server.tokens[NOBODY.principal_id]
    print(f"schemathesis seed {SEED}; replay: pytest {__file__} -k {caller}")
    operations = 0
    statuses: dict[int, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @seed(SEED)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            case=st.one_of(
                operation.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE),
                operation.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE),
            )
        )
        def run(case: Any) -> None:
            response = case.call_and_validate(
                base_url=server.base_url, headers=dict(headers), checks=CHECKS, timeout=30
            )
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        run()
    print(f"{caller}: {sum(statuses.values())} calls, statuses {sorted(statuses.items())}")
    assert operations >= 14
    assert sum(statuses.values()) >= operations * 5, statuses
    assert any(400 <= code < 500 for code in statuses), statuses
    if caller == "owner":
        assert 200 in statuses or 201 in statuses, statuses
    else:
        assert 201 not in statuses, "a caller without schedule.write created a schedule"
