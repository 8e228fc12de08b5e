"""Corpora for the credential gate: credential-shaped and benign instructions.

``credential_corpus(seed)`` returns ``CredentialCase`` values, each planting one
synthetic credential (``case.secret``; all forms to search for in ``case.needles``);
``benign_corpus(seed)`` returns ordinary instructions that must be accepted.
"""

from gates.checks.corpora.benign import EDGE_BENIGN, benign_corpus
from gates.checks.corpora.credentials import ENCODINGS, CredentialCase, credential_corpus

__all__ = ["EDGE_BENIGN", "ENCODINGS", "CredentialCase", "benign_corpus", "credential_corpus"]
