"""Secret scanning for user-authored schedule text (titles and instructions).

Public surface::

    SecretScanner().scan(text) -> list[SecretFinding]     # kind + span, never the value
    SecretScanner().inspect(text) -> ScanReport           # findings + work counters
    reject_secrets(field_name, text, scanner=None)        # raises ValidationError
    ScansSecrets                                          # Protocol: anything with .scan
    SECRET_DETECTED                                       # "schedule.secret_detected"
    DETECTOR_KINDS                                        # every kind a finding can carry
    DETECTORS, compiled_detectors()                       # the table, compiled on first read

See docs/secret-scanner.md for what is detected, the normalizations, the bounds and
the borderline decisions.
"""

from scheduling.domain.secrets.detectors import (
    DETECTOR_KINDS,
    MAX_MATCH_CHARS,
    Detector,
    compiled_detectors,
)
from scheduling.domain.secrets.reject import SECRET_DETECTED, ScansSecrets, reject_secrets
from scheduling.domain.secrets.scanner import (
    EXTEND_MAX_CHARS,
    MAX_DECODE_DEPTH,
    OVERLAP_CHARS,
    PERCENT_ROUNDS,
    WINDOW_CHARS,
    ScanReport,
    SecretFinding,
    SecretScanner,
)

__all__ = [
    "DETECTORS",
    "DETECTOR_KINDS",
    "EXTEND_MAX_CHARS",
    "MAX_DECODE_DEPTH",
    "MAX_MATCH_CHARS",
    "OVERLAP_CHARS",
    "PERCENT_ROUNDS",
    "SECRET_DETECTED",
    "WINDOW_CHARS",
    "Detector",
    "ScanReport",
    "ScansSecrets",
    "SecretFinding",
    "SecretScanner",
    "compiled_detectors",
    "reject_secrets",
]

DETECTORS: tuple[Detector, ...]
"""Every detector, compiled when first read (see ``detectors.DETECTORS``)."""


def __getattr__(name: str) -> object:
    if name == "DETECTORS":
        return compiled_detectors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
