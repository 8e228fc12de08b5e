"""``values.preview`` flattens a prefix of a long instruction (ADR 2650) and gives what
flattening the whole gave: whitespace runs as single spaces, cut to the limit with an
ellipsis. Checked against the definition over texts rich in whitespace (every kind
``str.split`` knows) around the prefix's edge."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.service import values

LIMIT = values.PREVIEW_CHARS
HEAD = values.PREVIEW_HEAD * LIMIT
SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u3000"


def whole(instruction: str, limit: int = LIMIT) -> str:
    # The definition: the whole instruction flattened, then cut.
    flat = " ".join(instruction.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def head_only(instruction: str, limit: int = LIMIT) -> str:
    # A plausible wrong preview: the prefix trusted even when it flattens short.
    return whole(instruction[: values.PREVIEW_HEAD * limit], limit)


texts = st.text(alphabet=st.sampled_from([*SPACES, "a", "b", "é", "😀"]), max_size=HEAD + 200)
runs = st.lists(
    st.tuples(
        st.sampled_from(["word", "x", " ", "\n\n", "\u3000" * 3, " " * 40]), st.integers(1, 30)
    ),
    max_size=40,
).map(lambda parts: "".join(piece * n for piece, n in parts))


@settings(max_examples=400, deadline=None)
@given(st.one_of(texts, runs))
def test_equal_to_the_whole_text_flattened(instruction: str) -> None:
    assert values.preview(instruction) == whole(instruction)


def test_edges_of_the_prefix() -> None:
    for cut in range(HEAD - 3, HEAD + 3):
        for filler in ("a", " ", "ab "):
            text = (filler * HEAD)[:cut] + " tail words here " * 3
            assert values.preview(text) == whole(text)
    assert values.preview("x" * 20_000) == "x" * (LIMIT - 1) + "\u2026"


def test_of_the_test_a_prefix_trusted_alone_differs() -> None:
    blank_start = " " * HEAD + "the words"
    assert head_only(blank_start) != whole(blank_start)
    assert values.preview(blank_start) == "the words"
