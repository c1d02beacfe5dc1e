"""Tool list from an order-unstable producer.

Severity: error
Fix: sometimes

## What it does
Reports a tool list that comes from a producer whose order someone else controls when it
reaches the `tools` of an LLM call without passing through `sorted(...)` (a list sorted in
place, `tools.sort(key=...)`, is sorted too): `entry_points(...)` (not `pkgutil.iter_modules`,
which lists a folder's modules in name order), and the tool lists of several MCP servers
(`session.list_tools()`, `langchain_mcp_adapters.tools.load_mcp_tools`) joined into one:
extended, appended or registered into a list, dict or registry in a `for` loop over the
servers, gathered with `asyncio.gather`, or flattened by a comprehension over the sessions.
One server's own list (passed on through helpers, fields, copies, or comprehensions over its
tools) is not a finding: `promptcache lint --explain` shows it as an unproven flow, "not shown
to change".

## Why is this bad?
Tool definitions come first in the cached prefix (tools -> system -> messages); a change there
"invalidates everything". One MCP server lists its tools in the order it registers them, the
same in every session unless that server changes; several servers' lists joined change with
any of them and follow the order the servers connect or answer in, and plugin registries
follow installation order, so the same tools in a new order miss the whole cache.

## Example
```python
tools = []
for session in sessions:  # one per configured MCP server
    result = await session.list_tools()
    tools += [{"name": t.name, "description": t.description, "input_schema": t.inputSchema}
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

from .._base import Diagnostic, Fix, Related, Severity, TextEdit
from ..context import ModuleContext
from ..facts import NOT_SHOWN, ONE_SERVER, Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    # two passes, not one partitioned: facts_in_prefix keeps one fact per place and origin
    # whatever its granularity, so one pass could keep a server's own list where a joined
    # list of the same call reaches the same place and report the joined one as unproven
    joined = list(
        ctx.facts_in_prefix(
            lambda f, e: f.kind is Kind.TOOLS_UNSTABLE and f.granularity != ONE_SERVER,
            frozenset({"tools"}),
        )
    )
    seen = {(id(entry.node), fact.path, fact.line, fact.col) for entry, fact in joined}
    # one server's own list (a finding only under ``--explain``), where no joined list of
    # the same call reaches the same place
    single = [
        (entry, fact)
        for entry, fact in ctx.facts_in_prefix(
            lambda f, e: f.kind is Kind.TOOLS_UNSTABLE and f.granularity == ONE_SERVER,
            frozenset({"tools"}),
        )
        if (id(entry.node), fact.path, fact.line, fact.col) not in seen
    ]
    for entry, fact in sorted(
        joined + single, key=lambda pair: (_pos(pair[0].node), pair[1].line, pair[1].col)
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
        chain = ctx.chain(fact, "tools listed here")
        if fact.granularity == ONE_SERVER:
            # an unproven flow: one server lists its tools in the order it registers them
            origin = chain[0].location
            chain = (
                *chain,
                Related(
                    origin,
                    f"{NOT_SHOWN} the tools of one MCP server, in the order it registers them; "
                    "no other server's list is joined to it here",
                ),
            )
        yield ctx.diagnostic(
            "PC005",
            f"tool list from `{fact.detail}` reaches {entry.sink} unsorted; its order can "
            "change between sessions and invalidates the whole cache: sort by tool name",
            entry.node,
            Severity.ERROR,
            chain,
            fix,
        )


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
