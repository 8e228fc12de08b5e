"""Ordinary instructions that the secret scanner must accept.

They deliberately include what credentials are confused with: URLs (with users but
no passwords, with query strings, long document ids), UUIDs, ISO timestamps, commit
SHAs and SHA-256 digests, cron expressions, e-mail addresses, JSON snippets, prose
that mentions passwords, tokens, cookies, bearers and keys without a value, and text in
other scripts. Deterministic in the seed.
"""

from __future__ import annotations

import random
import uuid

DEFAULT_SEED = 20261130

_TEMPLATES = (
    "Summarize the news at 9am.",
    "Every weekday at {time}, summarize the top stories about {topic} in {city}.",
    "Remind me to change my password on Friday at {time}.",
    "Check whether the nightly API token rotation job succeeded and tell me if it failed.",
    "Every Monday, list the open pull requests in https://github.com/acme/{repo}/pulls.",
    "Review commit {sha1} in acme/{repo} and summarize what changed.",
    "Compare the checksum of the release tarball with sha256 {sha256}.",
    "Look up chat session {uuid} and summarize the conversation.",
    "The meeting starts at {iso}; send me the agenda 30 minutes before.",
    "At {time} every day, fetch https://api.example.com/v2/reports?from={date}&limit=50&format=json.",
    "Read https://docs.google.com/document/d/{docid}/edit and list the action items.",
    "Watch https://www.youtube.com/watch?v=dQw4w9WgXcQ and give me the key points.",
    "Email a digest to alice@example.com and bob.smith@example.org every Friday.",
    "Clone ssh://git@github.com/acme/{repo}.git and report the test coverage trend.",
    "Open https://user@intranet.example.com/wiki/Onboarding and summarize the changes.",
    "Find a cookie recipe with oats and raisins and add the shopping list to my notes.",
    "Be the bearer of good news: send the team a short note about the {topic} launch.",
    "Run at cron 0 9 * * MON-FRI: summarize overnight alerts from the {topic} dashboard.",
    "Track the price of {topic} stocks and alert me if it moves more than 5% since {date}.",
    'Use these settings: {{"city": "{city}", "units": "metric", "days": 3}} for the forecast.',
    "Limit yourself to max_tool_calls=20 and max_steps=40 while researching {topic}.",
    "Ask IT whether the password policy requires rotation every 90 days.",
    "Remind me that the session token expiry is configured in the admin console.",
    "Explain the difference between OAuth access tokens and refresh tokens in 200 words.",
    "Summarize the key findings of the {topic} report, especially the section on API keys.",
    "Check the status page at https://status.example.com/incidents/{uuid}.",
    "Translate this note into German: the key to success is consistency.",
    "Every evening, count the words in my journal entry and log the number ({num}).",
    "Book a table for 4 at 19:30 near {city} Hauptbahnhof, budget EUR {num}.",
    "Compile the weekly metrics: DAU {num}, WAU {num}, churn 2.4%, NPS 41.",
    "Ping me at {iso} to renew the domain acme-{repo}.com before it expires.",
    "Fetch https://example.com/search?q={topic}&page=2&sort=date&lang=en and list titles.",
    "Summarize the thread at https://news.ycombinator.com/item?id={num}.",
    "Archive emails older than 30 days from the label Receipts/{city}.",
    "Check the secret Santa spreadsheet and remind everyone of the {date} deadline.",
    "Use the basic plan pricing from the website and compare it with the pro plan.",
    "Monitor build {sha1_short} on the CI dashboard and report flaky tests.",
    "Set the idempotency key to the schedule id {uuid} when you retry the export.",
    "Write a haiku about {topic} every morning at {time}.",
    "Summarize internationalization and accessibility issues labelled needs-triage.",
    "List all TODO comments in src/scheduling/domain and group them by module.",
    "The fencing_token of the lease is {num}; report if it stops increasing.",
    "Create a short briefing on {topic} for the Tokyo office (東京オフィス向けの要約).",
    "Résumé quotidien des actualités sur {topic} à {time}, en français s'il vous plaît.",
    "Every hour, read /var/log/app/{repo}.log and count lines containing ERROR.",
    "Prepare the Q3-2026-revenue-report draft and share it with the finance-team channel.",
    "Check https://pypi.org/project/{repo}/ for a new release and summarize the changelog.",
    "Authorization reviews are due {date}; remind the managers of pending approvals.",
    "Look at issue #{num} and propose a fix; the failing test is test_token_bucket_refill.",
    "Download https://data.example.gov/api/views/{uuid}/rows.csv?accessType=DOWNLOAD.",
    "Every morning:\n- check the {topic} news\n- summarize the weather in {city}\n"
    "- list my meetings",
    "Password hygiene checklist for the team:\n  1. use a manager\n  2. enable 2FA\n  3. rotate "
    "tokens\nSend it on {date}.",
    "Steps:\n1) open https://example.com/reports/{num}\n2) export as CSV\n3) email it to "
    "ops@example.com",
    "Weekly digest\n\nTopics: {topic}, {topic}\nDeadline: {iso}\nOwner: session lead",
)

_TOPICS = ("climate", "semiconductors", "football", "AI safety", "housing", "rail strikes")
_CITIES = ("Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Zurich")
_REPOS = ("widgets", "billing-service", "mobile-app", "data-pipeline", "docs-site")


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _docid(rng: random.Random) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    return "1" + "".join(rng.choice(alphabet) for _ in range(43))


def benign_corpus(seed: int = DEFAULT_SEED, per_template: int = 6) -> list[str]:
    """``per_template`` fillings of every template: a few hundred ordinary instructions."""
    rng = random.Random(seed)
    out: list[str] = []
    for template in _TEMPLATES:
        for _ in range(per_template):
            hour, minute = rng.randint(0, 23), rng.choice((0, 15, 30, 45))
            day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            sha1 = _hex(rng, 40)
            out.append(
                template.format(
                    time=f"{hour:02d}:{minute:02d}",
                    topic=rng.choice(_TOPICS),
                    city=rng.choice(_CITIES),
                    repo=rng.choice(_REPOS),
                    sha1=sha1,
                    sha1_short=sha1[:12],
                    sha256=_hex(rng, 64),
                    uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    iso=f"{day}T{hour:02d}:{minute:02d}:00Z",
                    date=day,
                    docid=_docid(rng),
                    num=rng.randint(10, 99_999),
                )
            )
    return out


EDGE_BENIGN = (
    # What the credential corpus's shapes are confused with, each accepted: a URL with
    # no userinfo, percent-encoding in lower case and twice, combining marks and odd
    # spaces in prose, credential words followed by words, not values.
    "Every night at 2, connect to redis://cache.internal.example:6379/0 and report the memory.",
    "Open https://example.com/search?q=caf%c3%a9%20menu&lang=fr and list the top results.",
    "Follow https://example.com/redirect?next=https%253A%252F%252Fexample.org%252Fnews%253Fpage"
    "%253D2 and summarize the page.",
    "Summarize the Cafe\u0301 Mu\u0308ller reviews and the re\u0301sume\u0301 writing tips.",
    "Every Monday\u00a0at\u00a09am summarize the open support tickets\u202f!",
    "Check whether the access token is valid for 3600 seconds and tell me when it expires.",
    "My password is stored in the team vault; remind me to rotate it on Friday.",
    "The API token is rotated every 90 days; check that last night's rotation succeeded.",
    "Compare the Basic plan with the Pro plan and summarize the price difference.",
    "The wifi password is on the fridge; remind the guests at 6pm.",
    "The secret is consistency: send me one motivational quote every morning.",
    # Lines a wrapper or a list broke: glued to the word before them, a keyword-free
    # view would read a token (only shape-defined detectors run on glued lines).
    "Post the weekly summary with the tags\nProductLaunch2026\nTeamWinsQ3 and send me a link.",
    "Agenda for Monday:\n- review the dashboard\nTeamOKRsQ3Draft2026\n- send notes to finance",
    # Camel-case names of 20+ characters: test, file, branch, tab and class names whose
    # humps carry a token's entropy (each was once refused as an opaque token).
    "Summarize the test failures in PaymentGatewayClientTest and InvoiceRendererV2Test.",
    "Attach QuarterlyRevenueReport2026.pdf to the Friday email to finance.",
    "Check the branch feature/LoginRedesign2026 for merge conflicts every morning.",
    "Open the OffsiteLogistics2026 tab of the planning sheet and list open items.",
    "Explain what the AbstractSingletonProxyFactoryBean class does, then getUserProfileSettings.",
    # Prose typed with non-breaking, narrow or ideographic spaces between every word
    # (pasted from a word processor, French typography): the view that removes odd
    # spaces glues it into one long run (each was once refused as an opaque token).
    "Please\u00a0summarize\u00a0the\u00a0weekly\u00a0sales\u00a0report\u00a0for\u00a0the"
    "\u00a0team.",
    "R\u00e9sum\u00e9\u202fof\u202fthe\u202fquarter\u202ffor\u202fmanagement\u202freview"
    "\u202fplease\u202f!",
    "Summarize\u3000Q3\u3000PDF\u3000reports\u3000from\u30002026\u3000for\u3000Finance.",
)
"""Near misses of the credential corpus's shapes and encodings (deterministic)."""
