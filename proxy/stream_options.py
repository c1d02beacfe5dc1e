"""OpenAI streams without usage: ask for it upstream, hide the answer from the client.

Chat Completions and (legacy) Completions streams report usage only when the request sets
``stream_options: {"include_usage": true}``; the usage then arrives in one extra last chunk with
``choices: []`` before ``data: [DONE]``, and every other chunk carries ``"usage": null``
(https://platform.openai.com/docs/api-reference/chat/create#chat-create-stream_options and
https://platform.openai.com/docs/api-reference/completions/create#completions-create-stream_options,
checked 2026-11-30; the official ``openai`` client sends the same ``stream_options`` object on
both). So that every request is recorded with its usage, the proxy sets the flag on streams that
lack it and drops that one extra chunk before the client sees it.

The edit is a splice into the original bytes, never a re-serialisation: everything except the
inserted or replaced JSON member stays byte-identical (messages, tools, key order, whitespace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from . import json_decode
from .sse import ServerSentEvent

__all__ = [
    "INJECTABLE_APIS",
    "drop_injected_usage_chunk",
    "inject_include_usage",
    "is_injected_usage_chunk",
    "needs_include_usage",
]

#: Wire formats (SDK names) whose streams get ``include_usage`` added when they lack it.
INJECTABLE_APIS = frozenset({"openai_chat", "openai_completions"})

_DECODER = json.JSONDecoder()
#: ``"choices": []`` with any JSON whitespace: only an event containing it can be the usage chunk.
_EMPTY_CHOICES = re.compile(r'"choices"\s*:\s*\[\s*\]')
_WHITESPACE = " \t\n\r"


def needs_include_usage(body: dict[str, Any]) -> bool:
    """True for a streaming chat request that did not ask for usage (and could).

    ``include_usage`` set to anything but a boolean or null (``"yes"``, ``1``) is the client's
    mistake, which the upstream answers: overwriting it with ``true`` would turn a request the
    upstream refuses into one it serves."""
    if body.get("stream") is not True:
        return False
    options = body.get("stream_options")
    if options is None:
        return True
    if not isinstance(options, dict):
        return False
    flag = options.get("include_usage")
    return flag is None or flag is False


def is_injected_usage_chunk(chunk: dict[str, Any]) -> bool:
    """True for the extra usage-only chunk (``choices: []`` and a usage object)."""
    return chunk.get("choices") == [] and isinstance(chunk.get("usage"), dict)


def drop_injected_usage_chunk(
    events: Sequence[ServerSentEvent],
) -> tuple[bytes, dict[int, Any]]:
    """The bytes of ``events`` to forward to the client, without the injected usage chunk.

    Only an event whose data contains ``"choices": []`` is parsed here (the usage chunk is the
    one chunk with empty choices); every other event is passed through unparsed, so the relay
    can send it before spending time on its JSON. (A usage chunk spelling the key with JSON
    escapes, ``"\\u0063hoices"``, would not be recognised and would reach the client.)

    Returns:
        ``(raw bytes of the kept events, {event index: parsed JSON}``) for the events parsed
        here, so the caller need not parse them again.
    """
    kept: list[bytes] = []
    parsed: dict[int, Any] = {}
    for index, event in enumerate(events):
        if event.data.startswith("{") and _EMPTY_CHOICES.search(event.data):
            try:
                payload = json_decode.loads(event.data)
            except ValueError:
                payload = None
            parsed[index] = payload
            if isinstance(payload, dict) and is_injected_usage_chunk(payload):
                continue
        kept.append(event.raw)
    return b"".join(kept), parsed


def inject_include_usage(raw: bytes, body: dict[str, Any]) -> bytes | None:
    """``raw`` with ``stream_options.include_usage`` set to true, or ``None`` if it cannot be.

    Args:
        raw: the request body exactly as the client sent it (UTF-8 JSON object).
        body: the same body, parsed (to know which case applies without scanning).

    Returns:
        The edited bytes, identical to ``raw`` outside the one inserted or replaced member; or
        ``None`` when the body is not UTF-8 or ``stream_options`` is neither an object nor null
        (the request then goes out unchanged and nothing is stripped).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    top = _skip(text, 0)
    if "stream_options" not in body:
        return _insert_first(text, top, '"stream_options":{"include_usage":true}').encode()
    members = _members(text, top)
    _, value_start, value_end = members["stream_options"]
    options = body["stream_options"]
    if options is None:
        edited = text[:value_start] + '{"include_usage":true}' + text[value_end:]
    elif isinstance(options, dict):
        inner = _members(text, value_start)
        if "include_usage" in inner:
            _, start, end = inner["include_usage"]
            edited = text[:start] + "true" + text[end:]
        else:
            edited = _insert_first(text, value_start, '"include_usage":true')
    else:
        return None
    return edited.encode()


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _insert_first(text: str, brace: int, member: str) -> str:
    """Insert ``member`` as the first member of the object whose ``{`` is at ``brace``."""
    after = _skip(text, brace + 1)
    separator = "" if text[after] == "}" else ","
    return text[: brace + 1] + member + separator + text[brace + 1 :]


def _members(text: str, brace: int) -> dict[str, tuple[int, int, int]]:
    """Spans of the members of the JSON object at ``brace``: key -> (key, value start, value end).

    ``text`` is known to be valid JSON (it was parsed already); the last duplicate key wins, as
    in ``json.loads``.
    """
    members: dict[str, tuple[int, int, int]] = {}
    i = _skip(text, brace + 1)
    if text[i] == "}":
        return members
    while True:
        key, after_key = _DECODER.raw_decode(text, i)
        value_start = _skip(text, _skip(text, after_key) + 1)  # past the colon
        _, value_end = _DECODER.raw_decode(text, value_start)
        members[key] = (i, value_start, value_end)
        i = _skip(text, value_end)
        if text[i] == "}":
            return members
        i = _skip(text, i + 1)  # past the comma
