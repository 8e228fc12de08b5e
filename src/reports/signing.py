"""Signed reports: a DSSE envelope over the report's canonical bytes, signed with Ed25519.

The canonical bytes are the report's JSON re-serialized with sorted keys, no
whitespace and UTF-8 (so re-indenting the file changes nothing, editing any value
breaks the signature). The envelope follows DSSE (the in-toto envelope): ``payload``
is those bytes in base64, ``payloadType`` names the report, and each signature signs
the pre-authentication encoding ``DSSEv1 <len> <type> <len> <payload>``. Keys are PEM
files: PKCS#8 private, SubjectPublicKeyInfo public, the same ones ``openssl genpkey
-algorithm ed25519`` and ``openssl pkey -pubout`` write (ADR 2151).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

PAYLOAD_TYPE = "application/vnd.scheduling.gate-report+json"
ENVELOPE_SUFFIX = ".dsse.json"


class SigningError(ValueError):
    """A key or an envelope that cannot be used (unreadable, not Ed25519, malformed)."""


def canonical_bytes(raw: Any) -> bytes:
    """The bytes a signature covers: sorted keys, no whitespace, UTF-8."""
    return json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of ``payload``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def envelope_path(report: Path) -> Path:
    """Where the envelope of ``report`` lives: ``gate-report.json`` ->
    ``gate-report.dsse.json`` beside it."""
    return report.with_name(report.name.removesuffix(".json") + ENVELOPE_SUFFIX)


def key_id(public: Ed25519PublicKey) -> str:
    """SHA-256 of the raw 32-byte public key, hex: names the key without holding it."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SigningError(f"cannot read the signing key {path}: {_first_line(exc)}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SigningError(f"cannot read the trusted key {path}: {_first_line(exc)}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError(f"{path} is not an Ed25519 public key")
    return key


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def sign(raw: Any, key: Ed25519PrivateKey) -> dict[str, Any]:
    """The DSSE envelope of the report ``raw`` (its parsed JSON), signed by ``key``."""
    payload = canonical_bytes(raw)
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": key_id(key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }


def sign_file(report: Path, key: Ed25519PrivateKey) -> Path:
    """Sign the report file ``report``; write and return its envelope."""
    raw = json.loads(report.read_text(encoding="utf-8"))
    path = envelope_path(report)
    path.write_text(json.dumps(sign(raw, key), indent=2) + "\n", encoding="utf-8")
    return path


def signature_problems(raw: Any, envelope: Path, trusted: Ed25519PublicKey) -> list[str]:
    """Why the envelope at ``envelope`` does not prove that the holder of ``trusted``'s
    private key signed the report ``raw``; empty when it does."""
    if not envelope.is_file():
        return [f"unsigned: no signature envelope at {envelope} (sign with run --sign KEY)"]
    try:
        data = json.loads(envelope.read_text(encoding="utf-8"))
        payload_type = data["payloadType"]
        payload = base64.b64decode(data["payload"], validate=True)
        signatures = [
            (str(s.get("keyid", "")), base64.b64decode(s["sig"], validate=True))
            for s in data["signatures"]
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"the signature envelope {envelope} is malformed: {_first_line(exc)}"]
    if payload_type != PAYLOAD_TYPE:
        return [f"the envelope signs a {payload_type!r}, not a gate report"]
    if payload != canonical_bytes(raw):
        return ["the envelope signs another report: the report was changed after signing"]
    wanted = key_id(trusted)
    for _, sig in signatures:
        try:
            trusted.verify(sig, pae(payload_type, payload))
        except InvalidSignature:
            continue
        return []
    named = ", ".join(k[:16] for k, _ in signatures) or "none"
    return [
        f"no signature verifies against the trusted key {wanted[:16]} (the envelope's keys:"
        f" {named})"
    ]


def generate_key_pair(private: Path, public: Path) -> str:
    """Write a new Ed25519 key pair as PEM files (the private one readable by its owner
    only); refuse to overwrite either. Returns the key id."""
    for path in (private, public):
        if path.exists():
            raise SigningError(f"{path} exists; not overwriting a key")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private.parent.mkdir(parents=True, exist_ok=True)
    public.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(private_pem)
    public.write_bytes(public_pem)
    return key_id(key.public_key())
