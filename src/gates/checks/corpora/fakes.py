"""Synthetic credential values in the shapes real providers use.

Every value is drawn from a seeded ``random.Random``: it has the right prefix, length
and alphabet, and no real credential is ever written down (the source holds no token,
only these recipes). The same seed gives the same values, so a failing case replays.
"""

from __future__ import annotations

import base64
import json
import random
import string
from urllib.parse import quote

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
BASE32 = string.ascii_uppercase + "234567"
# Password characters that need no escaping in a URL's userinfo or a shell word.
PASSWORD_CHARS = ALNUM + "!$*-_.~"
# Symbols that make a run of letters no word (none is a word separator, a placeholder
# start, a percent escape or a character the password value stops at).
WORDY_SYMBOLS = "!#&*?@^~"


class FakeCredentials:
    """Credential-shaped values from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def chars(self, alphabet: str, n: int) -> str:
        """``n`` characters of ``alphabet``, with at least one digit and one letter
        when the alphabet has both (real random tokens almost always do)."""
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            wants_mix = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
            if not wants_mix or (
                any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            ):
                return value

    def password(self) -> str:
        """12-20 characters with lower, upper, digit and a symbol."""
        while True:
            value = self.chars(PASSWORD_CHARS, self.rng.randint(12, 20))
            if (
                any(c.islower() for c in value)
                and any(c.isupper() for c in value)
                and any(c in "!$*-_.~" for c in value)
            ):
                return value

    def short_password(self) -> str:
        """8-9 lower-case letters and digits (``hunter22``): what people really type.
        (Eight, so that even ``pwd=<value>`` is long enough a base64 run to decode.)"""
        return self.chars(string.ascii_lowercase + string.digits, self.rng.randint(8, 9))

    def dollar_password(self) -> str:
        """A password that starts with ``$`` and is not an upper-case ``$NAME``
        reference (``$unshine42``)."""
        return "$" + self.chars(string.ascii_lowercase + string.digits, self.rng.randint(7, 10))

    def wordy_password(self) -> str:
        """10-16 mixed-case letters and at least one symbol, no digit (``Tr!cky&Secure``):
        in prose it reads as no word, so it is a password although it has no digit."""
        while True:
            value = self.chars(string.ascii_letters + WORDY_SYMBOLS, self.rng.randint(10, 16))
            if (
                any(c.islower() for c in value)
                and any(c.isupper() for c in value)
                and any(c in WORDY_SYMBOLS for c in value)
            ):
                return value

    def short_token(self) -> str:
        """16-19 letters and digits: an API key too short for a context-free token rule
        (20+), so only the keyword before it says what it is."""
        return self.chars(ALNUM, self.rng.randint(16, 19))

    def url_password(self) -> str:
        """3-5 letters and digits: any password in a URL's userinfo is a credential."""
        return self.chars(ALNUM, self.rng.randint(3, 5))

    def b64bytes(self, n: int, urlsafe: bool = False) -> str:
        raw = bytes(self.rng.getrandbits(8) for _ in range(n))
        if urlsafe:
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return base64.b64encode(raw).decode()

    # -- providers --------------------------------------------------------------------

    def aws_access_key(self) -> str:
        return self.rng.choice(("AKIA", "ASIA")) + self.chars(BASE32, 16)

    def aws_secret_key(self) -> str:
        return self.chars(B64, 40)

    def google_api_key(self) -> str:
        return "AIza" + self.chars(B64URL, 35)

    def google_oauth_token(self) -> str:
        return "ya29." + self.chars(B64URL, self.rng.randint(60, 120))

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def azure_storage_key(self) -> str:
        return self.b64bytes(64)

    def azure_sas_signature(self) -> str:
        return quote(self.b64bytes(32), safe="")

    def azure_client_secret(self) -> str:
        return (
            self.chars(ALNUM, 3)
            + self.rng.choice(string.digits)
            + "Q~"
            + self.chars(ALNUM + "_~.", 34)
        )

    def digitalocean_token(self) -> str:
        return "dop_v1_" + self.hex(64)

    def github_token(self) -> str:
        if self.rng.random() < 0.5:
            return self.rng.choice(("ghp_", "gho_", "ghs_", "ghu_")) + self.chars(ALNUM, 36)
        return "github_pat_" + self.chars(ALNUM, 22) + "_" + self.chars(ALNUM, 59)

    def gitlab_token(self) -> str:
        return "glpat-" + self.chars(B64URL, 20)

    def npm_token(self) -> str:
        return "npm_" + self.chars(ALNUM, 36)

    def pypi_token(self) -> str:
        return "pypi-AgEIcHlwaS5vcmc" + self.chars(B64URL, 70)

    def slack_token(self) -> str:
        prefix = self.rng.choice(("xoxb-", "xoxp-", "xoxa-"))
        return (
            prefix
            + self.chars(string.digits, 12)
            + "-"
            + self.chars(string.digits, 13)
            + "-"
            + self.chars(ALNUM, 24)
        )

    def slack_webhook(self) -> str:
        upper = string.ascii_uppercase + string.digits
        return (
            "https://hooks.slack.com/services/T"
            + self.chars(upper, 8)
            + "/B"
            + self.chars(upper, 10)
            + "/"
            + self.chars(ALNUM, 24)
        )

    def stripe_key(self) -> str:
        if self.rng.random() < 0.2:
            return "whsec_" + self.chars(ALNUM, 32)
        return self.rng.choice(("sk_live_", "rk_live_", "sk_test_")) + self.chars(ALNUM, 24)

    def sendgrid_key(self) -> str:
        return "SG." + self.chars(B64URL, 22) + "." + self.chars(B64URL, 43)

    def mailgun_key(self) -> str:
        return "key-" + self.chars(string.ascii_lowercase + string.digits, 32)

    def shopify_token(self) -> str:
        return self.rng.choice(("shpat_", "shpss_")) + self.hex(32)

    def huggingface_token(self) -> str:
        return "hf_" + self.chars(ALNUM, 34)

    def anthropic_key(self) -> str:
        return "sk-ant-api03-" + self.chars(B64URL, 93) + "AA"

    def openai_key(self) -> str:
        if self.rng.random() < 0.5:
            return "sk-proj-" + self.chars(B64URL, 48)
        return "sk-" + self.chars(ALNUM, 48)

    def jwt(self) -> str:
        def seg(obj: object) -> str:
            text = json.dumps(obj, separators=(",", ":")).encode()
            return base64.urlsafe_b64encode(text).decode().rstrip("=")

        header = {"alg": self.rng.choice(("HS256", "RS256", "ES256")), "typ": "JWT"}
        payload = {
            "sub": self.hex(12),
            "iat": self.rng.randint(1_700_000_000, 1_800_000_000),
            "scope": "reports:read",
        }
        return seg(header) + "." + seg(payload) + "." + self.b64bytes(32, urlsafe=True)

    def private_key_block(self) -> str:
        label, body_prefix = self.rng.choice(
            (
                ("RSA PRIVATE KEY", "MIIEowIBAAKCAQEA"),
                ("PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
                ("EC PRIVATE KEY", "MHcCAQEEI"),
                ("OPENSSH PRIVATE KEY", "b3BlbnNzaC1rZXktdjEAAAAA"),
                ("ENCRYPTED PRIVATE KEY", "MIIFHDBOBgkqhkiG9w0BBQ0w"),
            )
        )
        body = body_prefix + self.b64bytes(self.rng.randint(150, 240))
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"

    def opaque_token(self, n: int = 40) -> str:
        return self.chars(ALNUM + "-._~", n)

    def basic_credentials(self) -> str:
        user = self.rng.choice(("svc-reporter", "alice", "backup", "ci-bot"))
        return base64.b64encode(f"{user}:{self.password()}".encode()).decode()

    def short_basic_credentials(self) -> str:
        """Base64 of ``user:<6-7 characters>`` (``deploy:hunter2``): a Basic header's
        password is a credential however short."""
        user = self.rng.choice(("deploy", "admin", "ops", "monitor"))
        password = self.chars(string.ascii_lowercase + string.digits, self.rng.randint(6, 7))
        return base64.b64encode(f"{user}:{password}".encode()).decode()

    def session_value(self) -> str:
        return self.chars(ALNUM, self.rng.randint(32, 64))
