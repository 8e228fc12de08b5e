"""The catalog is the spec's 46 gates, word for word, and binding validates against it."""

import re
import textwrap
from pathlib import Path

import pytest

from catalog import GateKind, load_catalog, parse_catalog
from catalog.provenance import SHIPPED_CATALOG, SHIPPED_MILESTONES, shipped_file_in

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "scheduled-runs.md"


def test_catalog_lists_the_46_gates_of_the_spec() -> None:
    catalog = load_catalog()
    assert len(catalog) == 46
    assert all(g.id.startswith("gate.schedule.") for g in catalog)
    assert catalog.milestones() == [11, 19, 20, 23]
    counts = {m: len(catalog.in_milestone(m)) for m in catalog.milestones()}
    # The spec's own tallies: five M19 gates, six M20 gates, twelve M23 gates.
    assert counts == {11: 23, 19: 5, 20: 6, 23: 12}
    assert {g.kind for g in catalog} == set(GateKind)
    assert all(g.facets for g in catalog)


@pytest.mark.skipif(not SPEC.exists(), reason="the spec is not checked out beside the repo")
def test_catalog_matches_the_spec_word_for_word() -> None:
    section = SPEC.read_text(encoding="utf-8").split("Hard gates¶")[1].split("Open questions¶")[0]
    pattern = re.compile(r"^(.*?)\s*Registered as (gate\.schedule\.\w+), (\w+)\. M(\d+)\.$")
    spec = {}
    for line in filter(None, (p.strip() for p in section.splitlines())):
        match = pattern.match(line)
        assert match, line
        statement, gate_id, kind, milestone = match.groups()
        spec[gate_id] = (statement.replace("row- level", "row-level"), kind, int(milestone))
    catalog = {g.id: (g.statement, g.kind.value, g.milestone) for g in load_catalog()}
    assert catalog == spec


def test_duplicate_ids_are_refused() -> None:
    entry = '[[gate]]\nid = "gate.schedule.x"\nkind = "case"\nmilestone = 11\nstatement = "s"\n'
    with pytest.raises(ValueError, match="duplicate"):
        parse_catalog(entry * 2)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('@pytest.mark.gate("gate.schedule.nonexistent")', "unknown gate id"),
        ('@pytest.mark.gate("gate.schedule.not_early")', "name one with facet="),
        ('@pytest.mark.gate("gate.schedule.not_early", facet="http")', "has no facet"),
        ("@pytest.mark.gate(42)", "use @pytest.mark.gate"),
    ],
)
def test_a_bad_binding_fails_collection(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        textwrap.dedent(
            f"""
            import pytest

            {marker}
            def test_x():
                pass
            """
        )
    )
    result = pytester.runpytest(
        "--collect-only", "-p", "no:cacheprovider", "-p", "gates.runner.pytest_plugin"
    )
    assert result.ret != 0
    assert message in "\n".join(result.outlines + result.errlines)


def test_evidence_is_stored_as_plain_json() -> None:
    from gates.runner.pytest_plugin import GateEvidence

    class Name(str):
        pass

    evidence = GateEvidence()
    evidence.record("tables", [Name("schedules")])
    evidence.append("seen", {"k": Name("v")})
    assert type(evidence.values["tables"][0]) is str
    assert type(evidence.values["seen"][0]["k"]) is str
    with pytest.raises(TypeError):
        evidence.record("bad", object())


def test_a_checkout_from_before_the_move_keeps_its_catalog_under_gates(tmp_path: Path) -> None:
    """``verify --checkout`` finds the shipped files under ``src/catalog/``, or where a
    checkout from before ADR 2210 kept them (``src/gates/catalog/``, ``ledger.toml``)."""
    legacy = tmp_path / "legacy"
    (legacy / "src" / "gates" / "catalog").mkdir(parents=True)
    (legacy / "src" / "gates" / "catalog" / "catalog.toml").write_text("")
    (legacy / "src" / "gates" / "catalog" / "ledger.toml").write_text("")
    assert shipped_file_in(legacy, SHIPPED_CATALOG) == legacy / "src/gates/catalog/catalog.toml"
    assert shipped_file_in(legacy, SHIPPED_MILESTONES) == legacy / "src/gates/catalog/ledger.toml"
    current = tmp_path / "current"
    (current / "src" / "catalog").mkdir(parents=True)
    (current / "src" / "catalog" / "catalog.toml").write_text("")
    assert shipped_file_in(current, SHIPPED_CATALOG) == current / "src/catalog/catalog.toml"
    # Neither: the current place, which the caller then reports as missing.
    assert shipped_file_in(current, SHIPPED_MILESTONES) == current / "src/catalog/milestones.toml"
