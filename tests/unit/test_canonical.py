import pytest

from scheduling.domain.canonical import canonical_json, content_hash


def test_canonical_json_is_key_order_independent_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'
    assert content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    assert content_hash({}).startswith("sha256:")


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="Out of range"):
        canonical_json({"x": float("nan")})
