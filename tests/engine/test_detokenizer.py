"""Incremental detokenisation and stop strings that span token boundaries."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch  # noqa: F401 - loaded up front so the engine fixtures pin it to one thread

from promptcache.engine import LLM, SamplingParams, Tokenizer
from promptcache.engine.detokenizer import IncrementalDetokenizer


@pytest.fixture(scope="module")
def tokenizer(tinystories_dir: Path) -> Tokenizer:
    return Tokenizer.from_pretrained(tinystories_dir)


def _pieces(tok: Tokenizer, prompt: list[int], output: list[int]) -> list[str]:
    detok = IncrementalDetokenizer(tok, prompt)
    out = []
    for token in output:
        before = len(detok.text)
        detok.add_tokens([token])
        out.append(detok.text[before:])
    return out


def test_pieces_add_up_to_the_full_decode(tokenizer: Tokenizer, prompts: list[str]) -> None:
    for text in prompts:
        ids = tokenizer.encode(text)
        prompt, output = ids[: len(ids) // 2], ids[len(ids) // 2 :]
        joined = "".join(_pieces(tokenizer, prompt, output))
        full, head = tokenizer.decode(prompt + output), tokenizer.decode(prompt)
        assert joined == full[len(head) :], text
    # After BOS alone the decoder strips the leading "▁" (as a full decode does); later
    # pieces keep their spaces.
    once = tokenizer.encode("Once upon a time, there was a dog")
    assert "".join(_pieces(tokenizer, once[:1], once[1:4])) == "Once "
    assert "".join(_pieces(tokenizer, once[:4], once[4:7])) == "upon a time, there was a "


def test_split_utf8_character_is_held_until_complete() -> None:
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, pre_tokenizers

    # A byte-level BPE with no merges: every UTF-8 byte is its own token.
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    backend = Backend(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tok = Tokenizer(backend)
    prompt, output = tok.encode("The caf"), tok.encode("é!")
    assert len(output) == 3  # two bytes for "é", one for "!"
    assert _pieces(tok, prompt, output) == ["", "é", "!"]


def test_stop_string_spanning_tokens_cuts_the_text(tokenizer: Tokenizer) -> None:
    prompt = tokenizer.encode("Once")
    output = tokenizer.encode(" upon a time. The end. Bye", add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer, prompt, stop_strings=["e end", "zzz"])
    shown: list[str] = []
    matched, completed_at = None, -1
    for i, token in enumerate(output):
        matched = detok.add_tokens([token])
        shown.append(detok.visible_text(finished=matched is not None))
        if matched:
            completed_at = i
            break
    assert matched == "e end"
    assert detok.text == " upon a time. Th"
    # The match needed more than one token: "e end" was not complete one token earlier.
    assert tokenizer.decode(output[: completed_at + 1]).endswith("end")
    assert not tokenizer.decode(output[:completed_at]).endswith("e end")
    # Streaming never shows something it later takes back.
    for earlier, later in itertools.pairwise(shown):
        assert later.startswith(earlier)


def test_engine_stops_on_a_string_across_a_token_boundary(tinystories_dir: Path) -> None:
    llm = LLM(tinystories_dir, dtype="float32")
    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    [free] = llm.generate("Once upon a time", greedy)
    prompt = free.prompt_token_ids
    pieces = _pieces(llm.tokenizer, prompt, free.output_token_ids)
    # A stop string made of the end of token 5's text and the start of token 6's.
    boundary = len("".join(pieces[:6]))
    stop = free.text[boundary - 2 : boundary + 2]
    assert len(pieces[5]) >= 2 and len(pieces[6]) >= 2 and stop not in free.text[: boundary + 1]
    [out] = llm.generate(
        "Once upon a time", SamplingParams(temperature=0.0, max_tokens=24, stop=stop)
    )
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert out.text == free.text[: free.text.index(stop)]
    assert out.output_token_ids == free.output_token_ids[:7]


def test_streamed_outputs_only_grow(tinystories_dir: Path) -> None:
    llm = LLM(tinystories_dir, dtype="float32")
    engine = llm.engine
    params = SamplingParams(temperature=0.0, max_tokens=20, stop=["never-appears"])
    engine.add_request("stream", "Lily and Tom", params)
    texts: list[str] = []
    new_ids: list[int] = []
    final = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            texts.append(out.text)
            new_ids += out.new_token_ids
            final = out
    assert final is not None and final.finished and final.finish_reason == "length"
    assert new_ids == final.output_token_ids
    for earlier, later in itertools.pairwise(texts):
        assert later.startswith(earlier)
    # While running, len("never-appears") - 1 = 12 characters are held back.
    assert len(texts[-2]) <= len(final.text) - 12
    assert (
        final.text
        == llm.tokenizer.decode(final.prompt_token_ids + final.output_token_ids)[
            len(llm.tokenizer.decode(final.prompt_token_ids)) :
        ]
    )
