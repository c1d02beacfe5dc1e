"""Render a ``PromptBuilder`` as AWS Bedrock ``converse`` parameters with ``cachePoint`` blocks.

Layout (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html and the
Converse API reference, checked 2026-11-30): ``toolConfig.tools`` holds ``{"toolSpec": ...}``
entries, ``system`` a list of ``{"text": ...}`` blocks, ``messages`` content lists of
``{"text": ...}`` blocks. A breakpoint is a standalone ``{"cachePoint": {"type": "default"}}``
block placed right AFTER the block it closes (``"ttl": "1h"`` added for 1h breakpoints); at most
4, TTLs non-increasing along tools -> system -> messages (``PromptBuilder.plan_breakpoints``).

Converse requires user and assistant roles to alternate, so dynamic content after a user history
message is appended to that message's content instead of forming a new message. A history that
does not alternate, or starts with an assistant message, is a ``ConfigError`` here: Converse
answers it with a ValidationException ("A conversation must alternate between user and assistant
roles", "A conversation must start with a user message").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptcache.errors import ConfigError
from promptcache.prompt_types import RenderedRequest
from promptcache.render._common import (
    positive_int,
    require_content,
    require_model,
    within_lookback,
)

if TYPE_CHECKING:
    from promptcache.prompt import PromptBuilder


def cache_point(ttl: str) -> dict[str, Any]:
    """A ``cachePoint`` block for a breakpoint of ``ttl`` (``"5m"`` or ``"1h"``)."""
    spec = {"type": "default"} if ttl == "5m" else {"type": "default", "ttl": ttl}
    return {"cachePoint": spec}


def require_alternation(builder: PromptBuilder) -> None:
    """Raise ``ConfigError`` unless the history starts with a user message and alternates."""
    roles = [turn.role for turn in builder.history]
    if roles and roles[0] != "user":
        raise ConfigError(
            "to_bedrock_converse(): the history starts with an assistant message, and Converse "
            "requires a conversation to start with a user message (its ValidationException: "
            "'A conversation must start with a user message'): add_user() before the first "
            "add_assistant()"
        )
    for k in range(1, len(roles)):
        if roles[k] == roles[k - 1]:
            raise ConfigError(
                f"to_bedrock_converse(): history messages {k - 1} and {k} are both {roles[k]} "
                "messages, and Converse requires user and assistant messages to alternate (its "
                "ValidationException: 'A conversation must alternate between user and assistant "
                f"roles'): join the two texts in one add_{roles[k]}() call"
            )


def render_bedrock_converse(builder: PromptBuilder, *, max_tokens: int) -> RenderedRequest:
    """Keyword arguments for ``boto3.client("bedrock-runtime").converse(**params)``.

    Returns:
        ``RenderedRequest`` with ``modelId``, ``messages``, ``inferenceConfig.maxTokens`` and,
        when non-empty, ``system`` and ``toolConfig``.

    Raises:
        ConfigError: no model, nothing to answer, a bad ``max_tokens``, or a history whose
            roles do not alternate from a user message on.
        BreakpointLimitError, BreakpointTTLOrderError: see ``promptcache.breakpoints``.
    """
    model = require_model(builder, "to_bedrock_converse")
    require_content(builder, "to_bedrock_converse")
    require_alternation(builder)
    plan = builder.plan_breakpoints("bedrock")
    marks = {(bp.layer, bp.index): bp.ttl for bp in plan.kept}
    params: dict[str, Any] = {"modelId": model}

    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(builder.tools):
        spec = {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": {"json": tool.input_schema},
        }
        tools.append({"toolSpec": spec})
        if ("tools", i) in marks:
            tools.append(cache_point(marks["tools", i]))
    if tools:
        params["toolConfig"] = {"tools": tools}

    system: list[dict[str, Any]] = []
    for j, text in enumerate((*builder.frozen_blocks, *builder.session_blocks)):
        system.append({"text": text})
        if ("system", j) in marks:
            system.append(cache_point(marks["system", j]))
    if system:
        params["system"] = system

    messages: list[dict[str, Any]] = []
    for k, turn in enumerate(builder.history):
        content: list[dict[str, Any]] = [{"text": turn.text}]
        if ("messages", k) in marks:
            content.append(cache_point(marks["messages", k]))
        messages.append({"role": turn.role, "content": content})
    dynamic = [{"text": text} for text in builder.dynamic_blocks]
    if dynamic and messages and messages[-1]["role"] == "user":
        messages[-1]["content"].extend(dynamic)
    elif dynamic:
        messages.append({"role": "user", "content": dynamic})
    params["messages"] = messages
    params["inferenceConfig"] = {"maxTokens": positive_int(max_tokens, "max_tokens")}
    return within_lookback(builder, params, "bedrock_converse", plan)
