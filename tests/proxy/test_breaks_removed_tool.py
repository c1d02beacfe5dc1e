"""A tool removed from an Anthropic request, through a live proxy: the break names the tool.

The request after the removal holds its system block where the previous one held the removed
tool, so the first differing segment is ``tools[1]`` in the old request and ``system[0]`` in the
new one. The log's ``break_segment`` (the report's top segment) must name the removed tool, not
a key of the one segment read under the other's path (``tools[1].description``, a field the
system block never had). The official ``anthropic`` client, a proxy under uvicorn on 127.0.0.1
in front of the mock upstream (tests/proxy/upstreams.py), a real SQLite log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
from proxy_support import RunningProxy

SYSTEM = [
    {
        "type": "text",
        "text": "You are the support agent of Acme Anvils. Answer briefly. " * 40,
        "cache_control": {"type": "ephemeral"},
    }
]


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Look up an order in the Acme order database.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }


def test_a_removed_tool_is_named_as_the_break_segment(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-removed-tool-0123")
    for tools in ([tool("get_order"), tool("get_refund")], [tool("get_order")]):
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=16,
            tools=tools,  # type: ignore[arg-type]
            system=SYSTEM,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "Where is order 17?"}],
        )
    rows = proxy.rows(2)
    assert [r["break_reason"] for r in rows] == ["new_prefix", "tools_changed"]
    assert rows[1]["break_segment"] == "tools[1]"
