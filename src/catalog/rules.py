"""The rules catalog: normative spec statements no hard gate names (``rules.toml``).

Rules are bound and reported like gates (one facet, the same statuses) but they do
not move the verified gate ceiling, which the spec defines by its gates alone.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

RULE_PREFIX = "rule."


@dataclass(frozen=True)
class Rule:
    id: str
    section: str
    statement: str

    @property
    def title(self) -> str:
        return self.statement.split(". ", 1)[0].rstrip(".")


def parse_rules(text: str) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for entry in tomllib.loads(text).get("rule", []):
        rule = Rule(id=entry["id"], section=entry["section"], statement=entry["statement"])
        if not rule.id.startswith(RULE_PREFIX):
            raise ValueError(f"rule ids start with {RULE_PREFIX!r}: {rule.id!r}")
        if rule.id in rules:
            raise ValueError(f"duplicate rule id {rule.id!r}")
        rules[rule.id] = rule
    return rules


@cache
def load_rules() -> dict[str, Rule]:
    """The shipped rules, in catalog order."""
    text = resources.files("catalog").joinpath("rules.toml").read_text(encoding="utf-8")
    return parse_rules(text)
