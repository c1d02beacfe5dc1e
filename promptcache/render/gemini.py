"""Render a ``PromptBuilder`` as the JSON body of a Gemini ``generateContent`` request.

Gemini 2.5+ caches implicitly from a per-model minimum prompt length
(https://ai.google.dev/gemini-api/docs/caching , checked 2026-11-30); there are no breakpoints.
The model is part of the URL (``models/{model}:generateContent``), not of the body.

Layout (REST field names, https://ai.google.dev/api/generate-content ):
``systemInstruction.parts`` holds one ``{"text": ...}`` part per frozen block, then per session
block; ``tools`` is one ``{"functionDeclarations": [...]}`` entry whose declarations carry the
JSON Schema in ``parametersJsonSchema``; ``contents`` holds the history (roles ``user`` and
``model``) and the dynamic blocks as parts of a final user turn (appended to the last user turn
when the history ends with one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptcache.prompt_types import RenderedRequest
from promptcache.render._common import automatic_cache_warnings, require_content

if TYPE_CHECKING:
    from promptcache.prompt import PromptBuilder


def render_gemini(builder: PromptBuilder) -> RenderedRequest:
    """The ``generateContent`` request body.

    Returns:
        ``RenderedRequest`` with ``contents`` and, when non-empty, ``systemInstruction`` and
        ``tools``; ``warnings`` notes a prompt below the model's implicit-caching minimum
        (none for a model missing from the minimum table, such as Gemini 2.5 Flash-Lite, whose
        minimum Google does not document).

    Raises:
        ConfigError: nothing to answer.
    """
    require_content(builder, "to_gemini")
    body: dict[str, Any] = {}
    system = [*builder.frozen_blocks, *builder.session_blocks]
    if system:
        body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
    if builder.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.input_schema}
            for t in builder.tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
    contents: list[dict[str, Any]] = [
        {"role": "user" if turn.role == "user" else "model", "parts": [{"text": turn.text}]}
        for turn in builder.history
    ]
    dynamic = [{"text": text} for text in builder.dynamic_blocks]
    if dynamic and contents and contents[-1]["role"] == "user":
        contents[-1]["parts"].extend(dynamic)
    elif dynamic:
        contents.append({"role": "user", "parts": dynamic})
    body["contents"] = contents
    warnings = automatic_cache_warnings(builder, "Gemini") if builder.model else []
    return RenderedRequest(body, warnings)
