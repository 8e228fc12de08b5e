from gates.catalog import GateKind, load_catalog


def test_catalog_lists_the_46_gates_of_the_spec() -> None:
    catalog = load_catalog()
    assert len(catalog) == 46
    assert all(g.id.startswith("gate.schedule.") for g in catalog)
    assert catalog.milestones() == [11, 19, 20, 23]
    counts = {m: len(catalog.in_milestone(m)) for m in catalog.milestones()}
    # The spec's own tallies: five M19 gates, six M20 gates, twelve M23 gates.
    assert counts == {11: 23, 19: 5, 20: 6, 23: 12}
    assert {g.kind for g in catalog} == set(GateKind)
