"""Text hygiene over real HTTP against PostgreSQL (issue 23 findings 1 and 2).

A NUL byte or a lone UTF-16 surrogate in any free text the product stores (title,
instruction, a cadence string, the requested scopes, the Idempotency-Key header)
answers 422 ``schedule.text.invalid`` in the spec's error envelope, before any hashing,
scanning or SQL: nothing is stored, nothing of the instruction reaches the server's
log (caplog) or PostgreSQL's log (a private cluster, so the log read is this test's
own). A body that is not UTF-8 at all is a clean 400. Never a 5xx, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from scheduling.adapters.postgres.migrations import upgrade_to_head
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.worlds.http import HttpWorld, body, http_world, update_body

pytestmark = pytest.mark.postgres

MARKER = "ZebraQuokkaMarker"
"""Planted in every refused instruction: it must appear in no log."""


@pytest.fixture(scope="module")
def private() -> Iterator[PrivateCluster]:
    with private_cluster() as cluster:
        yield cluster


@pytest.fixture
async def world(private: PrivateCluster) -> AsyncIterator[tuple[HttpWorld, PrivateCluster]]:
    url = private.server.create_database()
    await upgrade_to_head(url)
    try:
        async with http_world(url) as served:
            yield served, private
    finally:
        await asyncio.to_thread(private.server.drop_database, url)


def _raw(world: HttpWorld, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    # json.dumps escapes a lone surrogate as the JSON text "\ud800" (ensure_ascii).
    return {
        "content": json.dumps(payload).encode("ascii"),
        "headers": {**world.auth(), "Idempotency-Key": key, "content-type": "application/json"},
    }


def _bad_bodies() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    for name, bad in (("nul", "\x00"), ("surrogate", "\ud800")):
        cases += [
            (f"title-{name}", body(title=f"Brief {bad} {MARKER}")),
            (f"instruction-{name}", body(instruction=f"Summarize {MARKER} news{bad} today")),
            (
                f"timezone-{name}",
                body(
                    instruction=f"Summarize {MARKER}",
                    cadence={"kind": "DAILY", "local_time": "09:00", "timezone": f"Europe/{bad}"},
                ),
            ),
            (
                f"scope-{name}",
                body(instruction=f"Summarize {MARKER}", requested_scopes=[f"memory.read{bad}"]),
            ),
        ]
    return cases


def _assert_text_invalid(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, (field, response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == "schedule.text.invalid", (field, response.text)
    assert set(error) == {"code", "message", "details"}
    assert MARKER not in response.text
    assert "Traceback" not in response.text


async def test_nul_and_lone_surrogates_are_422_and_leave_no_trace(
    world: tuple[HttpWorld, PrivateCluster], caplog: pytest.LogCaptureFixture
) -> None:
    served, private = world
    before = await served.counts()
    log_start = private.log_path.stat().st_size
    with caplog.at_level(logging.DEBUG):
        for n, (field, payload) in enumerate(_bad_bodies()):
            response = await served.client.post("/v1/schedules", **_raw(served, f"k{n}", payload))
            _assert_text_invalid(response, field)
        # The full-definition PATCH refuses the same before touching a row.
        made = await served.create("good")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        detail = (await served.call("GET", f"/v1/schedules/{sid}")).json()
        update = update_body(detail, instruction=f"Rewrite {MARKER}\x00")
        patched = await served.client.patch(
            f"/v1/schedules/{sid}",
            content=json.dumps(update).encode(),
            headers={**served.auth(), "content-type": "application/json"},
        )
        _assert_text_invalid(patched, "patch-instruction")
        # Idempotency-Key: a lone surrogate arrives UTF-8 encoded (the header's bytes).
        header = "key-\ud800".encode("utf-8", "surrogatepass")
        keyed = await served.client.post(
            "/v1/schedules",
            content=json.dumps(body(instruction=f"Summarize {MARKER}")).encode(),
            headers=[
                (b"authorization", served.auth()["Authorization"].encode()),
                (b"idempotency-key", header),
                (b"content-type", b"application/json"),
            ],
        )
        _assert_text_invalid(keyed, "idempotency-key")
        # A body that is not UTF-8 at all is a malformed body, not a server error.
        garbage = await served.client.post(
            "/v1/schedules",
            content=b'{"title": "\xff\xfe ' + MARKER.encode() + b'"}',
            headers={**served.auth(), "Idempotency-Key": "g", "content-type": "application/json"},
        )
        assert (garbage.status_code, garbage.json()["error"]["code"]) == (
            400,
            "schedule.http.malformed_body",
        ), garbage.text
    after = await served.counts()
    assert after["schedules"] == before["schedules"] + 1  # only the good one
    rows = await served.sql("SELECT CAST(r AS text) AS row FROM schedule_revisions AS r")
    assert all(MARKER not in str(row) for row in rows)
    assert MARKER not in caplog.text
    with private.log_path.open("rb") as log:
        log.seek(log_start)
        server_log = log.read().decode("utf-8", "replace")
    assert MARKER not in server_log, server_log[-2000:]
    assert "ERROR" not in server_log, server_log[-2000:]


async def test_of_the_test_the_log_read_sees_a_nul_that_reaches_postgresql(
    world: tuple[HttpWorld, PrivateCluster],
) -> None:
    """The wrong implementation - the JSON text with its NUL escape sent to PostgreSQL -
    leaves the marker in the very log the check above reads (finding 1's leak)."""
    served, private = world
    log_start = private.log_path.stat().st_size
    leaked = json.dumps({"instruction": f"Summarize {MARKER}\x00 today"})
    with pytest.raises(Exception, match=r"Unicode|unsupported|escape"):
        await served.sql("SELECT CAST(:doc AS jsonb) AS j", doc=leaked)
    with private.log_path.open("rb") as log:
        log.seek(log_start)
        server_log = log.read().decode("utf-8", "replace")
    assert MARKER in server_log
    assert "ERROR" in server_log
