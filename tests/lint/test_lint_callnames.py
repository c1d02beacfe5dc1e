"""``CallNames`` answers "does the file hold ``name(`` / ``.name(``?" as the substring test does."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.lint_rules.analysis.callnames import CallNames

#: bytes that make runs, calls, attribute calls and their boundaries (``é`` is two non-word bytes)
_PIECES = [b"a", b"b", b"_", b"1", b".", b"(", b" ", b"\n", b"\xc3\xa9", b"ab(", b".b("]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=24).map(b"".join),
    st.lists(st.text(alphabet="ab_1", min_size=1, max_size=3), min_size=1, max_size=6),
)
def test_same_answer_as_the_substring_test(raw: bytes, names: list[str]) -> None:
    index = CallNames("unused.py", raw)
    for name in names:
        for text in (f"{name}(".encode(), f".{name}(".encode()):
            assert index.contains(text) == (text in raw), (raw, text)


def test_a_longer_name_holds_a_shorter_one_and_a_dot_needs_the_whole_run() -> None:
    index = CallNames("unused.py", b"x = client.my_tool(a)\nrun (b)\n")
    assert index.contains(b"tool(") and index.contains(b"my_tool(")
    assert index.contains(b".my_tool(") and not index.contains(b".tool(")
    assert not index.contains(b"run(")  # a space before "(" is not a call text


def test_a_name_of_other_bytes_is_looked_up_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes("r = café(1) + x.naïve(2)\n".encode())
    index = CallNames.read(str(path))
    assert index.contains("café(".encode()) and index.contains(".naïve(".encode())
    assert not index.contains(".café(".encode())


def test_an_unreadable_file_holds_no_call(tmp_path: Path) -> None:
    index = CallNames.read(str(tmp_path / "missing.py"))
    assert not index.contains(b"f(") and not index.contains(b".f(")
