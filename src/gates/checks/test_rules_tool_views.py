"""rule.browser.binding_validated: what the user approves for use_website=true.

On PostgreSQL through the ordinary tool pipeline (``ToolWorld``): schedule.create with
use_website=true on the chat's trusted binding is asked with a view that identifies
the profile and every origin (spec: "Its approval presentation identifies the profile
and origins") and the requested scopes the schedule will really carry,
browser.profile.read - never the empty set a plain create shows - and the stored
revision carries exactly what the view showed. The expected view is written out by
hand.

Tests of the test: ``scheduling-gates mutate`` (``tools.website_view_scopes_stale``,
``tools.website_view_origins_dropped``).
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import pytest

from gates.checks.tool_checks import last_view
from gates.checks.tool_support import SESSION, WHO, ToolWorld
from scheduling.domain.cadence import format_instant
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.ports.tool_ledger import WebsiteBinding

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.browser.binding_validated")]

PROFILE = UUID("5b2c1d0e-9f8a-4b7c-8d6e-5f4a3b2c1d0e")
ORIGINS = ("https://news.example", "https://mail.example")


@pytest.mark.parametrize("version", ["1.2.0", "1.3.0"])
async def test_use_website_view_shows_profile_origins_and_scope(pg_url: str, version: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        world.profiles.put(
            BrowserProfile(
                PROFILE, WHO.tenant_id, WHO.principal_id, BrowserProfileState.READY, ORIGINS
            )
        )
        world.websites.bind(WHO, SESSION, WebsiteBinding(PROFILE, ORIGINS))
        at = world.later(days=3)
        args = {
            "title": "Feed digest",
            "instruction": "Read my feed and summarize it.",
            "at": at,
            "use_website": True,
        }
        result = await world.call("schedule.create", args, f"web-view-{version}", version=version)
        assert result.ok, result
        assert result.output is not None
        want = {
            "title": "Feed digest",
            "instruction": "Read my feed and summarize it.",
            "at": format_instant(datetime.fromisoformat(at)),
            "website": {"browser_profile_id": str(PROFILE), "origins": list(ORIGINS)},
            "requested_scopes": ["browser.profile.read"],
        }
        assert last_view(world) == want
        (revision,) = await world.revisions(result.output["schedule_id"])
        stored = revision["definition"]
        assert stored["requested_scopes"] == want["requested_scopes"]
        assert stored["browser_profile_id"] == str(PROFILE)
    finally:
        await world.close()
