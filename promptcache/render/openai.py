"""Render a ``PromptBuilder`` for OpenAI Chat Completions and the Responses API.

OpenAI caches automatically: an exact prefix of at least 1024 tokens, routed by a hash of about
the first 256 tokens combined with ``prompt_cache_key``
(https://developers.openai.com/api/docs/guides/prompt-caching , checked 2026-11-30). So:

* no breakpoints are rendered; the layer order alone keeps the prefix stable;
* ``prompt_cache_key`` is the builder's ``cache_key`` (a stable tenant or conversation id),
  never invented; asking for one without a key raises ``ConfigError``;
* ``prompt_cache_retention`` (``"in_memory"`` or ``"24h"``) is passed when given.

Chat layout: tools as ``{"type": "function", "function": {...}}``; one system message with the
frozen blocks joined by a blank line; one with the session blocks; the history; the dynamic
blocks as a final user message. Responses layout: frozen text in ``instructions``, session as a
``developer`` input message, then history and the dynamic user message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptcache.errors import ConfigError
from promptcache.prompt_types import RenderedRequest
from promptcache.render._common import (
    automatic_cache_warnings,
    cache_key_param,
    positive_int,
    require_content,
    require_model,
    retention_param,
)

if TYPE_CHECKING:
    from promptcache.prompt import PromptBuilder

_JOIN = "\n\n"


def render_openai_chat(
    builder: PromptBuilder,
    *,
    include_cache_key: bool,
    retention: str | None,
    system_role: str,
    max_completion_tokens: int | None,
) -> RenderedRequest:
    """Keyword arguments for ``openai.OpenAI().chat.completions.create(**params)``.

    Args:
        builder: the prompt.
        include_cache_key: send ``prompt_cache_key`` (needs ``PromptBuilder(cache_key=...)``).
        retention: ``"in_memory"``, ``"24h"`` or None (vendor default).
        system_role: ``"system"`` or ``"developer"`` for the frozen and session messages.
        max_completion_tokens: response limit in tokens, or None to leave it out.

    Raises:
        ConfigError: no model, nothing to answer, no cache key when one is asked for, or a bad
            option value.
    """
    model = require_model(builder, "to_openai_chat")
    require_content(builder, "to_openai_chat")
    if system_role not in ("system", "developer"):
        raise ConfigError(f"system_role must be 'system' or 'developer', got {system_role!r}")
    params: dict[str, Any] = {"model": model}
    if builder.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in builder.tools
        ]
    messages: list[dict[str, Any]] = []
    if builder.frozen_blocks:
        messages.append({"role": system_role, "content": _JOIN.join(builder.frozen_blocks)})
    if builder.session_blocks:
        messages.append({"role": system_role, "content": _JOIN.join(builder.session_blocks)})
    messages += [{"role": turn.role, "content": turn.text} for turn in builder.history]
    if builder.dynamic_blocks:
        messages.append({"role": "user", "content": _JOIN.join(builder.dynamic_blocks)})
    params["messages"] = messages
    if max_completion_tokens is not None:
        params["max_completion_tokens"] = positive_int(
            max_completion_tokens, "max_completion_tokens"
        )
    params |= cache_key_param(builder, include_cache_key, "to_openai_chat")
    params |= retention_param(retention)
    return RenderedRequest(params, automatic_cache_warnings(builder, "OpenAI"))


def render_openai_responses(
    builder: PromptBuilder,
    *,
    include_cache_key: bool,
    retention: str | None,
    max_output_tokens: int | None,
) -> RenderedRequest:
    """Keyword arguments for ``openai.OpenAI().responses.create(**params)``.

    Raises:
        ConfigError: as ``render_openai_chat``.
    """
    model = require_model(builder, "to_openai_responses")
    require_content(builder, "to_openai_responses")
    params: dict[str, Any] = {"model": model}
    if builder.tools:
        params["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            }
            for t in builder.tools
        ]
    if builder.frozen_blocks:
        params["instructions"] = _JOIN.join(builder.frozen_blocks)
    items: list[dict[str, Any]] = []
    if builder.session_blocks:
        items.append({"role": "developer", "content": _JOIN.join(builder.session_blocks)})
    items += [{"role": turn.role, "content": turn.text} for turn in builder.history]
    if builder.dynamic_blocks:
        items.append({"role": "user", "content": _JOIN.join(builder.dynamic_blocks)})
    params["input"] = items
    if max_output_tokens is not None:
        params["max_output_tokens"] = positive_int(max_output_tokens, "max_output_tokens")
    params |= cache_key_param(builder, include_cache_key, "to_openai_responses")
    params |= retention_param(retention)
    return RenderedRequest(params, automatic_cache_warnings(builder, "OpenAI"))
