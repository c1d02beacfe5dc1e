"""count_tokens_reusing: the same count as count_tokens, reusing the pieces of a shared start."""

from __future__ import annotations

import random

import pytest

from promptcache import tokens
from promptcache.errors import ConfigError
from promptcache.tokens import PIECE_CHARS, count_tokens, count_tokens_reusing

#: Pieces of text that stress cl100k_base's pre-tokenizer around a cut: contractions, runs of
#: spaces and newlines, digits, punctuation, letters beyond ASCII, a lone surrogate, special-token
#: text, words of every length.
_PARTS = ["a", "Zq", "é", "ß", "中文", "1", "234", "'s", "'ll", "'T", " ", "  ", "\n", "\r\n", "\t",
          " \n ", "!", "?!", ".", "-", "_", '"', "\\u0041", "\ud800", "😀", "<|endoftext|>",
          " a", " word", " The", "don't", " 12", "x" * 40]  # fmt: skip


def _forget() -> None:
    """Empty the remembered pieces (and their character count, which bounds them)."""
    with tokens._PIECES_LOCK:
        tokens._PIECES.clear()
        tokens._pieces_chars = 0


def _random_text(rng: random.Random, chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < chars:
        if rng.random() < 0.5:
            part = rng.choice(_PARTS)
        else:
            part = "".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 9)))
        parts.append(part)
        size += len(part)
    return "".join(parts)


def test_the_same_count_as_count_tokens_on_odd_texts() -> None:
    rng = random.Random(20261206)
    for _ in range(400):
        text = _random_text(rng, rng.randint(2 * PIECE_CHARS, 1500))
        twin = text[: rng.randint(0, len(text))] + _random_text(rng, 40)
        for each in (text, twin, text + " " * rng.randint(1, 3), text + "\n"):
            assert count_tokens_reusing(each) == count_tokens(each), repr(each)


def test_short_texts_and_texts_without_a_cut() -> None:
    for text in ("", "hello world", "x" * 1000, " " * 600, "1 2 3 " * 100, "é " * 300):
        assert count_tokens_reusing(text) == count_tokens(text)


def test_a_shared_document_is_counted_once() -> None:
    rng = random.Random(5)
    words = ["cache", "prefix", "replica", "token", "the", "router", "engine", "block"]
    document = " ".join(rng.choice(words) for _ in range(200))
    first = document + "\nQuestion: which replica holds it?"
    second = document + "\nQuestion: how many blocks are cached?"
    _forget()
    assert count_tokens_reusing(first) == count_tokens(first)
    remembered = dict(tokens._PIECES)
    # the pieces before the last, in order from the start
    assert remembered
    assert first.startswith("".join(remembered))
    assert len(first) - len("".join(remembered)) < PIECE_CHARS + 48
    assert count_tokens_reusing(second) == count_tokens(second)
    # the second text reuses the document's pieces: what it adds lies past the last cut in the
    # document (its words are at most 7 characters, so cuts are at most PIECE_CHARS + 8 apart)
    new = [p for p in tokens._PIECES if p not in remembered]
    assert sum(map(len, new)) <= len(second) - len(document) + PIECE_CHARS + 8


def test_the_remembered_pieces_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_PIECES_CHARS", 2000)
    _forget()
    rng = random.Random(11)
    for _ in range(50):
        text = " ".join("".join(rng.choice("abcdef") for _ in range(6)) for _ in range(100))
        assert count_tokens_reusing(text) == count_tokens(text)
    assert 0 < sum(map(len, tokens._PIECES)) == tokens._pieces_chars <= 2000
    # a piece longer than the whole bound (a long run without a cut) is counted, not kept
    text = "a" + "1 " * 1500 + "word " + "b" * 300
    assert count_tokens_reusing(text) == count_tokens(text)
    assert 0 < sum(map(len, tokens._PIECES)) == tokens._pieces_chars <= 2000
    _forget()


def test_not_a_string() -> None:
    with pytest.raises(ConfigError, match="needs str text"):
        count_tokens_reusing(b"bytes")  # type: ignore[arg-type]
