"""OpenAI response bodies: completions, chat completions, their stream chunks, usage, logprobs.

Shapes follow the OpenAI API reference for ``text_completion``, ``chat.completion`` and
``chat.completion.chunk`` objects (https://platform.openai.com/docs/api-reference/chat/object,
https://platform.openai.com/docs/api-reference/completions/object, checked 2026-11-30): every
field the official ``openai`` client models is present, ``usage`` always carries
``prompt_tokens_details.cached_tokens`` (0 when nothing was cached), as OpenAI does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..sampler import TokenLogprobs
from ..tokenizer import Tokenizer

__all__ = [
    "MIN_LOGPROB",
    "TokenTexts",
    "chat_choice",
    "chat_chunk",
    "chat_logprobs",
    "chat_response",
    "completion_choice",
    "completion_chunk",
    "completion_logprobs",
    "completion_response",
    "json_logprob",
    "usage",
]

#: Tokens of left context used to decode one token's text (enough for byte-level merges and
#: SentencePiece's leading-space marker).
_CONTEXT_TOKENS = 4

Json = dict[str, Any]


def usage(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int,
    cached_tokens_by_tier: dict[str, int] | None = None,
) -> Json:
    """The ``usage`` object; ``cached_tokens`` are prompt tokens served by the prefix cache.

    ``cached_tokens_by_tier`` (an engine with cache tiers only) adds our own extension field
    ``prompt_tokens_details.cached_tokens_by_tier``: ``{"pool": n, "ram": n, "disk": n}``,
    where each of the cached tokens was found; the three sum to ``cached_tokens``.
    """
    details: Json = {"cached_tokens": cached_tokens}
    if cached_tokens_by_tier is not None:
        details["cached_tokens_by_tier"] = cached_tokens_by_tier
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": details,
    }


# Completions ------------------------------------------------------------------------------------


def completion_choice(
    index: int, text: str, finish_reason: str | None, logprobs: Json | None = None
) -> Json:
    """One entry of a ``text_completion``'s ``choices`` (also used by stream chunks)."""
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}


def completion_response(
    request_id: str, created: int, model: str, choices: list[Json], usage_obj: Json
) -> Json:
    """A whole ``text_completion`` object (non-streaming answer)."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage_obj,
        "system_fingerprint": None,
    }


def completion_chunk(
    request_id: str,
    created: int,
    model: str,
    choices: list[Json],
    *,
    include_usage: bool,
    usage_obj: Json | None = None,
) -> Json:
    """One streamed ``text_completion`` event; ``usage`` is null except on the usage chunk."""
    chunk: Json = {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "system_fingerprint": None,
    }
    if include_usage:
        chunk["usage"] = usage_obj
    return chunk


# Chat ---------------------------------------------------------------------------------------------


def chat_choice(
    index: int, content: str, finish_reason: str | None, logprobs: Json | None = None
) -> Json:
    """One entry of a ``chat.completion``'s ``choices``."""
    return {
        "index": index,
        "message": {"role": "assistant", "content": content, "refusal": None},
        "logprobs": logprobs,
        "finish_reason": finish_reason,
    }


def chat_response(
    request_id: str, created: int, model: str, choices: list[Json], usage_obj: Json
) -> Json:
    """A whole ``chat.completion`` object (non-streaming answer)."""
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage_obj,
        "system_fingerprint": None,
    }


def chat_chunk(
    request_id: str,
    created: int,
    model: str,
    choices: list[Json],
    *,
    include_usage: bool,
    usage_obj: Json | None = None,
) -> Json:
    """One ``chat.completion.chunk`` event. A choice is ``{"index", "delta", "logprobs",
    "finish_reason"}``; the first delta of a choice carries ``role``."""
    chunk: Json = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
        "system_fingerprint": None,
    }
    if include_usage:
        chunk["usage"] = usage_obj
    return chunk


# Logprobs -----------------------------------------------------------------------------------------


class TokenTexts:
    """Text of single tokens as they read in context (for logprobs).

    A token decoded on its own can lose its leading space (SentencePiece) or be half a UTF-8
    character, so a token's text is ``decode(context + [token]) - decode(context)`` with a few
    tokens of left context; special tokens are shown (e.g. ``</s>``).
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    def text(self, context: Sequence[int], token_id: int) -> str:
        """The text ``token_id`` adds after ``context`` (ids before it), special tokens shown."""
        return self._added(context, token_id, skip_special_tokens=False)

    def output_chars(self, context: Sequence[int], token_id: int) -> int:
        """Characters ``token_id`` adds to the output text, which leaves special tokens out
        (0 for an EOS kept by ``ignore_eos``)."""
        return len(self._added(context, token_id, skip_special_tokens=True))

    def _added(self, context: Sequence[int], token_id: int, skip_special_tokens: bool) -> str:
        window = list(context[-_CONTEXT_TOKENS:])
        decode = self._tokenizer.decode
        before = decode(window, skip_special_tokens=skip_special_tokens)
        full = decode([*window, token_id], skip_special_tokens=skip_special_tokens)
        if full.startswith(before):
            return full[len(before) :]
        return decode([token_id], skip_special_tokens=skip_special_tokens)


def chat_logprobs(
    texts: TokenTexts, context: Sequence[int], entries: Sequence[TokenLogprobs]
) -> Json:
    """The chat ``logprobs`` object for ``entries`` (one per output token, in order).

    ``context`` is every token id before the first entry's token (prompt + earlier output).
    """
    ids = list(context)
    content: list[Json] = []
    for entry in entries:
        token = texts.text(ids, entry.token_id)
        content.append(
            {
                **_chat_token(token, entry.logprob),
                "top_logprobs": [_chat_token(texts.text(ids, tid), lp) for tid, lp in entry.top],
            }
        )
        ids.append(entry.token_id)
    return {"content": content, "refusal": None}


def _chat_token(token: str, logprob: float) -> Json:
    return {"token": token, "logprob": json_logprob(logprob), "bytes": list(token.encode("utf-8"))}


#: Stands for a logprob JSON cannot carry (-inf, or NaN from a model that overflowed), as vLLM
#: does: JSON has no -Infinity / NaN, and a strict encoder would fail the whole response.
MIN_LOGPROB = -9999.0


def json_logprob(logprob: float) -> float:
    """``logprob`` ready for JSON: finite values unchanged (floored at ``MIN_LOGPROB``), -inf and
    NaN as ``MIN_LOGPROB``."""
    return logprob if logprob >= MIN_LOGPROB else MIN_LOGPROB


def completion_logprobs(
    texts: TokenTexts,
    context: Sequence[int],
    entries: Sequence[TokenLogprobs],
    text_offset: int = 0,
) -> tuple[Json, int]:
    """The legacy completions ``logprobs`` object, and the text offset after its last token.

    The object has parallel lists ``tokens``, ``token_logprobs``, ``top_logprobs`` (token text
    -> logprob) and ``text_offset``: where each token starts in the choice text, counting from
    ``text_offset`` (the characters the tokens before ``entries`` produced). Offsets count only
    what a token adds to the output text, so a special token shown in ``tokens`` moves none; a
    stream passes the returned offset to its next chunk, which gives the same offsets as the
    non-streamed response.
    """
    ids = list(context)
    out: Json = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    offset = text_offset
    for entry in entries:
        out["tokens"].append(texts.text(ids, entry.token_id))
        out["token_logprobs"].append(json_logprob(entry.logprob))
        top = {texts.text(ids, tid): json_logprob(lp) for tid, lp in entry.top}
        out["top_logprobs"].append(top)
        out["text_offset"].append(offset)
        offset += texts.output_chars(ids, entry.token_id)
        ids.append(entry.token_id)
    return out, offset
