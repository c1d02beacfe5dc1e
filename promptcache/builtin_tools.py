"""Input tokens the Anthropic API adds for its own (built-in) tools.

A request names an Anthropic-defined tool in a few bytes (``{"type": "computer_20250124",
"name": "computer", ...}``) and the API expands it into a full tool definition, which is billed
as input and sits in the cached prefix (tools come first). Counting only the request's JSON
undercounts such a prefix by hundreds of tokens per tool, so a prefix that the API caches would
be called below the model's minimum cacheable length.

Counts (tokens per tool, added to the input whatever the model), from Anthropic's tool pages,
checked 2026-12-06:

* computer use, https://platform.claude.com/docs/en/agents-and-tools/tool-use/computer-use-tool :
  735 tokens for ``computer_20250124`` and later versions, 683 for ``computer_20241022``;
* text editor, https://platform.claude.com/docs/en/agents-and-tools/tool-use/text-editor-tool :
  700 tokens (``text_editor_*`` versions);
* bash, https://platform.claude.com/docs/en/agents-and-tools/tool-use/bash-tool : 245 tokens
  (``bash_*`` versions).

The pages also list a tool-use system prompt that the API adds once per request; it is not
counted here (it precedes the tools, and the pages give it per model, not per tool).

This one table is used by ``promptcache check`` (PC008's prefix sizes), by request fingerprints
(``Segment.num_tokens`` and ``approx_prefix_tokens`` of an Anthropic request, so the proxy's
break explainer and its ``below_minimum`` test count them) and by the SDK's breakpoint minimum
checks (``PromptBuilder.plan_breakpoints``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

#: ``(pattern over the tool's versioned type, tokens added)``, first full match wins.
BUILTIN_TOOL_TOKENS: Final[tuple[tuple[re.Pattern[str], int], ...]] = (
    (re.compile(r"computer_20241022"), 683),
    (re.compile(r"computer_\d{8}"), 735),
    (re.compile(r"text_editor_\d{8}"), 700),
    (re.compile(r"bash_\d{8}"), 245),
)


def builtin_tool_tokens(tool: Mapping[str, Any] | str | None) -> int:
    """Tokens the Anthropic API adds for one tool, by its ``type``.

    Args:
        tool: a tool entry of a Messages API request (a mapping with ``"type"``) or the type
            string itself (``"computer_20250124"``).

    Returns:
        Tokens (see :data:`BUILTIN_TOOL_TOKENS`); 0 for a tool the request defines itself (no
        ``type``, ``"custom"``) or an Anthropic tool with no documented count (web search).
    """
    kind = tool.get("type") if isinstance(tool, Mapping) else tool
    if not isinstance(kind, str):
        return 0
    return next((n for pattern, n in BUILTIN_TOOL_TOKENS if pattern.fullmatch(kind)), 0)
