"""Tool list from an order-unstable producer.

Severity: error
Fix: sometimes

## What it does
Reports a tool list that comes from a producer whose order someone else controls, MCP
`session.list_tools()`, `langchain_mcp_adapters.tools.load_mcp_tools`, `entry_points(...)`,
`pkgutil.iter_modules`, when it reaches the `tools` of an LLM call without passing through
`sorted(...)` (a list sorted in place, `tools.sort(key=...)`, is sorted too).

## Why is this bad?
Tool definitions come first in the cached prefix (tools -> system -> messages); a change there
"invalidates everything". An MCP server may list its tools in a different order after a
restart or a reconnect, and plugin registries follow installation order, so the same tools in
a new order miss the whole cache.

## Example
```python
result = await session.list_tools()
tools = [{"name": t.name, "description": t.description, "input_schema": t.inputSchema}
         for t in result.tools]
client.messages.create(model=MODEL, tools=tools, messages=messages)
```

## Use instead
```python
client.messages.create(
    model=MODEL, tools=sorted(tools, key=lambda tool: tool["name"]), messages=messages
)
```

## Fix safety
The fix wraps the tools expression in `sorted(..., key=...)` by tool name, with a key that
cannot raise on any element the linter can see. It is offered only when every element is known:
`tool.name` for MCP tool objects, `tool["name"]` for dicts that are all built with a `"name"`
key, and `tool.get("name", "")` for dicts of which only some have one (a Responses API built-in
such as `{"type": "web_search"}` next to named function tools): the unnamed ones then sort first,
in their current order. A list mixing dicts with unknown elements (a parameter, an object list)
gets no fix. Tool names are unique within a request, so the order is total. Safe.

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://modelcontextprotocol.io/specification/2025-06-18/server/tools (tools/list)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Fix, Severity, TextEdit
from ..context import ModuleContext
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(
        lambda f, e: f.kind is Kind.TOOLS_UNSTABLE, frozenset({"tools"})
    ):
        node = entry.node.value if isinstance(entry.node, ast.Starred) else entry.node
        # a key for every element shape (see ``toolnames``); unknown elements get no fix
        key = {
            "elem": "tool.name",
            "attr": "tool.name",
            "item": 'tool["name"]',
            "dict": 'tool.get("name", "")',
        }.get(entry.value.name_key)
        fix = None
        if key is not None and isinstance(node, ast.expr):
            loc = ctx.location(node)
            fix = Fix(
                "sort the tools by name",
                (
                    TextEdit(loc.line, loc.col, loc.line, loc.col, "sorted("),
                    TextEdit(
                        loc.end_line,
                        loc.end_col,
                        loc.end_line,
                        loc.end_col,
                        f", key=lambda tool: {key})",
                    ),
                ),
            )
        yield ctx.diagnostic(
            "PC005",
            f"tool list from `{fact.detail}` reaches {entry.sink} unsorted; its order can "
            "change between sessions and invalidates the whole cache: sort by tool name",
            entry.node,
            Severity.ERROR,
            ctx.chain(fact, "tools listed here"),
            fix,
        )
