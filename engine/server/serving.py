"""Turn a request's stream of engine outputs into OpenAI answers: one JSON body, or SSE events.

Choice numbering: a ``/v1/completions`` request with several prompts and ``n`` samples each
numbers its choices ``prompt_index * n + sample_index``, as OpenAI and vLLM do. Usage counts
each prompt once (its ``n`` samples share the prompt's KV blocks), completion tokens over every
choice, and ``cached_tokens`` per prompt from the engine's prefix-cache hit at admission.

Streamed text is the difference between successive ``RequestOutput.text`` values, which only
grow, so the concatenated deltas equal the non-streamed text exactly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from promptcache.errors import EngineError

from ..outputs import RequestOutput
from .async_engine import RequestStream
from .protocol import ChatRequest, CompletionRequest
from .responses import (
    TokenTexts,
    chat_choice,
    chat_chunk,
    chat_logprobs,
    chat_response,
    completion_choice,
    completion_chunk,
    completion_logprobs,
    completion_response,
    usage,
)
from .sse import DONE_EVENT, encode_event

__all__ = ["ResponseMeta", "chat_body", "chat_events", "completion_body", "completion_events"]

Json = dict[str, Any]


@dataclass(frozen=True)
class ResponseMeta:
    """Fields every response object repeats: ``id``, ``created`` (Unix seconds), ``model``."""

    request_id: str
    created: int
    model: str
    #: Report ``prompt_tokens_details.cached_tokens_by_tier`` (the engine has cache tiers).
    cached_by_tier: bool = False


@dataclass
class _Usage:
    """Usage accumulated from finished outputs, keyed by (prompt index, sample index)."""

    prompt_lens: list[int]
    by_tier: bool = False
    completion: dict[tuple[int, int], int] = field(default_factory=dict)
    cached: dict[int, int] = field(default_factory=dict)
    tiers: dict[int, dict[str, int]] = field(default_factory=dict)

    def add(self, prompt_index: int, out: RequestOutput) -> None:
        self.completion[(prompt_index, out.sample_index)] = len(out.output_token_ids)
        if out.num_cached_tokens >= self.cached.get(prompt_index, 0):
            self.cached[prompt_index] = out.num_cached_tokens
            self.tiers[prompt_index] = dict(out.num_cached_tokens_by_tier)

    def as_json(self) -> Json:
        completion = sum(self.completion.values())
        by_tier = None
        if self.by_tier:
            by_tier = {"pool": 0, "ram": 0, "disk": 0}
            for split in self.tiers.values():
                for tier, n in split.items():
                    by_tier[tier] += n
        return usage(sum(self.prompt_lens), completion, sum(self.cached.values()), by_tier)


def _finish_reason(out: RequestOutput) -> str | None:
    if not out.finished:
        return None
    return "length" if out.finish_reason == "length" else "stop"


# Completions ------------------------------------------------------------------------------------


async def completion_body(
    req: CompletionRequest, stream: RequestStream, meta: ResponseMeta, texts: TokenTexts
) -> Json:
    """Wait for every choice to finish; return the ``text_completion`` object."""
    finals: dict[tuple[int, int], RequestOutput] = {}
    tally = _Usage([len(p) for p in req.prompts], meta.cached_by_tier)
    async for item in stream:
        tally.add(item.prompt_index, item.output)
        if item.output.finished:
            finals[(item.prompt_index, item.output.sample_index)] = item.output
    n = req.params.n
    choices: list[Json] = []
    for p, prompt in enumerate(req.prompts):
        for i in range(n):
            out = finals[(p, i)]
            lp = None
            if req.params.logprobs is not None and out.logprobs is not None:
                lp, _ = completion_logprobs(texts, prompt, out.logprobs)
            text = (req.prompt_texts[p] if req.echo else "") + out.text
            choices.append(completion_choice(p * n + i, text, _finish_reason(out), lp))
    return completion_response(meta.request_id, meta.created, meta.model, choices, tally.as_json())


async def completion_events(
    req: CompletionRequest, stream: RequestStream, meta: ResponseMeta, texts: TokenTexts
) -> AsyncIterator[bytes]:
    """SSE events of a streamed completion, ending with ``data: [DONE]``."""
    n = req.params.n
    tally = _Usage([len(p) for p in req.prompts], meta.cached_by_tier)
    sent_chars: dict[tuple[int, int], int] = {}
    sent_lps: dict[tuple[int, int], int] = {}
    lp_offsets: dict[tuple[int, int], int] = {}  # text offset after the logprobs already sent

    def event(choices: list[Json], usage_obj: Json | None = None) -> bytes:
        return encode_event(
            completion_chunk(
                meta.request_id,
                meta.created,
                meta.model,
                choices,
                include_usage=req.include_usage,
                usage_obj=usage_obj,
            )
        )

    if req.echo:
        yield event(
            [
                completion_choice(p * n + i, req.prompt_texts[p], None)
                for p in range(len(req.prompts))
                for i in range(n)
            ]
        )
    try:
        async for item in stream:
            out, p = item.output, item.prompt_index
            tally.add(p, out)
            key = (p, out.sample_index)
            start = sent_chars.get(key, 0)
            delta = out.text[start:]
            sent_chars[key] = len(out.text)
            lp = None
            if req.params.logprobs is not None and out.logprobs is not None:
                first = sent_lps.get(key, 0)
                context = req.prompts[p] + out.output_token_ids[:first]
                lp, lp_offsets[key] = completion_logprobs(
                    texts, context, out.logprobs[first:], text_offset=lp_offsets.get(key, 0)
                )
                sent_lps[key] = len(out.logprobs)
            finish = _finish_reason(out)
            if delta or finish or (lp and lp["tokens"]):
                yield event([completion_choice(p * n + out.sample_index, delta, finish, lp)])
    except EngineError as exc:
        yield encode_event(_stream_error(exc))
    else:
        if req.include_usage:
            yield event([], tally.as_json())
    yield DONE_EVENT


# Chat ---------------------------------------------------------------------------------------------


async def chat_body(
    req: ChatRequest, stream: RequestStream, meta: ResponseMeta, texts: TokenTexts
) -> Json:
    """Wait for every choice to finish; return the ``chat.completion`` object."""
    finals: dict[int, RequestOutput] = {}
    tally = _Usage([len(req.prompt)], meta.cached_by_tier)
    async for item in stream:
        tally.add(0, item.output)
        if item.output.finished:
            finals[item.output.sample_index] = item.output
    choices: list[Json] = []
    for i in range(req.params.n):
        out = finals[i]
        lp = None
        if req.params.logprobs is not None and out.logprobs is not None:
            lp = chat_logprobs(texts, req.prompt, out.logprobs)
        choices.append(chat_choice(i, out.text, _finish_reason(out), lp))
    return chat_response(meta.request_id, meta.created, meta.model, choices, tally.as_json())


async def chat_events(
    req: ChatRequest, stream: RequestStream, meta: ResponseMeta, texts: TokenTexts
) -> AsyncIterator[bytes]:
    """SSE events of a streamed chat completion: a role delta per choice first, then content
    deltas, the finish reason on each choice's last chunk, optionally a usage chunk, [DONE].

    The role delta is sent with the first output (after the prefill), not when the request
    arrives, as vLLM's server does: a proxy or client that times the first byte then measures
    the time to the first token, not the time to an empty chunk."""
    tally = _Usage([len(req.prompt)], meta.cached_by_tier)
    sent_chars: dict[int, int] = {}
    sent_lps: dict[int, int] = {}

    def event(choices: list[Json], usage_obj: Json | None = None) -> bytes:
        return encode_event(
            chat_chunk(
                meta.request_id,
                meta.created,
                meta.model,
                choices,
                include_usage=req.include_usage,
                usage_obj=usage_obj,
            )
        )

    role_event = event(
        [
            {
                "index": i,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
            for i in range(req.params.n)
        ]
    )
    role_sent = False
    try:
        async for item in stream:
            if not role_sent:
                role_sent = True
                yield role_event
            out, i = item.output, item.output.sample_index
            tally.add(0, out)
            delta = out.text[sent_chars.get(i, 0) :]
            sent_chars[i] = len(out.text)
            lp = None
            if req.params.logprobs is not None and out.logprobs is not None:
                first = sent_lps.get(i, 0)
                context = req.prompt + out.output_token_ids[:first]
                lp = chat_logprobs(texts, context, out.logprobs[first:])
                sent_lps[i] = len(out.logprobs)
            finish = _finish_reason(out)
            if delta or finish or (lp and lp["content"]):
                yield event(
                    [
                        {
                            "index": i,
                            "delta": {"content": delta} if delta else {},
                            "logprobs": lp,
                            "finish_reason": finish,
                        }
                    ]
                )
    except EngineError as exc:
        yield encode_event(_stream_error(exc))
    else:
        if not role_sent:
            yield role_event
        if req.include_usage:
            yield event([], tally.as_json())
    yield DONE_EVENT


def _stream_error(exc: EngineError) -> Json:
    """The event sent when the engine fails mid-stream (headers are already out)."""
    return {"error": {"message": str(exc), "type": "server_error", "param": None, "code": None}}
