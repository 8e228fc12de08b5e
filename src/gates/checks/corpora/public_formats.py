"""The public-format corpus of gate.schedule.no_credentials, independent of the scanner.

Three parts, all deterministic in the seed (the gate prints it):

* ``vendor_cases``: for every rule in ``public_formats.toml`` (gitleaks' default rules
  and detect-secrets' token plugins, source and commit in the file's header) values
  are drawn from the rule's own regular expression (``regex_sampler``), kept only if
  the rule matches the drawn text and the secret reaches the rule's own entropy
  minimum (as gitleaks itself filters), and embedded in an ordinary instruction;
* ``entropy_cases``: random 40-character tokens and random passwords in credential
  context (``api key: <token>``, ``password=<password>``, ``my token is <token>``, ...);
* ``BENIGN``: ordinary instructions with what credentials are confused with - commit
  ids and digests in non-credential context, URLs with query strings and users,
  UUIDs in prose, versions, cron lines - which must be accepted.

Nothing here reads ``scheduling.domain.secrets``: passing this corpus means agreeing
with public rule sets, not with the scanner's own table.
"""

from __future__ import annotations

import random
import re
import string
import tomllib
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gates.checks.corpora.credentials import CredentialCase
from gates.checks.corpora.regex_sampler import (
    literal_prefix,
    sample,
    shannon_entropy,
    to_python,
)

FORMATS_FILE = Path(__file__).with_name("public_formats.toml")
DEFAULT_SEED = 20261201
DRAWS = 2
"""Cases per rule."""
NO_VALUE_RULES = frozenset({"gitleaks:kubernetes-secret-yaml"})
"""Rules that recognize a document's structure (a Secret manifest's ``kind``/``data``
keys) rather than a value: a draw renders the structure with an empty value, so there
is no credential to plant. Listed, never silently dropped (the gate records them)."""
TRIES = 12
"""Draws attempted per case before the rule is recorded as not drawable."""
PERIODS = (1, 4)
"""Patterned bodies per prefixed rule: one member repeated (``ghp_AAAA...``) and a
cycle of four (``npm_abcdabcd...``)."""
MIN_PREFIX = 3
"""A rule is vendor-specific when its secret starts with this many literal characters."""
NOT_PATTERNABLE = frozenset({"detect_secrets:jwt-17"})
"""Prefixed rules whose patterned draw is not an instance of the format: a JWT's
segments are base64 of JSON, so ``eyJGGGG.GGGG`` is no token of any vendor (a real
one is in ``vendor_cases``'s random draws). Listed, never silently dropped."""

_PROSE = (
    "Every weekday at 8, use {value} to pull the overnight report and summarize it.",
    "Log in with {value} and list yesterday's failed jobs.",
    "Here is the config line, keep it for the nightly sync: {value}",
    "Each Monday check the dashboard; the access setting is {value} - report anomalies.",
)


@dataclass(frozen=True)
class Rule:
    source: str
    rule_id: str
    regex: str
    secret_group: int
    entropy: float
    """The rule's own minimum Shannon entropy of the secret (gitleaks' ``entropy``)."""


def load_rules(path: Path = FORMATS_FILE) -> tuple[dict[str, Any], list[Rule]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules = [
        Rule(
            source,
            str(r["id"]),
            str(r["regex"]),
            int(r.get("secret_group", 1)),
            float(r.get("entropy", 0.0)),
        )
        for source in ("gitleaks", "detect_secrets", "trufflehog")
        for r in data[source]
    ]
    return data["source"], rules


def _case(case_id: str, kind: str, instruction: str, embedded: str, secret: str) -> CredentialCase:
    start = instruction.index(embedded)
    return CredentialCase(
        case_id=case_id,
        kind=kind,
        encoding="plain",
        instruction=instruction,
        secret=secret,
        embedded=embedded,
        span=(start, start + len(embedded)),
        expected_kinds=frozenset(),
        needles=(secret,),
    )


def _draw(rule: Rule, compiled: re.Pattern[str], rng: random.Random) -> tuple[str, str] | None:
    for _ in range(TRIES):
        text, secret = sample(compiled.pattern, rng, rule.secret_group)
        text = text.strip()
        secret = secret.strip()
        if (
            len(secret) >= 8
            and not secret.isdigit()
            and "\n" not in text
            and shannon_entropy(secret) >= rule.entropy
            and compiled.search(text)
        ):
            return text, secret
    return None


def _draw_patterned(
    rule: Rule, compiled: re.Pattern[str], rng: random.Random, period: int
) -> tuple[str, str] | None:
    for _ in range(TRIES):
        text, secret = sample(compiled.pattern, rng, rule.secret_group, period)
        text = text.strip()
        secret = secret.strip()
        if len(secret) >= 8 and "\n" not in text and compiled.search(text):
            return text, secret
    return None


def patterned_cases(
    rules: list[Rule], compiled: dict[str, re.Pattern[str]], rng: random.Random
) -> tuple[list[CredentialCase], list[str]]:
    # ``compiled`` holds the rules a random draw satisfied; the others are recorded
    # by ``vendor_cases`` already.
    """Low-entropy instances of every vendor-specific rule (its secret starts with a
    literal prefix): bodies that repeat one member or cycle four, which the rule still
    matches but no entropy test would flag. Only a vendor-specific detector catches
    them. (the cases, the prefixed rules no patterned draw satisfied)"""
    cases: list[CredentialCase] = []
    skipped: list[str] = []
    for rule in rules:
        name = f"{rule.source}:{rule.rule_id}"
        pattern = compiled.get(name)
        if pattern is None or name in NO_VALUE_RULES:
            continue
        if len(literal_prefix(pattern.pattern, rule.secret_group)) < MIN_PREFIX:
            continue
        if name in NOT_PATTERNABLE:
            skipped.append(f"{name} (patterned: not an instance)")
            continue
        for period in PERIODS:
            found = _draw_patterned(rule, pattern, rng, period)
            if found is None:
                skipped.append(f"{name} (patterned draw, period {period})")
                continue
            text, secret = found
            instruction = rng.choice(_PROSE).format(value=text)
            cases.append(_case(f"{name}:low{period}", rule.rule_id, instruction, text, secret))
    return cases, skipped


def vendor_cases(seed: int = DEFAULT_SEED) -> tuple[list[CredentialCase], list[str]]:
    """(the cases, the ids of rules no draw could satisfy or Python cannot compile).

    Random draws that reach each rule's entropy minimum, then ``patterned_cases``: the
    low-entropy instances of every vendor-specific rule (ids ending ``:low<period>``)."""
    rng = random.Random(seed)
    _, rules = load_rules()
    cases: list[CredentialCase] = []
    skipped: list[str] = []
    compiled_rules: dict[str, re.Pattern[str]] = {}
    for rule in rules:
        if f"{rule.source}:{rule.rule_id}" in NO_VALUE_RULES:
            skipped.append(f"{rule.source}:{rule.rule_id} (structure, no value)")
            continue
        try:
            with warnings.catch_warnings():  # RE2 classes Python reads as "nested sets"
                warnings.simplefilter("ignore", FutureWarning)
                compiled = re.compile(to_python(rule.regex))
        except re.error:
            skipped.append(f"{rule.source}:{rule.rule_id} (regex)")
            continue
        drawn = 0
        for n in range(DRAWS):
            found = _draw(rule, compiled, rng)
            if found is None:
                continue
            text, secret = found
            instruction = rng.choice(_PROSE).format(value=text)
            cases.append(
                _case(f"{rule.source}:{rule.rule_id}:{n}", rule.rule_id, instruction, text, secret)
            )
            drawn += 1
        if drawn:
            compiled_rules[f"{rule.source}:{rule.rule_id}"] = compiled
        else:
            skipped.append(f"{rule.source}:{rule.rule_id} (draw)")
    # A separate generator, so adding patterned cases leaves the random draws as they were.
    low, low_skipped = patterned_cases(rules, compiled_rules, random.Random(seed + 2))
    return cases + low, skipped + low_skipped


_TOKEN = string.ascii_letters + string.digits
_PASSWORD = string.ascii_letters + string.digits + "!#$%&*+-?@^_~"
_CONTEXT = (
    "api key: {token}",
    "API_KEY={token}",
    "apikey = {token}",
    "my token is {token}",
    "token: {token}",
    "the secret is {token}",
    "client_secret={token}",
    "Authorization: Bearer {token}",
    "access token {token}",
    "auth={token}",
    "password={password}",
    "password: {password}",
    "my password is {password}",
    "passwd={password}",
    "pwd: {password}",
    "DB_PASSWORD={password}",
)


def _random(rng: random.Random, alphabet: str, length: int) -> str:
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(length))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def entropy_cases(seed: int = DEFAULT_SEED, per_context: int = 4) -> list[CredentialCase]:
    rng = random.Random(seed + 1)
    cases: list[CredentialCase] = []
    for index, context in enumerate(_CONTEXT):
        for n in range(per_context):
            token = _random(rng, _TOKEN, 40)
            password = _random(rng, _PASSWORD, rng.randint(12, 20))
            secret = token if "{token}" in context else password
            embedded = context.format(token=token, password=password)
            instruction = rng.choice(_PROSE).format(value=embedded)
            cases.append(
                _case(f"entropy:{index}:{n}", "entropy_in_context", instruction, embedded, secret)
            )
    return cases


def turkish_upper(text: str) -> str:
    """``text`` upper-cased as a Turkish locale does: ``i`` becomes U+0130 (dotted capital I)."""
    return text.replace("i", "\u0130").upper()


def turkish_lower(text: str) -> str:
    """``text`` upper-cased, then lower-cased as a Turkish locale does: ``I`` becomes
    U+0131 (dotless small i), so no ASCII ``i`` or ``I`` is left."""
    return text.upper().replace("I", "\u0131").lower()


def turkish_cased_cases(seed: int = DEFAULT_SEED) -> list[CredentialCase]:
    """``entropy_cases(seed)`` again, the whole instruction Turkish-upper-cased and
    Turkish-lower-cased (ids ``entropy:<context>:<n>:tr-upper``/``tr-lower``), as text
    a Turkish-locale tool re-cased, like the credential corpus's ``uppercase``.

    U+0130 and U+0131 survive NFKC, and a case-insensitive ``is`` still matches them
    (Python's ``re`` folds both to ``i``), yet neither is ASCII: ``the secret is
    <token>`` re-cased so that no ASCII ``i``/``I`` is left is the shape where only a
    scanner that searches non-ASCII text with every detector finds the credential
    (ADR 2630)."""
    cases: list[CredentialCase] = []
    for case in entropy_cases(seed):
        for tag, recase in (("tr-upper", turkish_upper), ("tr-lower", turkish_lower)):
            instruction = recase(case.instruction)
            embedded = recase(case.embedded)
            secret = recase(case.secret)
            cased = _case(f"{case.case_id}:{tag}", case.kind, instruction, embedded, secret)
            cases.append(replace(cased, needles=(secret, case.secret)))
    return cases


BENIGN = (
    "Summarize the changes in commit 3f2a9c1d8e7b6a5f4c3d2e1f0a9b8c7d6e5f4a3b on main.",
    "Review pull request 4821 and the commit 9fceb02d0ae598e95dc970b74767f19372d61af8.",
    "Compare the release digest"
    " sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 with the mirror.",
    "Open https://github.com/acme/widgets/compare/v1.4.2...v1.5.0 and list the breaking changes.",
    "Fetch https://api.example.com/v2/reports?from=2026-11-01&limit=50&format=json every morning.",
    "Read https://docs.google.com/document/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit"
    " and list action items.",
    "Look up support ticket 123e4567-e89b-12d3-a456-426614174000 and summarize the thread.",
    "The incident 9b2f6c1e-4d3a-4b8e-9f7a-2c1d0e9f8a7b is resolved; send the postmortem draft.",
    "Every Friday email the digest to alice@example.com and bob.smith@example.org.",
    "Run at cron 0 9 * * MON-FRI and summarize overnight alerts from the payments dashboard.",
    "Remind me to rotate my password on the first of the month.",
    "Check whether the API token rotation job succeeded last night and tell me if it failed.",
    "Track version 2.31.0 of requests and tell me when 2.32 is released.",
    "Open https://user@intranet.example.com/wiki/Onboarding and summarize what changed.",
    "Find the build 20261130.4 artifacts and list the failing tests.",
    "List the top 5 stories on https://news.ycombinator.com/item?id=38471822 with a summary.",
    "Watch https://www.youtube.com/watch?v=dQw4w9WgXcQ and give me the key points.",
    "Translate the release notes of tag v3.0.0-rc.2 into French.",
    "Summarize the Jira epics PROJ-1423, PROJ-1500 and PROJ-1611 for the standup.",
    "The session with the recruiter is at 14:30; prepare three questions about the team.",
    "Keep max_tool_calls=20 and max_steps=40 while researching solar panel prices.",
    "Summarize branch feature/oauth-login-refresh and its open review comments.",
    "Check the object key reports/2026/11/30/daily-summary.csv in the analytics bucket.",
    "Report the status of order 4f1c8e2a and shipment 7d9b3f60 every evening.",
    "Re-run the job nightly-export-7f3e2a1b9c8d and tell me whether it finished.",
)
