"""rule.browser.binding_validated over a real uvicorn server against PostgreSQL: what a
website binding (``browser_profile_id``) needs before a definition is accepted.

The world has two tenants. In the owner's tenant: the owner and a peer, both holding
``browser.profile.read``, and a caller without it; in the other tenant, a principal
with the owner's principal id. Profiles: the owner's READY one, the owner's in each
state but READY, the peer's READY one and the other tenant's READY one belonging to
the same principal id (so a read scoped by tenant alone, by principal id alone, or not
at all hands one of them out). Written out from the spec's words: a binding needs the
scope held and requested, and a tenant- and principal-scoped read of a READY profile;
a missing, foreign or non-ready profile fails definition validation (422, its own
``schedule.validation.*`` code, nothing written), on the create and on the
full-definition update of the caller's own schedule (the owner's and the peer's; the
caller without the scope has none), which can also bind and unbind future occurrences. A valid
binding is accepted first, so each refusal is the binding's, not the world's.

Tests of the test: ``scheduling-gates mutate`` (``validation.browser_scope_unchecked``,
``validation.browser_scope_not_requested``, ``validation.browser_not_ready_accepted``,
``profiles.foreign_principal_read``, ``profiles.unscoped_read``).

schedule.create 1.2.0's ``use_website=true`` takes the current chat's trusted binding
through the default website-binding store the composition root wires: only the owner's
chat session is bound, and three other principals (a peer of the owner's tenant, the
owner's principal id in another tenant, that tenant's other principal) ask from a chat
with the same session id. Each is refused with ``schedule.browser_profile_required``
before any approval, nothing written; bound to a READY profile of its own, the same
call succeeds with that profile. (``bindings.session_only``, ``bindings.tenant_only``,
``bindings.principal_id_only``.)
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from gates.checks.tool_checks import effect_rows
from gates.checks.tool_support import EVERYONE, SESSION, WHO, ToolWorld
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.identity import Principal
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.ports.tool_ledger import WebsiteBinding
from simulation.worlds.http import OWNER, HttpWorld, http_world, update_body
from simulation.worlds.service import principal

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.browser.binding_validated")]

SCOPE = "browser.profile.read"
PEER = principal("browser-peer", scopes=OWNER.scopes)
UNSCOPED = principal("browser-unscoped", scopes=OWNER.scopes - {SCOPE})
NAMESAKE = principal(OWNER.principal_id, tenant_id="tenant-browser-other", scopes=OWNER.scopes)
"""Another tenant's principal with the owner's principal id."""

MINE = UUID("6a1f0c2e-0000-4000-8000-000000000001")
PEERS = UUID("6a1f0c2e-0000-4000-8000-000000000002")
NAMESAKES = UUID("6a1f0c2e-0000-4000-8000-000000000003")
UNKNOWN = UUID("6a1f0c2e-0000-4000-8000-0000000000ff")
NOT_READY = {
    state: UUID(f"6a1f0c2e-0000-4000-8000-0000000001{n:02d}")
    for n, state in enumerate(s for s in BrowserProfileState if s is not BrowserProfileState.READY)
}

SCOPE_REQUIRED = "schedule.validation.browser_scope_required"
UNAVAILABLE = "schedule.validation.browser_profile_unavailable"
NOT_READY_CODE = "schedule.validation.browser_profile_not_ready"
SCOPES = ["memory.read", SCOPE]


def profiles() -> list[BrowserProfile]:
    owned = [
        BrowserProfile(MINE, OWNER.tenant_id, OWNER.principal_id, BrowserProfileState.READY),
        BrowserProfile(PEERS, PEER.tenant_id, PEER.principal_id, BrowserProfileState.READY),
        BrowserProfile(
            NAMESAKES, NAMESAKE.tenant_id, NAMESAKE.principal_id, BrowserProfileState.READY
        ),
    ]
    for state, profile_id in NOT_READY.items():
        owned.append(BrowserProfile(profile_id, OWNER.tenant_id, OWNER.principal_id, state))
    return owned


def bound(profile: UUID | None, scopes: list[str] | None = None) -> dict[str, Any]:
    return {
        "browser_profile_id": None if profile is None else str(profile),
        "requested_scopes": SCOPES if scopes is None else scopes,
    }


# name -> (caller, the fields the definition is given, the code that must refuse it)
REFUSED: dict[str, tuple[Any, dict[str, Any], str]] = {
    "the scope held but not requested": (
        OWNER,
        bound(MINE, ["memory.read"]),
        SCOPE_REQUIRED,
    ),
    "the scope neither held nor requested": (
        UNSCOPED,
        bound(MINE, ["memory.read"]),
        SCOPE_REQUIRED,
    ),
    "a profile that does not exist": (OWNER, bound(UNKNOWN), UNAVAILABLE),
    "a READY profile of another principal of the tenant": (OWNER, bound(PEERS), UNAVAILABLE),
    "a READY profile of the same principal id in another tenant": (
        OWNER,
        bound(NAMESAKES),
        UNAVAILABLE,
    ),
    "the owner's profile, bound by its peer": (PEER, bound(MINE), UNAVAILABLE),
    **{
        f"the owner's {state} profile": (OWNER, bound(profile_id), NOT_READY_CODE)
        for state, profile_id in NOT_READY.items()
    },
}


async def rows(world: HttpWorld) -> dict[str, Any]:
    return {
        "counts": await world.counts(),
        "schedules": await world.sql("SELECT * FROM schedules ORDER BY id"),
    }


async def binding_of(world: HttpWorld, sid: str) -> Any:
    detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    return detail["revision"]["browser_profile_id"]


async def test_a_binding_needs_the_scope_and_a_ready_profile_of_the_caller(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, (OWNER, PEER, UNSCOPED, NAMESAKE)) as world:
        for profile in profiles():
            world.plane.api.profiles.put(profile)
        created = await world.create("browser-valid", OWNER, **bound(MINE))
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert await binding_of(world, sid) == str(MINE)
        # The peer's own READY profile binds for the peer: the refusals below are about
        # whose profile it is, not about the profile.
        theirs = await world.create("browser-peer-valid", PEER, **bound(PEERS))
        assert theirs.status_code == 201, theirs.text
        # Each caller with a schedule of its own is refused on its full-definition
        # update too (the caller without the scope has none).
        owned = {OWNER: sid, PEER: theirs.json()["id"]}
        details = {
            who: (await world.call("GET", f"/v1/schedules/{owned[who]}", who)).json()
            for who in owned
        }
        detail = details[OWNER]
        settled = await rows(world)
        wrong: dict[str, Any] = {}
        for n, (name, (caller, change, code)) in enumerate(REFUSED.items()):
            answers = [("create", await world.create(f"browser-{n}", caller, **change))]
            if caller in owned:
                patch = update_body(details[caller], **change)
                path = f"/v1/schedules/{owned[caller]}"
                answers.append(("update", await world.call("PATCH", path, caller, json=patch)))
            for route, answer in answers:
                got = answer.json().get("error", {}).get("code")
                if answer.status_code != 422 or got != code:
                    wrong[f"{route} {name}"] = (answer.status_code, got, code)
            if await rows(world) != settled:
                wrong[f"{name} wrote"] = True
                settled = await rows(world)
        assert wrong == {}, sorted(wrong.items())
        # The full-definition update unbinds, then binds again (future occurrences).
        unbound = update_body(detail, **bound(None, ["memory.read"]))
        answer = await world.call("PATCH", f"/v1/schedules/{sid}", json=unbound)
        assert answer.status_code == 200, answer.text
        assert await binding_of(world, sid) is None
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        answer = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, **bound(MINE))
        )
        assert answer.status_code == 200, answer.text
        assert await binding_of(world, sid) == str(MINE)
    gate_evidence.record("refusals", sorted(REFUSED))


REQUIRED = "schedule.browser_profile_required"


def web_create(world: ToolWorld, n: int) -> dict[str, Any]:
    return {
        "title": f"Feed digest {n}",
        "instruction": "Read my feed and summarize it.",
        "at": world.later(days=5),
        "use_website": True,
    }


def own_profile(who: Principal, n: int) -> BrowserProfile:
    origin = (f"https://site-{n}.example",)
    return BrowserProfile(
        UUID(f"6a1f0c2e-0000-4000-8000-0000000002{n:02d}"),
        who.tenant_id,
        who.principal_id,
        BrowserProfileState.READY,
        origin,
    )


async def bound_profile(world: ToolWorld, schedule_id: str) -> Any:
    (revision,) = await world.revisions(schedule_id)
    return revision["definition"].get("browser_profile_id")


async def test_use_website_takes_only_the_callers_own_chat_binding(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        profiles = {who: own_profile(who, n) for n, who in enumerate(EVERYONE)}
        for profile in profiles.values():
            world.profiles.put(profile)
        mine = profiles[WHO]
        world.websites.bind(WHO, SESSION, WebsiteBinding(mine.id, mine.origins))
        # The owner's own binding works: what the others are refused is not the tool.
        created = await world.call(
            "schedule.create", web_create(world, 0), "web-0", version="1.2.0"
        )
        assert created.ok, created
        assert created.output is not None
        assert await bound_profile(world, created.output["schedule_id"]) == str(mine.id)
        # Same session id, another principal: the owner's binding is not theirs.
        others = [who for who in EVERYONE if who != WHO]
        wrong: dict[str, Any] = {}
        for n, who in enumerate(others, start=1):
            before, asked = await effect_rows(world), len(world.approvals.requests)
            refused = await world.call(
                "schedule.create", web_create(world, n), f"web-{n}", who=who, version="1.2.0"
            )
            if refused.ok or refused.reason_code != REQUIRED:
                wrong[f"{who} code"] = (refused.status, refused.reason_code, refused.output)
            if len(world.approvals.requests) != asked:
                wrong[f"{who} asked"] = world.approvals.requests[-1].view.get("website")
            if await effect_rows(world) != before:
                wrong[f"{who} wrote"] = True
        assert wrong == {}, wrong
        # Bound to a READY profile of its own, each one's call binds that profile.
        for n, who in enumerate(others, start=len(others) + 1):
            theirs = profiles[who]
            world.websites.bind(who, SESSION, WebsiteBinding(theirs.id, theirs.origins))
            own = await world.call(
                "schedule.create", web_create(world, n), f"web-{n}", who=who, version="1.2.0"
            )
            assert own.ok, (who, own)
            assert own.output is not None
            profile = await bound_profile(world, own.output["schedule_id"])
            assert profile == str(theirs.id), who
    finally:
        await world.close()
