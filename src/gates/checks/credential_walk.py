"""The structural half of ``gate.schedule.no_credentials``: no field is a credential.

Walks pydantic models, dataclasses (and the models nested in their field types) and
SQLAlchemy ``MetaData`` (table and column names), and reports every name that reads
like a credential: token, secret, cookie, credential, password, bearer,
authorization, api key, private key, session key... A name is split into words
(``snake_case``, ``kebab-case``, ``camelCase``), so ``max_tool_calls`` or
``authority_version`` are not matches while ``api_token`` and ``sessionKey`` are.

Legitimate names that merely contain such a word are allowed only through an explicit
allow-list entry with a reason (``DEFAULT_ALLOWED``). Pure function over the classes
it is given; ``discover_models`` is the one helper that imports modules.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import pkgutil
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType

from pydantic import BaseModel
from sqlalchemy import MetaData

CREDENTIAL_WORDS: frozenset[str] = frozenset(
    {
        "token",
        "tokens",
        "secret",
        "secrets",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "creds",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "pwd",
        "bearer",
        "authorization",
        "apikey",
        "jwt",
        "assertion",
    }
)
"""A name containing one of these words is a credential name."""

CREDENTIAL_PAIRS: frozenset[tuple[str, str]] = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("session", "key"),
        ("access", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("client", "secret"),
        ("auth", "header"),
        ("set", "cookie"),
    }
)
"""Adjacent word pairs that make a credential name (``key`` alone is not one:
``idempotency_key`` is a request identifier)."""

DEFAULT_ALLOWED: Mapping[str, str] = {
    "token_id": (
        "the public label of an API bearer token (``tok_<hex>``, like a key id): printed,"
        " logged and used to revoke it; it is not the token and authenticates nothing"
        " (the token file stores only the token's SHA-256 digest, ADR 1501)"
    ),
    "fencing_token": (
        "the lease fencing counter: a monotonic integer that orders lease holders so a "
        "stale worker's writes are refused; it authenticates nothing and grants nothing"
    ),
    **{
        name: (
            "names of bearer tokens in a batch provisioning file or its report: (tenant,"
            " principal, name) triples, never a secret (ADR 2260; a new token's secret is"
            " printed once and only its SHA-256 digest is stored)"
        )
        for name in (
            "TenantEntry.tokens",
            "ParsedBatch.tokens",
            "BatchReport.tokens_to_issue",
            "BatchReport.tokens_held",
        )
    },
}
"""Names (``name`` or ``owner.name``) that contain a credential word but are not
credentials, each with the reason. Keep it small: every entry is a claim."""

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@dataclass(frozen=True, order=True)
class CredentialField:
    """A field, column or table whose name reads like a credential."""

    owner: str
    """``model:<module>.<qualname>`` or ``table:<name>``."""
    name: str
    words: tuple[str, ...]
    """The credential words or pairs that matched."""

    def __str__(self) -> str:
        return f"{self.owner}.{self.name} looks like a credential ({', '.join(self.words)})"


_VOCABULARY = CREDENTIAL_WORDS | {w for pair in CREDENTIAL_PAIRS for w in pair}


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and word[:-1] in _VOCABULARY else word


def name_words(name: str) -> list[str]:
    """``apiKeys_v2`` -> ``['api', 'key', 'v', '2']``; lower case, known plurals singular."""
    return [_singular(w.lower()) for w in _WORD.findall(name)]


def credential_words(name: str) -> tuple[str, ...]:
    """The credential words/pairs in ``name``; empty when it is not a credential name."""
    words = name_words(name)
    found = [w for w in words if w in CREDENTIAL_WORDS]
    found += [f"{a}_{b}" for a, b in itertools.pairwise(words) if (a, b) in CREDENTIAL_PAIRS]
    return tuple(dict.fromkeys(found))


def _owner(cls: type) -> str:
    return f"model:{cls.__module__}.{cls.__qualname__}"


def _nested_types(annotation: object) -> Iterator[type]:
    """Model and dataclass types reachable through ``list[X]``, ``X | None``, ..."""
    if isinstance(annotation, type) and (
        issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation)
    ):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _nested_types(arg)


def _model_fields(cls: type) -> Iterator[tuple[str, object]]:
    """(name, annotation) of every field, including aliases as extra names."""
    if issubclass(cls, BaseModel):
        for name, info in cls.model_fields.items():
            yield name, info.annotation
            for alias in (info.alias, info.validation_alias, info.serialization_alias):
                if isinstance(alias, str) and alias != name:
                    yield alias, info.annotation
        return
    try:
        hints: Mapping[str, object] = typing.get_type_hints(cls)
    except (NameError, TypeError):  # unresolved forward reference: names still count
        hints = {}
    for f in dataclasses.fields(typing.cast(typing.Any, cls)):
        yield f.name, hints.get(f.name, f.type)


def _allowed(owner: str, name: str, allowed: Mapping[str, str]) -> bool:
    short_owner = owner.split(":", 1)[1].rsplit(".", 1)[-1]
    return name in allowed or f"{short_owner}.{name}" in allowed


def credential_fields(
    models: Iterable[type] = (),
    metadata: MetaData | Iterable[MetaData] = (),
    allowed: Mapping[str, str] = DEFAULT_ALLOWED,
) -> list[CredentialField]:
    """Every credential-like field of ``models`` (and nested models) and of ``metadata``.

    Raises ``TypeError`` for a model that is neither a pydantic model nor a dataclass,
    so nothing is skipped silently. Returns the problems sorted; empty means clean.
    """
    problems: set[CredentialField] = set()
    pending = list(models)
    seen: set[type] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if not (
            isinstance(cls, type) and (issubclass(cls, BaseModel) or dataclasses.is_dataclass(cls))
        ):
            raise TypeError(f"{cls!r} is not a pydantic model or a dataclass")
        owner = _owner(cls)
        for name, annotation in _model_fields(cls):
            words = credential_words(name)
            if words and not _allowed(owner, name, allowed):
                problems.add(CredentialField(owner, name, words))
            pending.extend(t for t in _nested_types(annotation) if t not in seen)
    metadatas = [metadata] if isinstance(metadata, MetaData) else list(metadata)
    for meta in metadatas:
        for table in meta.tables.values():
            owner = f"table:{table.name}"
            for name in (table.name, *(c.name for c in table.columns)):
                words = credential_words(name)
                if words and not _allowed(owner, name, allowed):
                    problems.add(CredentialField(owner, name, words))
    return sorted(problems)


def discover_models(*packages: str | ModuleType) -> list[type]:
    """Every pydantic model and dataclass *defined* in the given packages' modules.

    Imports each module under each package, so a new model is walked without anyone
    adding it to a list. Enums, protocols and plain classes are not models.
    """
    found: dict[str, type] = {}
    for package in packages:
        root = importlib.import_module(package) if isinstance(package, str) else package
        modules = [root]
        if hasattr(root, "__path__"):
            for info in pkgutil.walk_packages(root.__path__, prefix=f"{root.__name__}."):
                modules.append(importlib.import_module(info.name))
        for module in modules:
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if obj.__module__ != module.__name__:
                    continue
                if (
                    issubclass(obj, BaseModel) and obj is not BaseModel
                ) or dataclasses.is_dataclass(obj):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[key] for key in sorted(found)]
