"""The HTTP edge's contract over a real uvicorn server against PostgreSQL: stable
envelopes for every kind of bad input, authority before effect, conflicts with the
current revision, size limits, the list/point-read split, the linked run and session
routes, readiness and the access log."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from scheduling.adapters.token_file import issue_token, revoke_token
from scheduling.ports.records import PrincipalRecord
from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

READER = principal("reader", scopes={"schedule.read", "schedule.cancel"})
CANCELLER = principal("canceller", scopes={"schedule.read", "schedule.write", "schedule.cancel"})


def code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


async def created(world: HttpWorld, key: str = "k", **overrides: Any) -> dict[str, Any]:
    response = await world.create(key, **overrides)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_bad_input_gets_stable_envelopes_and_writes_nothing(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        before = await world.counts()
        auth = world.auth()
        cases = [
            (
                await world.call("POST", "/v1/schedules", json=body()),
                400,
                "schedule.http.idempotency_key_required",
            ),
            (
                await world.client.post(
                    "/v1/schedules",
                    content=b"{not json",
                    headers={**auth, "Idempotency-Key": "a", "content-type": "application/json"},
                ),
                400,
                "schedule.http.malformed_body",
            ),
            (await world.create("b", surprise=1), 422, "schedule.http.invalid_request"),
            (
                await world.create("c", run_timeout_seconds="600"),
                422,
                "schedule.http.invalid_request",
            ),
            (
                await world.create("d", run_timeout_seconds=0),
                422,
                "schedule.revision.non_positive_timeout",
            ),
            (
                await world.create("e", requested_scopes=["root.everything"]),
                422,
                "schedule.validation.unknown_scope",
            ),
            (
                await world.create("f", instruction="use AKIAIOSFODNN7EXAMPLE now"),
                422,
                "schedule.secret_detected",
            ),
            (
                await world.create("g", run_timeout_seconds=10**9),
                422,
                "schedule.validation.ceiling_exceeded",
            ),
            (
                await world.call(
                    "POST", "/v1/schedules", json=[1, 2], headers={"Idempotency-Key": "h"}
                ),
                422,
                "schedule.http.invalid_request",
            ),
            (
                await world.call("GET", "/v1/schedules", params={"limit": 0}),
                422,
                "schedule.http.invalid_request",
            ),
            (
                await world.call("GET", "/v1/schedules", params={"cursor": "!!"}),
                422,
                "schedule.page.invalid_cursor",
            ),
            (
                await world.call("GET", "/v1/schedules", params={"state": "DONE"}),
                422,
                "schedule.http.invalid_request",
            ),
            (
                await world.call("GET", "/v1/schedules/not-a-uuid"),
                422,
                "schedule.http.invalid_request",
            ),
            (await world.call("GET", "/v1/nothing"), 404, "schedule.http.route_not_found"),
            (await world.call("PUT", "/v1/schedules"), 405, "schedule.http.method_not_allowed"),
        ]
        for response, status, expected in cases:
            assert response.status_code == status, (expected, response.text)
            assert code(response) == expected, response.text
            assert "Traceback" not in response.text
            assert "pydantic" not in response.text
            assert response.headers["x-request-id"]
        # Rejected input is never echoed back.
        secret = await world.create("i", instruction="use AKIAIOSFODNN7EXAMPLE now")
        assert "AKIA" not in secret.text
        odd = await world.create("j", sneaky_field_name="value-xyz")
        assert "value-xyz" not in odd.text
        assert await world.counts() == before


async def test_authentication_and_exact_scope_before_any_effect(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, READER, CANCELLER]) as world:
        before = await world.counts()
        anonymous = await world.call(
            "POST", "/v1/schedules", None, json=body(), headers={"Idempotency-Key": "x"}
        )
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        forged = await world.client.get("/v1/schedules", headers={"Authorization": "Bearer sch_x"})
        assert (forged.status_code, code(forged)) == (401, "schedule.http.unauthenticated")
        # A reader may not create, even with an invalid body: 403 comes first.
        for payload in (body(), {"junk": True}):
            denied = await world.call(
                "POST", "/v1/schedules", READER, json=payload, headers={"Idempotency-Key": "r"}
            )
            assert (denied.status_code, code(denied)) == (403, "schedule.auth.scope_required")
        assert await world.counts() == before
        # schedule.cancel is no authority over runs.
        run = await world.call("POST", f"/v1/runs/{OWNER_RUN}/cancel", CANCELLER)
        assert (run.status_code, code(run)) == (403, "schedule.auth.scope_required")
        # Scopes come from the directory, not the token: revoking one takes effect now.
        sid = (await created(world))["id"]
        async with world.admin.begin() as uow:
            await uow.principals.put(
                PrincipalRecord(
                    OWNER.tenant_id,
                    OWNER.principal_id,
                    True,
                    frozenset({"schedule.write"}),
                    {"roles": ["member"]},
                    world.clock.now(),
                    world.clock.now(),
                )
            )
            await uow.commit()
        read = await world.call("GET", f"/v1/schedules/{sid}")
        assert (read.status_code, code(read)) == (403, "schedule.auth.scope_required")
        async with world.admin.begin() as uow:
            await uow.principals.put(
                PrincipalRecord(
                    OWNER.tenant_id,
                    OWNER.principal_id,
                    False,
                    OWNER.scopes,
                    {"roles": ["member"]},
                    world.clock.now(),
                    world.clock.now(),
                )
            )
            await uow.commit()
        disabled = await world.call("GET", "/v1/schedules")
        assert (disabled.status_code, code(disabled)) == (
            403,
            "schedule.auth.principal_unavailable",
        )
        # A revoked token stops at once (the file is re-read).
        entry, token = issue_token(world.token_path, "tenant-a", "reader", world.clock.now())
        ok = await world.client.get("/v1/schedules", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        revoke_token(world.token_path, entry.token_id)
        gone = await world.client.get("/v1/schedules", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 401


OWNER_RUN = "00000000-0000-4000-8000-000000000001"


async def test_conflicts_replays_and_binding_rule(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        first = await world.create("same")
        assert first.status_code == 201
        again = await world.create("same")
        assert (again.status_code, again.json()["replayed"]) == (200, True)
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["id"] == first.json()["id"]
        reused = await world.create("same", title="Something else")
        assert (reused.status_code, code(reused)) == (409, "schedule.idempotency.key_reused")
        sid = first.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        patched = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, title="Renamed")
        )
        assert (patched.status_code, patched.json()["current_revision"]) == (200, 2)
        stale = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, title="Stale")
        )
        assert (stale.status_code, code(stale)) == (409, "schedule.lifecycle.stale_revision")
        assert stale.json()["error"]["details"]["current_revision"] == 2
        for action in ("pause", "resume"):
            stale = await world.call(
                "POST", f"/v1/schedules/{sid}/{action}", json={"expected_revision": 1}
            )
            assert stale.status_code == 409
            assert stale.json()["error"]["details"]["current_revision"] == 2
        # browser_profile_id needs browser.profile.read requested, then a READY profile.
        fresh = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        profile = "11111111-2222-4333-8444-555555555555"
        unscoped = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(fresh, browser_profile_id=profile)
        )
        assert code(unscoped) == "schedule.validation.browser_scope_required"
        scoped = await world.call(
            "PATCH",
            f"/v1/schedules/{sid}",
            json=update_body(
                fresh,
                browser_profile_id=profile,
                requested_scopes=["browser.profile.read", "memory.read"],
            ),
        )
        assert code(scoped) == "schedule.validation.browser_profile_unavailable"
        assert (await world.call("GET", f"/v1/schedules/{sid}")).json()["current_revision"] == 2
        cancel = await world.call("DELETE", f"/v1/schedules/{sid}", params={"expected_revision": 2})
        assert (cancel.status_code, cancel.json()["state"]) == (200, "CANCELLED")
        twice = await world.call("DELETE", f"/v1/schedules/{sid}", params={"expected_revision": 2})
        assert (twice.status_code, twice.json()["state"]) == (200, "CANCELLED")
        resume = await world.call(
            "POST", f"/v1/schedules/{sid}/resume", json={"expected_revision": 2}
        )
        assert (resume.status_code, code(resume)) == (409, "schedule.lifecycle.illegal_transition")


async def test_oversized_bodies_are_413(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        before = await world.counts()
        big = {**body(), "instruction": "x" * 70_000}
        declared = await world.call(
            "POST", "/v1/schedules", json=big, headers={"Idempotency-Key": "big"}
        )
        assert (declared.status_code, code(declared)) == (413, "schedule.http.body_too_large")

        async def chunks() -> Any:
            for _ in range(80):
                yield b" " * 1024

        streamed = await world.client.post(
            "/v1/schedules",
            content=chunks(),
            headers={**world.auth(), "Idempotency-Key": "big2", "content-type": "application/json"},
        )
        assert (streamed.status_code, code(streamed)) == (413, "schedule.http.body_too_large")
        assert await world.counts() == before


async def test_list_preview_point_read_transcript_and_erasure(pg_url: str) -> None:
    long = "Summarize " + "the overnight news " * 40 + "[script:succeed]"
    async with http_world(pg_url) as world:
        made = await created(world, instruction=long)
        listed = (await world.call("GET", "/v1/schedules")).json()["items"]
        assert "instruction" not in listed[0]
        assert len(listed[0]["instruction_preview"]) <= 120 < len(long)
        assert long not in str(listed)
        assert (await world.call("GET", f"/v1/schedules/{made['id']}")).json()["revision"][
            "instruction"
        ] == long
        world.clock.advance_to(datetime.fromisoformat(made["next_fire_at"]) + timedelta(seconds=1))
        assert (await world.scheduler().worker.run_once()).errors == {}
        runner = world.run_worker()
        while await runner.worker.run_once() is not None:
            pass
        inbox = (await world.call("GET", f"/v1/schedules/{made['id']}/occurrences")).json()
        occurrence = inbox["items"][0]
        assert occurrence["run"]["status"] == "COMPLETED"
        session = occurrence["session_id"]
        transcript = await world.call("GET", f"/v1/sessions/{session}/transcript")
        assert transcript.status_code == 200
        assert long not in transcript.text  # the scheduler's seed is omitted
        assert transcript.json()["events"], "the assistant's answer stays"
        erased = await world.call("DELETE", f"/v1/sessions/{session}")
        assert (erased.status_code, erased.json()["occurrences_marked"]) == (200, 1)
        after = (await world.call("GET", f"/v1/schedules/{made['id']}/occurrences")).json()
        row = after["items"][0]
        assert (row["run_id"], row["session_id"], row["run"]) == (None, None, None)
        assert row["links_erased_at"] is not None
        again = await world.call("DELETE", f"/v1/sessions/{session}")
        assert (again.status_code, code(again)) == (404, "schedule.session.not_found")


async def test_health_readiness_and_access_log(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with http_world(pg_url) as world:
        assert (await world.call("GET", "/healthz", None)).json() == {"status": "ok"}
        assert (await world.call("GET", "/readyz", None)).status_code == 200
        with caplog.at_level(logging.INFO, logger="scheduling.http.access"):
            made = await created(world, instruction="Very private instruction text here")
            await world.call("GET", f"/v1/schedules/{made['id']}")
        lines = [r.getMessage() for r in caplog.records if r.name == "scheduling.http.access"]
        assert len(lines) == 2
        assert lines[0].startswith("POST /v1/schedules 201 ")
        assert lines[1].startswith("GET /v1/schedules/{schedule_id} 200 ")
        token = world.tokens[(OWNER.tenant_id, OWNER.principal_id)]
        for line in lines:
            assert "request_id=" in line
            assert made["id"] not in line
            assert "private" not in line
            assert token not in line
        await world.sql("UPDATE alembic_version SET version_num = 'older'")
        behind = await world.call("GET", "/readyz", None)
        assert (behind.status_code, code(behind)) == (503, "schedule.http.not_ready")
        assert behind.json()["error"]["details"]["problems"] == [
            "schedule.readiness.schema_not_at_head"
        ]
