"""Odd input never stops the linter: it becomes a PC000 finding or is linted normally."""

from __future__ import annotations

import pytest

from promptcache.lint_rules import lint_source

HEADER = "import anthropic\nclient = anthropic.Anthropic()\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"client.messages.create(\ndef f(:\n", "cannot parse this file: "),
        (b"client.messages.create()\x00\n", "cannot parse this file"),
        (b"client.messages.create('\xff')\n", "cannot parse this file"),
        (
            ("x = " + "(" * 300 + ")" * 300 + "\nclient.messages.create()\n").encode(),
            "cannot parse",
        ),
        (
            (HEADER + "SYSTEM_PROMPT = " + " + ".join(['"a"'] * 900) + "\n").encode(),
            "cannot analyse this file: it nests deeper than the analysis can follow",
        ),
    ],
    ids=["syntax", "null-byte", "bad-utf8", "too-deep-to-parse", "too-deep-to-analyse"],
)
def test_bad_input_is_pc000(source: bytes, message: str) -> None:
    (diagnostic,) = lint_source(source, "odd.py").diagnostics
    assert diagnostic.code == "PC000"
    assert diagnostic.message.startswith(message)


def test_files_without_trigger_words_are_skipped_unparsed() -> None:
    # nothing in it could reach a prompt: it is not even parsed, so no PC000 either
    assert lint_source(b"def f(:\n", "plain.py").diagnostics == ()


def test_encodings_and_empty_files_lint_normally() -> None:
    latin = b"# -*- coding: latin-1 -*-\n" + HEADER.encode() + b"NAME = '\xe9'\n"
    assert lint_source(latin, "latin.py").diagnostics == ()
    assert lint_source(b"\xef\xbb\xbf" + HEADER.encode(), "bom.py").diagnostics == ()
    assert lint_source(b"", "empty.py").diagnostics == ()


def test_columns_are_utf8_bytes() -> None:
    source = HEADER + (
        "import time\n"
        "def ask(q):\n"
        "    return client.messages.create(model='m', system=f'é {time.time()}', messages=[q])\n"
    )
    (diagnostic,) = lint_source(source, "utf8.py").diagnostics
    line = source.splitlines()[diagnostic.location.line - 1]
    assert line.encode()[diagnostic.location.col :].startswith(b"time.time()")
