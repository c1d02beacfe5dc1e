"""A computer-use request through a live proxy: the prefix size the log keeps for it counts
the definitions the Anthropic API adds for its own tools (computer use, text editor, bash).

The request names each of those tools in a few bytes; the API expands them into 735 + 700 + 245
tokens of definitions before the system prompt (``promptcache.builtin_tools``). The log's
``approx_prefix_tokens`` (the report's prefix size for a family nothing was cached for, the
break explainer's estimate where the upstream gives no input count, the routing tokens) is
checked against a count made here: the documented numbers plus the ``cl100k_base`` count of
the request's own text. The official ``anthropic`` client, a proxy under uvicorn on 127.0.0.1
in front of the mock upstream (tests/proxy/upstreams.py), a real SQLite log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
from proxy_support import RunningProxy

from promptcache.tokens import count_tokens

SYSTEM_TEXT = "You operate a Linux desktop for the Acme support team. Be careful. " * 40
QUESTION = "Open the order page of order 17."
TOOLS: list[dict[str, Any]] = [
    {"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
     "display_height_px": 768, "display_number": 1},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {"type": "bash_20250124", "name": "bash"},
]  # fmt: skip
#: Anthropic's tool pages (computer use, text editor, bash; checked 2026-12-06).
DOCUMENTED = 735 + 700 + 245


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_the_logged_prefix_counts_the_apis_own_tool_definitions(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-builtin-tools-0123")
    client.beta.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=16,
        tools=TOOLS,  # type: ignore[arg-type]
        system=[{"type": "text", "text": SYSTEM_TEXT, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": QUESTION}],
        betas=["computer-use-2025-01-24"],
    )
    [row] = proxy.rows(1)
    # the request's own text: each tool's canonical JSON, the system prompt and the question
    # (block types and roles are not prompt text)
    own = (
        sum(count_tokens(_canonical(t)) for t in TOOLS)
        + count_tokens(SYSTEM_TEXT)
        + count_tokens(QUESTION)
    )
    assert row["approx_prefix_tokens"] == own + DOCUMENTED
    # the system breakpoint closes a prefix above claude-sonnet-4-5's 1024-token minimum only
    # with the tools' definitions counted
    before_breakpoint = own - count_tokens(QUESTION)
    assert before_breakpoint < 1024 <= before_breakpoint + DOCUMENTED
