"""Split a vendor request body into prefix segments, in the order the vendor caches them.

A segment is one tool definition, one system block or one message. ``split_request`` returns the
segments of a body with the cache markers removed (``cache_control`` keys, Bedrock ``cachePoint``
blocks, OpenAI ``prompt_cache_breakpoint`` keys) and reports those markers separately as
breakpoints: moving a breakpoint changes where the vendor writes, not the cached content.

Segment order per API (the cache key is an exact prefix in this order):

=================== ===========================================================================
``anthropic``        ``tools[i]``, ``system`` or ``system[i]``, ``messages[i]``; a top-level
                     ``cache_control`` (automatic caching) is a breakpoint on the last segment.
                     https://platform.claude.com/docs/en/build-with-claude/prompt-caching
``openai_chat``      ``tools[i]``, ``response_format``, ``messages[i]`` (system/developer
                     messages have kind ``system``).
                     https://developers.openai.com/api/docs/guides/prompt-caching
``openai_responses`` ``tools[i]``, ``text.format``, ``prompt``, ``instructions``,
                     ``previous_response_id``, ``input`` or ``input[i]``.
``gemini``           ``cachedContent``, ``tools[i]``, ``toolConfig``, ``systemInstruction``
                     (or ``system_instruction``), ``contents[i]``. Gemini does not document its
                     internal order; this is promptcache's convention (tools before system, as
                     Anthropic). https://ai.google.dev/gemini-api/docs/caching
``bedrock_converse`` ``toolConfig.tools[i]``, ``system[i]``, ``messages[i]``; ``cachePoint``
                     blocks are breakpoints.
                     https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
``openai_completions`` ``prompt`` (one segment whatever its type).
=================== ===========================================================================

All URLs checked 2026-11-30.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from promptcache.errors import RequestShapeError

__all__ = [
    "APIS",
    "PROMPT_FIELDS",
    "RawBreakpoint",
    "RawSegment",
    "SegmentKind",
    "detect_api",
    "ignored_prompt_fields",
    "split_request",
]

SegmentKind = Literal["tools", "system", "messages"]

#: Every API name ``split_request`` and ``fingerprint_request`` accept.
APIS: tuple[str, ...] = (
    "anthropic",
    "openai_chat",
    "openai_responses",
    "gemini",
    "bedrock_converse",
    "openai_completions",
)

_SYSTEM_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class RawSegment:
    """One prefix segment before hashing: its path, kind and value with cache markers removed."""

    path: str
    kind: SegmentKind
    value: Any


@dataclass(frozen=True)
class RawBreakpoint:
    """A cache marker found in the body.

    Attributes:
        path: where the marker sits (``system[1]``, ``messages[3].content[0]``, ``cache_control``).
        ttl: ``"5m"`` or ``"1h"`` as written (vendor default ``"5m"`` when absent), or None where
            the vendor fixes the TTL (OpenAI ``prompt_cache_breakpoint``).
        segment_index: index of the last segment whose content the cached prefix includes
            (-1 when the marker precedes every segment).
    """

    path: str
    ttl: str | None
    segment_index: int


class _Splitter:
    """Collects segments and breakpoints while stripping markers out of segment values."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.segments: list[RawSegment] = []
        self.breakpoints: list[RawBreakpoint] = []

    def add(self, path: str, kind: SegmentKind, value: Any) -> None:
        index = len(self.segments)
        self.segments.append(RawSegment(path, kind, self._strip(value, path, index)))

    def add_list(
        self,
        path: str,
        kind: SegmentKind,
        items: Any,
        *,
        role_kinds: bool = False,
        or_string: bool = False,
    ) -> None:
        """``or_string``: the API also takes a plain string there (the caller adds that one)."""
        if items is None:
            return
        if not isinstance(items, list):
            expected = "a string or a list" if or_string else "a list"
            raise RequestShapeError(
                f"{self.api} request: `{path}` must be {expected}, got {type(items).__name__}"
            )
        for i, item in enumerate(items):
            if _is_cache_point(item):
                self.marker(f"{path}[{i}]", item["cachePoint"])
                continue
            item_kind = kind
            if (
                role_kinds
                and (type(item) is dict or isinstance(item, Mapping))
                # a role that is not a string (a list, an object: the client's mistake, which
                # the vendor answers) is no system role, and cannot be looked up in a set
                and type(role := item.get("role")) is str
                and role in _SYSTEM_ROLES
            ):
                item_kind = "system"
            self.add(f"{path}[{i}]", item_kind, item)

    def marker(self, path: str, spec: Any, *, index: int | None = None) -> None:
        ttl = spec.get("ttl", "5m") if isinstance(spec, Mapping) else "5m"
        at = len(self.segments) - 1 if index is None else index
        self.breakpoints.append(RawBreakpoint(path, str(ttl), at))

    def _strip(self, value: Any, path: str, index: int) -> Any:
        # Leaves (the exact scalar types json.loads gives) are kept as they are without a call
        # or a path string: they hold no marker, and most of a body is leaves.
        # ``type(...) is dict`` first: isinstance with an ABC (Mapping) is a Python-level call.
        if type(value) is dict or isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if key == "cache_control":
                    self.marker(path, item, index=index)
                elif key == "prompt_cache_breakpoint":
                    self.breakpoints.append(RawBreakpoint(path, None, index))
                elif type(item) in _LEAF_TYPES:
                    out[key] = item
                else:
                    out[key] = self._strip(item, f"{path}.{key}", index)
            return out
        if isinstance(value, (list, tuple)):
            kept = []
            for i, item in enumerate(value):
                if type(item) in _LEAF_TYPES:
                    kept.append(item)
                elif _is_cache_point(item):
                    self.marker(f"{path}[{i}]", item["cachePoint"], index=index)
                else:
                    kept.append(self._strip(item, f"{path}[{i}]", index))
            return kept
        return value


#: Exact types ``_Splitter._strip`` returns unchanged without descending into them.
_LEAF_TYPES: frozenset[type] = frozenset({str, int, float, bool, type(None)})

#: Keys that make a message more than plain text for ``_Splitter`` (a marker, or a block).
_MARKER_KEYS = ("cache_control", "prompt_cache_breakpoint", "cachePoint")


def _simple_chat(messages: Any) -> list[RawSegment] | None:
    """The segments ``_Splitter`` makes of a Chat Completions ``messages`` list whose every
    message is a plain ``dict`` of scalar values (``{"role": "user", "content": "..."}``) with no
    cache marker, without walking each message: a copy of it, its ``messages[i]`` path, and
    kind ``system`` for a system or developer role. None for any other list (an empty one
    included), which then takes the general path."""
    if type(messages) is not list or not messages:
        return None
    out = []
    leaves = _LEAF_TYPES
    for i, item in enumerate(messages):
        if type(item) is not dict:
            return None
        for value in item.values():
            if type(value) not in leaves:
                return None
        for key in _MARKER_KEYS:
            if key in item:
                return None
        kind: SegmentKind = "system" if item.get("role") in _SYSTEM_ROLES else "messages"
        out.append(RawSegment(f"messages[{i}]", kind, dict(item)))
    return out


def _is_cache_point(item: Any) -> bool:
    return (
        (type(item) is dict or isinstance(item, Mapping))
        and "cachePoint" in item
        and len(item) == 1
    )


#: The top-level fields ``split_request`` reads for each API (what the prefix is made of).
PROMPT_FIELDS: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"tools", "system", "messages", "cache_control"}),
    "openai_chat": frozenset({"tools", "response_format", "messages"}),
    "openai_responses": frozenset(
        {"tools", "text", "prompt", "instructions", "previous_response_id", "input"}
    ),
    "gemini": frozenset(
        {
            "cachedContent",
            "cached_content",
            "tools",
            "toolConfig",
            "tool_config",
            "systemInstruction",
            "system_instruction",
            "contents",
        }
    ),
    "bedrock_converse": frozenset({"toolConfig", "system", "messages"}),
    "openai_completions": frozenset({"prompt"}),
}


def ignored_prompt_fields(body: Mapping[str, Any], api: str) -> list[str]:
    """Top-level fields of ``body`` that some API puts in the prompt prefix but ``api`` does not
    read, sorted: a ``system`` in a body hashed as ``openai_chat`` is left out of every hash."""
    every = frozenset().union(*PROMPT_FIELDS.values())
    return sorted(k for k in body if k in every and k not in PROMPT_FIELDS.get(api, every))


def split_request(
    body: Mapping[str, Any], api: str
) -> tuple[list[RawSegment], list[RawBreakpoint]]:
    """Return ``(segments, breakpoints)`` of a request body, segments in prefix order.

    Args:
        body: the JSON request body as a mapping (for Bedrock, the ``converse`` keyword arguments).
        api: one of ``APIS``.

    Raises:
        RequestShapeError: ``api`` is unknown, a segment container has the wrong type, or the body
            holds none of the API's prompt fields (a hint names the likely ``api``).
    """
    if api not in APIS:
        raise RequestShapeError(f"unknown api {api!r}; use one of: {', '.join(APIS)}")
    if not isinstance(body, Mapping):
        raise RequestShapeError(f"a request body must be a JSON object, got {type(body).__name__}")
    if api == "openai_chat" and "tools" not in body and "response_format" not in body:
        simple = _simple_chat(body.get("messages"))
        if simple is not None:
            return simple, []
    s = _Splitter(api)
    if api == "anthropic":
        s.add_list("tools", "tools", body.get("tools"))
        system = body.get("system")
        if isinstance(system, str):
            s.add("system", "system", system)
        else:
            s.add_list("system", "system", system, or_string=True)
        s.add_list("messages", "messages", body.get("messages"))
        if "cache_control" in body:
            s.marker("cache_control", body["cache_control"])
    elif api == "openai_chat":
        s.add_list("tools", "tools", body.get("tools"))
        if "response_format" in body:
            s.add("response_format", "tools", body["response_format"])
        s.add_list("messages", "messages", body.get("messages"), role_kinds=True)
    elif api == "openai_responses":
        s.add_list("tools", "tools", body.get("tools"))
        text = body.get("text")
        if isinstance(text, Mapping) and "format" in text:
            s.add("text.format", "tools", text["format"])
        for key in ("prompt", "instructions"):
            if body.get(key) is not None:
                s.add(key, "system", body[key])
        if body.get("previous_response_id") is not None:
            s.add("previous_response_id", "messages", body["previous_response_id"])
        items = body.get("input")
        if isinstance(items, str):
            s.add("input", "messages", items)
        else:
            s.add_list("input", "messages", items, role_kinds=True, or_string=True)
    elif api == "gemini":
        for key in ("cachedContent", "cached_content"):
            if key in body:
                s.add(key, "system", body[key])
        s.add_list("tools", "tools", body.get("tools"))
        for key in ("toolConfig", "tool_config"):
            if key in body:
                s.add(key, "tools", body[key])
        for key in ("systemInstruction", "system_instruction"):
            if key in body:
                s.add(key, "system", body[key])
        s.add_list("contents", "messages", body.get("contents"))
    elif api == "bedrock_converse":
        _refuse_foreign_markers(body)
        tool_config = body.get("toolConfig")
        if tool_config is not None:
            if not isinstance(tool_config, Mapping):
                raise RequestShapeError("bedrock_converse request: `toolConfig` must be an object")
            s.add_list("toolConfig.tools", "tools", tool_config.get("tools"))
        s.add_list("system", "system", body.get("system"))
        s.add_list("messages", "messages", body.get("messages"))
    elif "prompt" in body:  # openai_completions
        s.add("prompt", "messages", body["prompt"])
    if not s.segments and not s.breakpoints:
        guess = _guess_api(body)
        hint = (
            f" (it looks like {guess}: pass api={guess!r}, or --api {guess} on the command line)"
            if guess and guess != api and _has_content(body, guess)
            else ""
        )
        fields = sorted(PROMPT_FIELDS[api] - {"cache_control"})
        present = sorted(k for k in fields if k in body)
        state = (
            f"{', '.join(present)} {'is' if len(present) == 1 else 'are'} empty"
            if present
            else "none is present"
        )
        raise RequestShapeError(
            f"found no prompt content for api {api!r}: of its prompt fields "
            f"({', '.join(fields)}), {state}{hint or _as_hint(_response_hint(body))}"
        )
    return s.segments, s.breakpoints


def _as_hint(text: str) -> str:
    return f"; this is {text}" if text else ""


def _refuse_foreign_markers(body: Mapping[str, Any]) -> None:
    """A Converse block has no ``cache_control`` (Converse marks a cache point with a
    ``{"cachePoint": ...}`` block) and ``system`` is no string (a list of blocks): a body with
    either was written for another API, and reading it as Converse would mark it wrongly.

    Raises:
        RequestShapeError: naming the fields and the API the body looks like.
    """
    # a top-level cache_control is left out of the hashes with a warning, like every other
    # field of another API (`ignored_prompt_fields`)
    found = ["`system` as a string"] if isinstance(body.get("system"), str) else []
    for key in ("system", "messages"):
        items = body.get(key)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if isinstance(item, Mapping) and "cache_control" in item:
                found.append(f"`{key}[{i}].cache_control`")
            content = item.get("content") if isinstance(item, Mapping) else None
            for j, block in enumerate(content if isinstance(content, list) else ()):
                if isinstance(block, Mapping) and "cache_control" in block:
                    found.append(f"`{key}[{i}].content[{j}].cache_control`")
    if not found:
        return
    guess = _guess_api(body)
    hint = (
        f"; it looks like {guess}: pass api={guess!r}, or --api {guess} on the command line"
        if guess and guess != "bedrock_converse" and _has_content(body, guess)
        else ""
    )
    raise RequestShapeError(
        f"bedrock_converse request with {', '.join(found)}, which Converse does not accept (it "
        "takes `system` as a list of blocks and marks a cache point with a "
        f'{{"cachePoint": {{"type": "default"}}}} block){hint}'
    )


def _has_content(body: Mapping[str, Any], api: str) -> bool:
    """Whether ``body`` read as ``api`` gives any segment (a hint must lead somewhere)."""
    try:
        segments, breakpoints = split_request(body, api)
    except RequestShapeError:
        return False
    return bool(segments or breakpoints)


def detect_api(body: Mapping[str, Any]) -> str:
    """Guess which vendor API a request body is for, from its field names and block shapes.

    Ambiguous bodies (only ``model`` and ``messages`` of ``{"role", "content": str}``) are
    reported as ``openai_chat``; for those every API gives the same segments and hashes.

    Raises:
        RequestShapeError: ``body`` is not a mapping or matches no known API; pass ``api``
            explicitly.
    """
    if not isinstance(body, Mapping):
        raise RequestShapeError(f"a request body must be a JSON object, got {type(body).__name__}")
    guess = _guess_api(body)
    if guess is None:
        response = _response_hint(body)
        if response:
            raise RequestShapeError(f"this is {response}")
        raise RequestShapeError(
            "cannot tell which API this request body is for (no messages, input, contents or "
            f"prompt field; keys: {', '.join(sorted(map(str, body))) or 'none'}); pass the API "
            f"explicitly (api=... or --api), one of: {', '.join(APIS)}"
        )
    return guess


#: Top-level fields of a vendor's response body that no request body has.
_RESPONSE_FIELDS: Final = ("choices", "candidates", "usage", "usageMetadata", "stop_reason")


def _response_hint(body: Mapping[str, Any]) -> str:
    """``"a response body (it has ...) ..."`` when ``body`` is a vendor's response (an answer,
    with its usage), which holds no prompt to fingerprint; ``""`` otherwise."""
    found = [key for key in _RESPONSE_FIELDS if key in body]
    if not found:
        return ""
    fields = ", ".join(f"`{key}`" for key in found)
    return (
        f"a response body (it has {fields}), not a request: it holds the answer, not the prompt; "
        "fingerprint the request body that was sent (its messages, system, tools), and price a "
        "response with `promptcache cost` (promptcache.cost)"
    )


def _guess_api(body: Mapping[str, Any]) -> str | None:
    keys = set(body)
    if keys & {"contents", "systemInstruction", "system_instruction", "generationConfig"}:
        return "gemini"
    if keys & {"modelId", "toolConfig", "inferenceConfig"} or _has_block(body, _bedrock_block):
        return "bedrock_converse"
    if keys & {"input", "instructions", "previous_response_id"}:
        return "openai_responses"
    if "prompt" in keys and "messages" not in keys:
        return "openai_completions"
    if "messages" not in keys and "system" not in keys:
        return None
    if "system" in keys or "cache_control" in keys or _has_block(body, _anthropic_block):
        return "anthropic"
    return "openai_chat"


def _has_block(body: Mapping[str, Any], test: Any) -> bool:
    for key in ("messages", "system", "tools"):
        items = body.get(key)
        if not isinstance(items, list):
            continue
        for item in items:
            if test(item):
                return True
            content = item.get("content") if isinstance(item, Mapping) else None
            if isinstance(content, list) and any(test(block) for block in content):
                return True
    return False


def _anthropic_block(block: Any) -> bool:
    return isinstance(block, Mapping) and (
        "cache_control" in block
        or "input_schema" in block
        or block.get("type") in {"tool_use", "tool_result", "thinking", "document"}
        or (block.get("type") == "image" and "source" in block)
    )


def _bedrock_block(block: Any) -> bool:
    # Converse content blocks are single-key objects without "type": {"text": ...},
    # {"cachePoint": ...}, {"toolUse": ...}, {"toolSpec": ...}.
    return (
        isinstance(block, Mapping)
        and "type" not in block
        and len(block) == 1
        and next(iter(block))
        in {"text", "cachePoint", "toolUse", "toolResult", "toolSpec", "image"}
    )
