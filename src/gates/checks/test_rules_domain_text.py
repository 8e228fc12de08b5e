"""rule.text.hygiene: every lone UTF-16 surrogate, not only ``\\ud800``, is the stable
``schedule.text.invalid``. A surrogate code point is anything in U+D800..U+DFFF: high
(U+D800..U+DBFF) and low (U+DC00..U+DFFF), each unpaired, and a low one before a high
one (the wrong order is two lone surrogates, not a pair). Each is planted in the title
of a create body sent as JSON escapes: a 422 ``schedule.text.invalid``, never a 5xx,
nothing written. A correctly paired surrogate (``\\ud83d\\ude00``, one astral
character once decoded) is ordinary text and is accepted: the refusal is the lone
surrogate's doing, not any escape's. Mutants: ``domain.last_low_surrogate_accepted``
(the range ends at U+DFFE) and ``domain.low_surrogates_accepted`` (only high ones)."""

from __future__ import annotations

import json

import pytest

from gates.checks.edge_support import error_code
from simulation.worlds.http import body, http_world

pytestmark = pytest.mark.postgres

TEXT_INVALID = "schedule.text.invalid"
# JSON escapes, sent verbatim in the body so the server's JSON parser decodes them.
LONE = {
    "first_high": "\\ud800",
    "last_high": "\\udbff",
    "first_low": "\\udc00",
    "middle_low": "\\udd00",
    "last_low": "\\udfff",
    "low_then_high": "\\udfff\\ud800",
}
PAIRED = "\\ud83d\\ude00"


def raw_body(escape: str) -> bytes:
    """A valid create body whose title holds ``escape`` as a raw JSON escape."""
    marker = "TITLE-PLACEHOLDER"
    text = json.dumps(body(title=f"Brief {marker} today"))
    return text.replace(marker, escape).encode("ascii")


@pytest.mark.rule("rule.text.hygiene")
async def test_every_lone_surrogate_is_refused(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        problems: list[str] = []
        for n, (label, escape) in enumerate(LONE.items()):
            answer = await world.client.post(
                "/v1/schedules",
                content=raw_body(escape),
                headers={
                    **world.auth(),
                    "Idempotency-Key": f"lone-{n}",
                    "content-type": "application/json",
                },
            )
            code = error_code(answer.json()) if answer.content else None
            if (answer.status_code, code) != (422, TEXT_INVALID):
                problems.append(f"{label}: {answer.status_code} {answer.text[:160]}")
        counts = await world.counts()
        assert counts["schedules"] == 0, counts
        assert not problems, problems
        paired = await world.client.post(
            "/v1/schedules",
            content=raw_body(PAIRED),
            headers={
                **world.auth(),
                "Idempotency-Key": "paired",
                "content-type": "application/json",
            },
        )
        assert paired.status_code == 201, paired.text
        assert paired.json()["title"] == "Brief \U0001f600 today", paired.text
