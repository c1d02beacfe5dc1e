"""Odd input never stops the linter: it becomes a PC000 finding or is linted normally."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES

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


@pytest.mark.parametrize(
    "source",
    [b"def f(:\n", b"x = 1\x00\n", b"NAME = '\xff'\n", b"def f():\n  return 1\n    x = 2\n"],
    ids=["syntax", "null-byte", "bad-utf8", "indentation"],
)
def test_files_without_trigger_words_still_report_pc000(source: bytes) -> None:
    # nothing in it could reach a prompt, but a file that does not parse is always PC000
    (diagnostic,) = lint_source(source, "plain.py").diagnostics
    assert diagnostic.code == "PC000"
    assert diagnostic.message.startswith("cannot parse this file")


def test_pc000_of_untriggered_files_obeys_select() -> None:
    config = parse_table({"select": ["PC001"]}, Path("."), KNOWN_CODES)
    assert lint_source(b"def f(:\n", "plain.py", config).diagnostics == ()


def test_syntax_warnings_are_not_printed_or_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    # pytest turns warnings into errors: an invalid escape must not become PC000 or stderr noise
    for source in (
        b"PATTERN = '\\d+'\nok = PATTERN is 'x'\n",
        HEADER.encode() + b"SYSTEM_PROMPT = '\\d+'\n",
    ):
        assert lint_source(source, "escapes.py").diagnostics == ()
    assert capsys.readouterr().err == ""


def test_encodings_and_empty_files_lint_normally() -> None:
    latin = b"# -*- coding: latin-1 -*-\n" + HEADER.encode() + b"NAME = '\xe9'\n"
    assert lint_source(latin, "latin.py").diagnostics == ()
    assert lint_source(b"\xef\xbb\xbf" + HEADER.encode(), "bom.py").diagnostics == ()
    assert lint_source(b"", "empty.py").diagnostics == ()


BREAKER = (
    "import time\n"
    "def ask(q):\n"
    "    return client.messages.create(model='m', system=f'\u00e9 {time.time()}', messages=[q])\n"
)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("bom.py", b"\xef\xbb\xbf" + (HEADER + BREAKER).encode()),
        ("latin.py", b"# -*- coding: latin-1 -*-\n" + (HEADER + BREAKER).encode("latin-1")),
    ],
)
def test_a_bom_or_coding_line_file_gets_the_same_findings(name: str, raw: bytes) -> None:
    """A BOM (or a coding line) is read past, not a reason to skip the file: the cache breaker
    is found, at the line and UTF-8 byte column of the same call in the plain file."""
    plain = (HEADER + BREAKER).encode()
    (expected,) = lint_source(plain, "plain.py").diagnostics
    (found,) = lint_source(raw, name).diagnostics
    assert found.code == expected.code == "PC001"
    offset = 1 if name == "latin.py" else 0  # the coding line comes first
    assert (found.location.line, found.location.col) == (
        expected.location.line + offset,
        expected.location.col,
    )


def test_columns_are_utf8_bytes() -> None:
    source = HEADER + (
        "import time\n"
        "def ask(q):\n"
        "    return client.messages.create(model='m', system=f'é {time.time()}', messages=[q])\n"
    )
    (diagnostic,) = lint_source(source, "utf8.py").diagnostics
    line = source.splitlines()[diagnostic.location.line - 1]
    assert line.encode()[diagnostic.location.col :].startswith(b"time.time()")


@pytest.mark.parametrize(
    ("text", "estimate"), [("a", "about 1 token,"), ("word " * 30, "about 50 tokens,")]
)
def test_pc008_names_its_token_estimate_in_the_right_number(text: str, estimate: str) -> None:
    # the estimate counts 3 ASCII characters a token, rounded up: 1 char -> 1, 150 -> 50
    source = (
        "import anthropic\nclient = anthropic.Anthropic()\nclient.messages.create(\n"
        '    model="claude-sonnet-4-5", max_tokens=10,\n'
        f'    system=[{{"type": "text", "text": {text!r},\n'
        '        "cache_control": {"type": "ephemeral"}}],\n'
        '    messages=[{"role": "user", "content": "hi"}],\n)\n'
    )
    (diagnostic,) = lint_source(source.encode(), "short.py").diagnostics
    assert diagnostic.code == "PC008"
    assert estimate in diagnostic.message
