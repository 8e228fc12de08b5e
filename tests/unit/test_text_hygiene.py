"""The boundary text validator: NUL and lone surrogates refused by field, never echoed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.domain.errors import ValidationError
from scheduling.domain.text import (
    MAX_DEPTH,
    TEXT_INVALID,
    TOO_DEEP,
    check_depth,
    check_text,
    check_tree,
    text_problem,
)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a\x00b", (1, "nul")),
        ("\ud800", (0, "lone_surrogate")),
        ("ok \udfff", (3, "lone_surrogate")),
        ("caf\u00e9 \U0001f600", None),
        ("", None),
    ],
)
def test_the_first_offending_position_and_kind(value: str, problem: object) -> None:
    assert text_problem(value) == problem


def test_the_error_names_the_field_and_never_the_value() -> None:
    secret = "sk_live_" + "x" * 24
    with pytest.raises(ValidationError) as caught:
        check_text("instruction", secret + "\x00")
    err = caught.value
    assert err.code == TEXT_INVALID
    assert err.details == {"field": "instruction", "position": len(secret), "problem": "nul"}
    assert secret not in str(err)
    assert secret not in repr(err.details)


def test_nested_values_report_a_json_path_and_check_keys() -> None:
    with pytest.raises(ValidationError) as caught:
        check_tree("cadence", {"kind": "DAILY", "timezone": "Europe/\ud800"})
    assert caught.value.details["field"] == "cadence.timezone"
    with pytest.raises(ValidationError) as by_key:
        check_tree("metadata", {"a\x00": 1})
    assert by_key.value.details["field"] == "metadata"
    with pytest.raises(ValidationError) as in_list:
        check_tree("args", {"dates": [{"m": 1}, "x\x00"]})
    assert in_list.value.details["field"] == "args.dates[1]"


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00")))
def test_storable_text_passes_unchanged(value: str) -> None:
    assert check_text("title", value) is value
    value.encode("utf-8")  # what the validator promises the hash and the driver


@given(st.text(), st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00"]), st.text())
def test_any_nul_or_surrogate_is_refused(head: str, bad: str, tail: str) -> None:
    with pytest.raises(ValidationError):
        check_text("title", head + bad + tail)


def nested(levels: int, leaf: object = 1, kind: str = "list") -> object:
    value = leaf
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("check", [check_tree, check_depth])
def test_nesting_is_bounded_iteratively(check: object, kind: str) -> None:
    assert callable(check)
    deepest = nested(MAX_DEPTH, kind=kind)
    assert check("args", deepest) is deepest
    for levels in (MAX_DEPTH + 1, 5000):  # 5,000: past the interpreter's recursion limit
        with pytest.raises(ValidationError) as caught:
            check("args", nested(levels, kind=kind))
        assert caught.value.code == TOO_DEEP
        assert caught.value.details == {"field": "args", "max_depth": MAX_DEPTH}


def test_a_bad_string_within_the_bound_is_reported_first_in_document_order() -> None:
    value = {"a": ["fine", "x\x00"], "b": "\ud800"}
    with pytest.raises(ValidationError) as caught:
        check_tree("args", value)
    assert caught.value.details["field"] == "args.a[1]"
    assert caught.value.code == TEXT_INVALID
