"""Near misses of the short keyword-bound credential shapes (``gate.schedule.no_credentials``).

Instructions that carry a credential keyword, an ``Authorization`` scheme, a dotted or
dashed name suffix, or tab-separated words, each followed by words rather than a value:
every one must be accepted. They pair with the short keyword-bound cases of
``test_no_credentials_keyword_shapes`` (a scanner that refuses these would pass those
cases by refusing everything near a keyword).
"""

from __future__ import annotations

KEYWORD_NEAR_MISSES = (
    "Remind me on Friday that the password policy now requires 12 characters.",
    'Check that the "password" field on the signup form is masked and report it.',
    "Check whether the password.prod rotation finished and report the status.",
    "Summarize why Authorization: Bearer tokens expire after one hour in our docs.",
    "Explain the Authorization: Token scheme of the partner API in two sentences.",
    "The auth is handled by the gateway; summarize its error rate every morning.",
    "The signature is on page 3 of the contract; remind me to print it on Monday.",
    "Every\tMonday\tsummarize\tthe\tsupport\tqueue\tand\temail\tthe\tteam.",
)
"""Each accepted by the unmutated product (deterministic)."""
