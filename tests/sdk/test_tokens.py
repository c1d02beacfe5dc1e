"""count_tokens: bundled cl100k_base (no network) and a real HF tokenizer.json."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import tiktoken.load

from promptcache import tokens
from promptcache.errors import ConfigError
from promptcache.tokens import count_tokens, token_counter

TOKENIZER_JSON = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
) / "tokenizer.json"


def test_cl100k_known_counts_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("count_tokens tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    tokens._cl100k.cache_clear()
    assert count_tokens("tiktoken is great!") == 6  # OpenAI cookbook example
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special-token text counts as plain text


def test_cl100k_matches_tiktokens_own_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # read the local file, cache nothing
    path = tokens._cl100k_path()
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    assert ranks == tokens._cl100k()._mergeable_ranks
    text = "def f(x):\n    return x ** 2  # ünïcödé ✓\r\n\tSELECT * FROM t;"
    reference = tiktoken.Encoding(
        name="ref",
        pat_str=tokens._CL100K_PAT,
        mergeable_ranks=ranks,
        special_tokens=tokens._CL100K_SPECIAL,
    )
    assert count_tokens(text) == len(reference.encode(text))


def test_hf_tokenizer_json() -> None:
    assert TOKENIZER_JSON.is_file(), f"test model missing at {TOKENIZER_JSON}"
    text = "Once upon a time, there was a little dog."
    assert count_tokens(text, tokenizer_json=TOKENIZER_JSON) == 9  # no BOS
    assert token_counter(tokenizer_json=TOKENIZER_JSON).exact


def test_exactness_by_model() -> None:
    assert token_counter("gpt-4-turbo").exact
    assert token_counter("openai/gpt-3.5-turbo").exact
    for model in ("gpt-4o", "gpt-4.1-mini", "gpt-5", "o3", "claude-sonnet-4-5", None):
        counter = token_counter(model)
        assert not counter.exact and "approximate" in counter.note
    assert count_tokens("hello world", "claude-sonnet-4-5") == 2


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs str text, got bytes"):
        count_tokens(b"x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"does not exist"):
        count_tokens("x", tokenizer_json=tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match=r"is not a valid tokenizer.json"):
        count_tokens("x", tokenizer_json=bad)


@pytest.mark.parametrize("tokenizer_json", [None, TOKENIZER_JSON])
def test_a_lone_surrogate_counts_as_the_replacement_character(
    tokenizer_json: Path | None,
) -> None:
    # tiktoken's encode replaces it with U+FFFD; the tokenizer.json count raised
    # "TypeError: TextInputSequence must be str" from inside tokenizers
    broken, replaced = "a child \ud83d story", "a child \ufffd story"
    assert count_tokens(broken, tokenizer_json=tokenizer_json) == count_tokens(
        replaced, tokenizer_json=tokenizer_json
    )
    # well-formed text is counted as before (test_hf_tokenizer_json: 9 for the tiny story)
    assert count_tokens(replaced, tokenizer_json=tokenizer_json) > 0


def test_a_model_that_is_not_a_name_and_a_folder_for_tokenizer_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model must be a model name \(str\) or None, got int"):
        count_tokens("x", model=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"is a folder; pass its tokenizer\.json file"):
        count_tokens("x", tokenizer_json=tmp_path)
    assert count_tokens("x", model=None) == count_tokens("x", model="gpt-4") == 1
