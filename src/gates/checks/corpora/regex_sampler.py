"""Draw a string from a public rule's regular expression (the vendor format is the fact).

``sample(pattern, rng, secret_group)`` walks Python's parse of the pattern. Inside the
secret group every repetition takes a random count in its range (capped at
``SPAN`` above the minimum) and every class a random member, so the value is the
high-entropy token the rule describes. Outside it the context is kept minimal and
printable: repetitions take their minimum, classes draw a non-space, non-quote member,
and alternatives prefer a plain assignment or an empty terminator - ``key=<token>``
rather than a keyword buried in fifty random characters. Anchors and lookarounds
produce nothing (the caller checks the drawn text against the rule, so a sample that
does not match is never used).

``to_python`` translates the RE2 forms gitleaks uses that Python refuses: an inline
``(?i)`` after the start (RE2 scopes it to the rest of the group; here it widens to
the whole pattern, which only matters for matching, not for drawing), ``\\z`` and the
POSIX class ``[[:alnum:]]``.
"""

from __future__ import annotations

import math
import random

# Python's own regex parser. The public names (sre_parse, sre_constants) warn on import
# since 3.11; these have no stubs, so they are typed Any.
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import string
from collections import Counter
from typing import Any

SPAN = 48
# Outside the secret, alternatives rendering as one of these are preferred: a plain
# assignment and an empty or blank terminator read as an instruction would write them.
PREFERRED = frozenset({"", " ", "=", ":", "=>", ":="})
PRINTABLE = [c for c in string.printable if not c.isspace()]
_CATEGORIES: dict[Any, str] = {
    sre.CATEGORY_DIGIT: string.digits,
    sre.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    sre.CATEGORY_SPACE: " ",
    sre.CATEGORY_NOT_DIGIT: string.ascii_letters,
    sre.CATEGORY_NOT_WORD: "-.:",
    sre.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
}


def to_python(pattern: str) -> str:
    body = pattern.replace("\\z", "\\Z").replace("[[:alnum:]]", "[A-Za-z0-9]")
    if "(?i)" in body[1:]:
        body = "(?i)" + body.replace("(?i)", "")
    return body


def _class_members(items: list[tuple[Any, Any]]) -> list[str]:
    members: list[str] = []
    negate = False
    for op, arg in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            members.append(chr(arg))
        elif op is sre.RANGE:
            low, high = arg
            members.extend(chr(c) for c in range(low, min(high, low + 200) + 1))
        elif op is sre.CATEGORY:
            members.extend(_CATEGORIES.get(arg, ""))
    if negate:
        excluded = set(members)
        return [c for c in PRINTABLE if c not in excluded]
    return members


class _Drawer:
    def __init__(self, rng: random.Random, secret_group: int, period: int = 0) -> None:
        self.rng = rng
        self.secret_group = secret_group
        self.depth_in_secret = 0
        self.secret: list[str] = []
        self.period = period
        """0: random members; n > 0: inside the secret each class repeats a cycle of
        ``n`` members of its own (``AAAA``, ``abcdabcd``): a low-entropy body."""
        self._cycles: dict[tuple[str, ...], tuple[list[str], list[int]]] = {}

    def emit(self, out: list[str], text: str) -> None:
        out.append(text)
        if self.depth_in_secret:
            self.secret.append(text)

    def pick(self, members: list[str]) -> str:
        if not members:
            return ""
        if self.period and self.depth_in_secret:
            return self._cycled(members)
        if not self.depth_in_secret:
            printable = [c for c in members if not c.isspace() and c not in "\"'`"]
            members = printable or [" "]
        return self.rng.choice(members)

    def _cycled(self, members: list[str]) -> str:
        key = tuple(members)
        if key not in self._cycles:
            start = self.rng.randrange(len(members))
            cycle = [members[(start + i) % len(members)] for i in range(self.period)]
            self._cycles[key] = (cycle, [0])
        cycle, at = self._cycles[key]
        at[0] += 1
        return cycle[(at[0] - 1) % len(cycle)]

    def _branch(self, alternatives: list[Any]) -> Any:
        if self.depth_in_secret:
            return self.rng.choice(alternatives)
        preferred = []
        for alternative in alternatives:
            probe = _Drawer(random.Random(0), 0)
            rendered: list[str] = []
            probe.draw(alternative, rendered)
            if "".join(rendered) in PREFERRED:
                preferred.append(alternative)
        return self.rng.choice(preferred or alternatives)

    def draw(self, parsed: Any, out: list[str]) -> None:
        for op, arg in parsed:
            if op is sre.LITERAL:
                self.emit(out, chr(arg))
            elif op is sre.NOT_LITERAL:
                self.emit(out, self.pick([c for c in PRINTABLE if c != chr(arg)]))
            elif op is sre.ANY:
                self.emit(out, self.pick(PRINTABLE))
            elif op is sre.IN:
                self.emit(out, self.pick(_class_members(arg)))
            elif op is sre.BRANCH:
                self.draw(self._branch(arg[1]), out)
            elif op is sre.SUBPATTERN:
                group, _, _, body = arg
                inside = group == self.secret_group
                self.depth_in_secret += inside
                self.draw(body, out)
                self.depth_in_secret -= inside
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
                low, high, body = arg
                if self.depth_in_secret:
                    top = low + SPAN if high is sre.MAXREPEAT else min(high, low + SPAN)
                    count = self.rng.randint(low, max(low, top))
                else:
                    count = low
                for _ in range(count):
                    self.draw(body, out)
            elif op is sre.ATOMIC_GROUP:
                self.draw(arg, out)
            # AT (anchors), ASSERT/ASSERT_NOT (lookarounds), GROUPREF: nothing to draw


def sample(
    pattern: str, rng: random.Random, secret_group: int = 1, period: int = 0
) -> tuple[str, str]:
    """(the drawn text, the part drawn inside ``secret_group``; the whole text when the
    pattern has no such group). ``period`` > 0 draws a patterned, low-entropy secret:
    each character class cycles through ``period`` consecutive members."""
    parsed = sre_parse.parse(pattern)
    groups = parsed.state.groups - 1
    drawer = _Drawer(rng, secret_group if groups >= secret_group else 0, period)
    out: list[str] = []
    if drawer.secret_group == 0:
        drawer.depth_in_secret = 1
    drawer.draw(parsed, out)
    text = "".join(out)
    return text, "".join(drawer.secret) or text


def literal_prefix(pattern: str, secret_group: int = 1) -> str:
    """The literal characters the secret starts with (``ghp_``, ``CFPAT-``): what makes
    a format vendor-specific. Empty for a keyword rule whose secret is a bare class."""
    parsed = sre_parse.parse(pattern)
    groups = parsed.state.groups - 1
    body: Any = parsed
    if groups >= secret_group:
        found = _group_body(parsed, secret_group)
        if found is not None:
            body = found
    prefix: list[str] = []
    for op, arg in body:
        if op is sre.LITERAL:
            prefix.append(chr(arg))
        elif op is sre.AT or op in (sre.ASSERT, sre.ASSERT_NOT):
            if prefix:
                break
        elif op is sre.SUBPATTERN and not prefix:
            inner = literal_prefix_of(arg[3])
            prefix.extend(inner)
            if len(inner) < len(list(arg[3])):
                break
        else:
            break
    return "".join(prefix)


def literal_prefix_of(body: Any) -> list[str]:
    out: list[str] = []
    for op, arg in body:
        if op is not sre.LITERAL:
            break
        out.append(chr(arg))
    return out


def _group_body(parsed: Any, group: int) -> Any:
    for op, arg in parsed:
        if op is sre.SUBPATTERN:
            if arg[0] == group:
                return arg[3]
            found = _group_body(arg[3], group)
            if found is not None:
                return found
        elif op is sre.BRANCH:
            for alternative in arg[1]:
                found = _group_body(alternative, group)
                if found is not None:
                    return found
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            found = _group_body(arg[2], group)
            if found is not None:
                return found
    return None


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own distribution (as gitleaks computes it)."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0
