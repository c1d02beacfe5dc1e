"""Canned vendor responses: what the capture endpoint answers so the program runs on offline.

Each answer is a valid response in the vendor's wire format, JSON or Server-Sent Events, with
one short text reply and a usage block, so the official clients parse it as they would the real
one. Shapes follow the vendors' API references (checked 2026-12-03):

- Anthropic Messages, https://platform.claude.com/docs/en/api/messages and
  https://platform.claude.com/docs/en/build-with-claude/streaming (``message_start``,
  ``content_block_start``, ``content_block_delta``, ``content_block_stop``, ``message_delta``,
  ``message_stop``); ``count_tokens`` answers ``{"input_tokens": N}``;
- OpenAI Chat Completions, https://platform.openai.com/docs/api-reference/chat (``chat.
  completion`` / ``chat.completion.chunk`` events, a usage chunk when ``stream_options.
  include_usage``, then ``data: [DONE]``);
- OpenAI Responses, https://platform.openai.com/docs/api-reference/responses-streaming
  (``response.created`` ... ``response.completed``, each with a ``sequence_number``);
- OpenAI Completions (legacy) and ``GET /v1/models``;
- OpenAI Embeddings, https://platform.openai.com/docs/api-reference/embeddings (``float`` or
  ``base64`` little-endian float32, ``dimensions``; 3,072 for ``text-embedding-3-large``,
  else 1,536);
- Gemini ``generateContent`` / ``streamGenerateContent`` (``alt=sse``: one JSON
  ``GenerateContentResponse`` per ``data:`` event; without it a JSON array) and ``countTokens``,
  https://ai.google.dev/api/generate-content ; ``embedContent`` and ``batchEmbedContents``,
  https://ai.google.dev/api/embeddings (``outputDimensionality``; 3,072 for
  ``gemini-embedding-*``, else 768).

The reply text and ids are the same in every run (ids count the run's requests), so a program
that feeds replies or response ids back into later prompts sends the same bytes in each run.
An embedding is a unit vector drawn from a hash of its input, so the same text gets the same
vector in every run (a retrieval step picks the same documents each time) and a text equal to
another gets its vector; it carries no meaning.
Token counts are a size estimate (4 bytes a token), not a tokenizer's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Final

from promptcache.proxy.vendors import error_body

__all__ = ["REPLY_TEXT", "SERVED_ROUTES", "CannedResponse", "canned_response", "route_api"]

#: The text of every canned reply.
REPLY_TEXT: Final = "This is a canned reply from promptcache check."
_CREATED: Final = 1_764_489_600  # a fixed timestamp: the same bytes in every run

#: Mount -> the routes :func:`canned_response` answers on it (a Gemini action after any model
#: path), as the 404 of every other route on that mount lists them.
SERVED_ROUTES: Final[dict[str, tuple[str, ...]]] = {
    "anthropic": ("POST /v1/messages", "POST /v1/messages/count_tokens"),
    "openai": (
        "POST /v1/chat/completions",
        "POST /v1/responses",
        "POST /v1/completions",
        "POST /v1/embeddings",
        "GET /v1/models",
    ),
    "gemini": (
        "POST /v1beta/models/{model}:generateContent",
        "POST /v1beta/models/{model}:streamGenerateContent",
        "POST /v1beta/models/{model}:countTokens",
        "POST /v1beta/models/{model}:embedContent",
        "POST /v1beta/models/{model}:batchEmbedContents",
    ),
}


@dataclass(frozen=True)
class CannedResponse:
    """One answer: HTTP status, content type and body bytes."""

    status: int
    content_type: str
    body: bytes


def _json(payload: Any, status: int = 200) -> CannedResponse:
    return CannedResponse(status, "application/json", json.dumps(payload).encode())


def _sse(events: list[tuple[str | None, Any]]) -> CannedResponse:
    parts = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        parts.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return CannedResponse(200, "text/event-stream; charset=utf-8", "".join(parts).encode())


def _tokens(size: int) -> int:
    return max(1, size // 4)


def _anthropic(body: dict[str, Any], seq: int, size: int, stream: bool) -> CannedResponse:
    model = str(body.get("model", "claude"))
    msg_id = f"msg_check{seq:06d}"
    usage = {
        "input_tokens": _tokens(size),
        "output_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": REPLY_TEXT}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return _json(message)
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": REPLY_TEXT},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _openai_usage(size: int) -> dict[str, Any]:
    prompt = _tokens(size)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 10,
        "total_tokens": prompt + 10,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _openai_chat(body: dict[str, Any], seq: int, size: int, stream: bool) -> CannedResponse:
    model = str(body.get("model", "gpt"))
    base = {"id": f"chatcmpl-check{seq:06d}", "created": _CREATED, "model": model}
    if not stream:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": REPLY_TEXT, "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
        return _json(
            {**base, "object": "chat.completion", "choices": [choice], "usage": _openai_usage(size)}
        )
    chunk = {**base, "object": "chat.completion.chunk"}
    options = body.get("stream_options")
    with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    extra = {"usage": None} if with_usage else {}
    events: list[tuple[str | None, Any]] = [
        (
            None,
            {
                **chunk,
                **extra,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            },
        ),
        (
            None,
            {
                **chunk,
                **extra,
                "choices": [{"index": 0, "delta": {"content": REPLY_TEXT}, "finish_reason": None}],
            },
        ),
        (None, {**chunk, **extra, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]
    if with_usage:
        events.append((None, {**chunk, "choices": [], "usage": _openai_usage(size)}))
    events.append((None, "[DONE]"))
    return _sse(events)


def _openai_completions(body: dict[str, Any], seq: int, size: int, stream: bool) -> CannedResponse:
    model = str(body.get("model", "gpt"))
    base = {
        "id": f"cmpl-check{seq:06d}",
        "object": "text_completion",
        "created": _CREATED,
        "model": model,
    }
    choice = {"index": 0, "text": REPLY_TEXT, "finish_reason": "stop", "logprobs": None}
    if not stream:
        return _json({**base, "choices": [choice], "usage": _openai_usage(size)})
    return _sse([(None, {**base, "choices": [choice]}), (None, "[DONE]")])


def _responses(body: dict[str, Any], seq: int, size: int, stream: bool) -> CannedResponse:
    resp_id, item_id = f"resp_check{seq:06d}", f"msg_check{seq:06d}"
    part = {"type": "output_text", "text": REPLY_TEXT, "annotations": [], "logprobs": []}
    item = {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }
    prompt = _tokens(size)
    response = {
        "id": resp_id,
        "object": "response",
        "created_at": _CREATED,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": str(body.get("model", "gpt")),
        "output": [item],
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "metadata": {},
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + 10,
        },
    }
    if not stream:
        return _json(response)
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    ids = {"item_id": item_id, "output_index": 0, "content_index": 0}
    steps: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **ids, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **ids, "delta": REPLY_TEXT, "logprobs": []},
        {"type": "response.output_text.done", **ids, "text": REPLY_TEXT, "logprobs": []},
        {"type": "response.content_part.done", **ids, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]
    return _sse([(s["type"], {**s, "sequence_number": n}) for n, s in enumerate(steps)])


def _gemini(body: dict[str, Any], seq: int, size: int, stream: bool, sse: bool) -> CannedResponse:
    prompt = _tokens(size)
    payload = {
        "candidates": [
            {
                "content": {"parts": [{"text": REPLY_TEXT}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": 10,
            "totalTokenCount": prompt + 10,
        },
        "modelVersion": "gemini",
        "responseId": f"check{seq:06d}",
    }
    if not stream:
        return _json(payload)
    if sse:
        return _sse([(None, payload)])
    return _json([payload])


#: the most dimensions a request may ask an embedding to have here (the vendors' largest
#: models have 3,072)
_MAX_DIMENSIONS: Final = 16_384


def _dimensions(asked: Any, default: int) -> int:
    if isinstance(asked, int) and not isinstance(asked, bool) and 0 < asked <= _MAX_DIMENSIONS:
        return asked
    return default


def _vector(item: Any, size: int) -> list[float]:
    """A unit vector of ``size`` numbers drawn from a hash of ``item`` (a text, or a list of
    token ids): the same in every run and every process."""
    key = json.dumps(item, sort_keys=True, ensure_ascii=False).encode("utf-8")
    raw = struct.unpack(f"<{size}h", hashlib.shake_256(key).digest(2 * size))
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [round(v / norm, 6) for v in raw]


def _openai_embeddings(body: dict[str, Any], size: int) -> CannedResponse:
    model = str(body.get("model", "text-embedding-3-small"))
    given = body.get("input", "")
    if isinstance(given, list) and given and all(isinstance(t, int) for t in given):
        items: list[Any] = [given]  # one text as token ids
    elif isinstance(given, list):
        items = given
    else:
        items = [given]
    dims = _dimensions(body.get("dimensions"), 3072 if model == "text-embedding-3-large" else 1536)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, item in enumerate(items):
        vector: Any = _vector(item, dims)
        if as_base64:
            vector = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = _tokens(size)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return _json({"object": "list", "data": data, "model": model, "usage": usage})


def _gemini_embedding(model: str, request: Any) -> dict[str, Any]:
    request = request if isinstance(request, dict) else {}
    config = request.get("outputDimensionality")
    dims = _dimensions(config, 3072 if "gemini-embedding" in model else 768)
    return {"values": _vector(request.get("content"), dims)}


def route_api(vendor: str, method: str, path: str) -> str | None:
    """The wire format of a prompt-carrying route (``anthropic``, ``openai_chat``,
    ``openai_responses``, ``openai_completions``, ``gemini``), or None for any other route."""
    path = path.rstrip("/")
    if method != "POST":
        return None
    if vendor == "anthropic" and path == "/v1/messages":
        return "anthropic"
    if vendor == "openai":
        return {
            "/v1/chat/completions": "openai_chat",
            "/v1/responses": "openai_responses",
            "/v1/completions": "openai_completions",
        }.get(path)
    if vendor == "gemini" and path.rsplit(":", 1)[-1] in (
        "generateContent",
        "streamGenerateContent",
    ):
        return "gemini"
    return None


def canned_response(
    vendor: str, method: str, path: str, query: str, body: Any, seq: int, size: int
) -> tuple[str | None, CannedResponse]:
    """The API a request is for (None for routes carrying no prompt) and the answer to it.

    Args:
        vendor: the endpoint mount it came in on: ``anthropic``, ``openai`` or ``gemini``.
        method: ``GET`` or ``POST``.
        path: the vendor path, e.g. ``/v1/chat/completions``.
        query: the raw query string (Gemini streams as SSE when it holds ``alt=sse``).
        body: the parsed JSON body (a dict for prompt routes), or None.
        seq: the request's number within its run (gives ids).
        size: the body's size in bytes (gives the usage estimate).

    Unknown routes get a 404 in the vendor's own error shape.
    """
    data = body if isinstance(body, dict) else {}
    stream = bool(data.get("stream"))
    path = path.rstrip("/")
    if vendor == "anthropic" and method == "POST":
        if path == "/v1/messages":
            return "anthropic", _anthropic(data, seq, size, stream)
        if path == "/v1/messages/count_tokens":
            return None, _json({"input_tokens": _tokens(size)})
    if vendor == "openai":
        if method == "POST" and path == "/v1/chat/completions":
            return "openai_chat", _openai_chat(data, seq, size, stream)
        if method == "POST" and path == "/v1/responses":
            return "openai_responses", _responses(data, seq, size, stream)
        if method == "POST" and path == "/v1/completions":
            return "openai_completions", _openai_completions(data, seq, size, stream)
        if method == "POST" and path == "/v1/embeddings":
            return None, _openai_embeddings(data, size)
        if method == "GET" and path == "/v1/models":
            return None, _json({"object": "list", "data": []})
    if vendor == "gemini" and method == "POST" and ":" in path:
        action = path.rsplit(":", 1)[1]
        if action == "generateContent":
            return "gemini", _gemini(data, seq, size, False, False)
        if action == "streamGenerateContent":
            return "gemini", _gemini(data, seq, size, True, "alt=sse" in query)
        if action == "countTokens":
            return None, _json({"totalTokens": _tokens(size)})
        model = path.rsplit(":", 1)[0].rsplit("/", 1)[-1]
        if action == "embedContent":
            return None, _json({"embedding": _gemini_embedding(model, data)})
        if action == "batchEmbedContents":
            asked = data.get("requests")
            requests = asked if isinstance(asked, list) else []
            embeddings = [_gemini_embedding(model, r) for r in requests]
            return None, _json({"embeddings": embeddings})
    dialect = {"anthropic": "anthropic", "openai": "openai"}.get(vendor, "gemini")
    message = (
        f"promptcache check's capture endpoint does not serve {method} {path}: it answers "
        f"only {', '.join(SERVED_ROUTES.get(vendor, ()))} on this API's base URL with canned "
        "replies; run check with --forward to send every request to the real API, or leave "
        "this call out of the checked command"
    )
    return None, CannedResponse(404, "application/json", error_body(dialect, 404, message))  # type: ignore[arg-type]
