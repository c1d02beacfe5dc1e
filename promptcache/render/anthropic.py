"""Render a ``PromptBuilder`` as Anthropic Messages API parameters with ``cache_control``.

Layout (https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked
2026-11-30): ``tools`` (tool definitions, keys sorted), ``system`` as a list of text blocks
(one per frozen item, then one per session item), ``messages`` (history as text-block lists,
then the dynamic content as a final user message). ``cache_control`` goes on the blocks chosen by
``PromptBuilder.plan_breakpoints("anthropic")``; 5m breakpoints are written as
``{"type": "ephemeral"}``, 1h ones as ``{"type": "ephemeral", "ttl": "1h"}``.

The dynamic content is always its own final user message, even after a user history message (the
API merges consecutive user turns): the history message then keeps the same bytes next turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptcache.prompt_types import RenderedRequest
from promptcache.render._common import (
    positive_int,
    require_content,
    require_model,
    within_lookback,
)

if TYPE_CHECKING:
    from promptcache.prompt import PromptBuilder


def cache_control(ttl: str) -> dict[str, str]:
    """The ``cache_control`` value for a breakpoint of ``ttl`` (``"5m"`` or ``"1h"``)."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def render_anthropic(builder: PromptBuilder, *, max_tokens: int) -> RenderedRequest:
    """Keyword arguments for ``anthropic.Anthropic().messages.create(**params)``.

    Args:
        builder: the prompt.
        max_tokens: the response limit, in tokens (required by the Messages API).

    Returns:
        ``RenderedRequest`` with keys ``model``, ``max_tokens`` and, when non-empty, ``tools``,
        ``system``, ``messages``; ``warnings`` lists skipped breakpoints.

    Raises:
        ConfigError: no model, nothing to answer, or a bad ``max_tokens``.
        BreakpointLimitError, BreakpointTTLOrderError: see ``promptcache.breakpoints``.
    """
    model = require_model(builder, "to_anthropic")
    require_content(builder, "to_anthropic")
    plan = builder.plan_breakpoints("anthropic")
    marks = {(bp.layer, bp.index): bp.ttl for bp in plan.kept}

    params: dict[str, Any] = {"model": model, "max_tokens": positive_int(max_tokens, "max_tokens")}
    tools = []
    for i, tool in enumerate(builder.tools):
        entry: dict[str, Any] = tool.anthropic_entry()
        if ("tools", i) in marks:
            entry["cache_control"] = cache_control(marks["tools", i])
        tools.append(entry)
    if tools:
        params["tools"] = tools

    system = []
    for j, text in enumerate((*builder.frozen_blocks, *builder.session_blocks)):
        block: dict[str, Any] = {"type": "text", "text": text}
        if ("system", j) in marks:
            block["cache_control"] = cache_control(marks["system", j])
        system.append(block)
    if system:
        params["system"] = system

    messages: list[dict[str, Any]] = []
    for k, turn in enumerate(builder.history):
        block = {"type": "text", "text": turn.text}
        if ("messages", k) in marks:
            block["cache_control"] = cache_control(marks["messages", k])
        messages.append({"role": turn.role, "content": [block]})
    if builder.dynamic_blocks:
        content = [{"type": "text", "text": text} for text in builder.dynamic_blocks]
        messages.append({"role": "user", "content": content})
    params["messages"] = messages
    return within_lookback(builder, params, "anthropic", plan)
