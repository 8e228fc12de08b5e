"""Importing what a one-shot command imports builds nothing it may never use (issue 26
item 4, ADR 2750): the secret detectors' patterns are compiled on the first scan, and
the provisioning file schemas on the first file validated. Each probe runs in a fresh
interpreter, so what other tests built cannot leak in.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from scheduling.domain.errors import ValidationError
from scheduling.domain.secrets import DETECTOR_KINDS, DETECTORS, SecretScanner, compiled_detectors
from scheduling.domain.secrets import detectors as detector_table
from scheduling.service import provisioning

PROBE = """
import json
import scheduling.cli.provision
{prelude}
from scheduling.domain.secrets.detectors import compiled_detectors
from scheduling.service import provisioning
models = [provisioning.PrincipalsFile, provisioning.AgentsFile, provisioning.BatchFile]
print(json.dumps({{
    "compiled": compiled_detectors.cache_info().currsize,
    "built": [m.__name__ for m in models if m.__pydantic_complete__],
}}))
"""


def built_after_import(prelude: str = "") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(prelude=prelude)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_importing_a_one_shot_command_compiles_no_detector_and_builds_no_file_schema() -> None:
    assert built_after_import() == {"compiled": 0, "built": []}


def test_the_probe_sees_a_detector_table_read_and_a_file_validated() -> None:
    """The test of the test: reading ``DETECTORS`` (as the scanner's default argument
    used to, at import) compiles the table, and validating a file builds its schema."""
    prelude = (
        "from scheduling.domain.secrets import DETECTORS\n"
        "from scheduling.service.provisioning import parse_principals\n"
        "parse_principals({'principals': []})"
    )
    assert built_after_import(prelude) == {"compiled": 1, "built": ["PrincipalsFile"]}


def test_the_lazy_table_is_the_whole_table_in_order() -> None:
    """Read as a name or called, it is one compiled tuple: every kind the module
    declares, each pattern compiled from its entry with its flags."""
    assert DETECTORS is compiled_detectors() is detector_table.DETECTORS
    assert {d.kind for d in DETECTORS} == DETECTOR_KINDS
    assert [d.pattern.pattern for d in DETECTORS] == [e.pattern for e in detector_table._TABLE]
    ignore_case = [e.flags & re.IGNORECASE for e in detector_table._TABLE]
    assert [d.pattern.flags & re.IGNORECASE for d in DETECTORS] == ignore_case


def test_a_scanner_built_before_the_table_was_read_still_scans_with_all_of_it() -> None:
    scanner = SecretScanner()
    found = scanner.scan("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY")
    assert found, "the default scanner must hold the whole table"
    assert SecretScanner([]).scan("password=Hunter2xyz!abc") == []


def test_a_deferred_file_schema_refuses_what_it_refused_before() -> None:
    with pytest.raises(ValidationError) as refused:
        provisioning.parse_principals({"principals": [{"tenant_id": "acme"}], "extra": 1})
    problems = refused.value.details["problems"]
    assert "extra: extra_forbidden" in problems
    assert any(p.startswith("principals.0.principal_id") for p in problems)
