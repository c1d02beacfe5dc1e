"""Completions ``logprobs.text_offset``: each token's start in the choice text, the same whether
the response is streamed or not, with special tokens (an EOS kept by ``ignore_eos``) and with
text held back while a stop string might be forming."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from server_support import MODEL_NAME

PROMPT = "Once upon a time, there was a little girl named Lily."
SPECIAL = "<|end_story|>"  # the tinystories EOS token


def _streamed(client: openai.OpenAI, **kwargs: Any) -> tuple[str, list[str], list[int]]:
    """(text, tokens, text offsets) of a streamed one-choice completion, chunks joined."""
    text, tokens, offsets = "", [], []
    for chunk in client.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            text += choice.text
            if choice.logprobs is not None:
                tokens += choice.logprobs.tokens or []
                offsets += choice.logprobs.text_offset or []
    return text, tokens, offsets


@pytest.mark.parametrize(
    "extra",
    [
        {"max_tokens": 12, "extra_body": {"ignore_eos": True}},  # runs past an EOS
        {"max_tokens": 40, "stop": ["Lily"]},  # text held back while "L" could start "Lily"
    ],
    ids=["ignore_eos", "stop_string"],
)
def test_text_offsets_point_into_the_text_streamed_or_not(
    client: openai.OpenAI, extra: dict[str, Any]
) -> None:
    kwargs = {"model": MODEL_NAME, "prompt": PROMPT, "temperature": 0, "logprobs": 1, **extra}
    plain = client.completions.create(**kwargs)
    choice = plain.choices[0]
    assert choice.logprobs is not None
    tokens, offsets = choice.logprobs.tokens or [], choice.logprobs.text_offset or []
    if "stop" not in extra:
        assert SPECIAL in tokens  # the case under test: a special token mid-output
    # offsets count only what each token adds to the text; a special token adds nothing
    visible = [t if t != SPECIAL else "" for t in tokens]
    assert offsets == [len("".join(visible[:i])) for i in range(len(tokens))]
    for token, offset in zip(visible, offsets, strict=True):
        if offset + len(token) <= len(choice.text):
            assert choice.text[offset : offset + len(token)] == token
    assert _streamed(client, **kwargs) == (choice.text, tokens, offsets)
