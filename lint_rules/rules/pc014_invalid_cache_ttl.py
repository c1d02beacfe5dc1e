"""Cache TTL order invalid (5m before 1h) or TTL unknown.

Severity: error
Fix: sometimes

## What it does
Walks the breakpoints of one request in prefix order (tools -> system -> messages, then the
top-level automatic `cache_control`) and reports a `"ttl": "1h"` breakpoint that comes after a
5-minute one (explicit `"5m"` or no ttl), and any ttl other than `"5m"` or `"1h"`.

## Why is this bad?
"With mixed TTLs, longer-TTL breakpoints must come before shorter ones" (Anthropic; Bedrock:
"TTLs must not increase along tools -> system -> messages"); otherwise the API answers HTTP
400. An unknown ttl such as `"10m"` or `"1hr"` is also rejected.

## Example
```python
system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}],
messages=[{"role": "user", "content": [
    {"type": "text", "text": DOC, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
```

## Use instead
```python
system=[{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
```

## Fix safety
For the order, the fix gives the earlier 5-minute breakpoints `"ttl": "1h"`: that is what a
later 1-hour entry needs, but 1-hour writes cost 2x the input price instead of 1.25x. Only
literal `cache_control` dicts are edited. Misspelt TTLs with an unambiguous meaning (`"5min"`,
`"300s"`, `"60m"`, `"1hr"`, `"3600"`) are rewritten to `"5m"`/`"1h"`.

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Fix, Severity, TextEdit
from ..context import ModuleContext
from ..parse import source_lines
from ._shared import BREAKPOINT_APIS

_ALIASES = {
    "5m": {"5min", "5mins", "5minutes", "5minute", "300", "300s", "5m0s"},
    "1h": {"60m", "60min", "60mins", "1hr", "1hour", "1hours", "3600", "3600s", "1h0m0s"},
}


def _canonical(text: str) -> str | None:
    squashed = text.replace(" ", "").lower()
    for ttl, aliases in _ALIASES.items():
        if squashed == ttl or squashed in aliases:
            return ttl
    return None


def _quote(node: ast.Constant, ctx: ModuleContext) -> str:
    line = source_lines(ctx.source)[node.lineno - 1].encode()
    raw = line[node.col_offset : node.end_col_offset or node.col_offset].decode(errors="replace")
    return "'" if raw.startswith("'") else '"'


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS:
            continue
        marks: list[tuple[ast.Dict | None, ast.expr | None]] = [
            (b.breakpoint, b.ttl_node) for b in sink.blocks if b.bp_node is not None
        ]
        auto = sink.params.get("cache_control")
        if auto is not None:
            node = auto[0]
            marks.append((node if isinstance(node, ast.Dict) else None, _ttl_of(node)))
        short: list[tuple[ast.Dict | None, ast.expr | None]] = []
        for holder, ttl_node in marks:
            if ttl_node is not None and not isinstance(ttl_node, ast.Constant):
                continue  # computed at run time: not checked
            ttl = "5m" if ttl_node is None else ttl_node.value
            if not isinstance(ttl, str) or ttl not in ("5m", "1h"):
                assert isinstance(ttl_node, ast.Constant)
                canonical = _canonical(str(ttl))
                fix = None
                if canonical is not None:
                    quote = _quote(ttl_node, ctx)
                    loc = ctx.location(ttl_node)
                    fix = Fix(
                        f'use "{canonical}"',
                        (
                            TextEdit(
                                loc.line,
                                loc.col,
                                loc.end_line,
                                loc.end_col,
                                f"{quote}{canonical}{quote}",
                            ),
                        ),
                    )
                yield ctx.diagnostic(
                    "PC014",
                    f'unknown cache ttl {ttl!r}: the API accepts only "5m" and "1h"',
                    ttl_node,
                    Severity.ERROR,
                    fix=fix,
                )
                ttl = canonical or ""
            if ttl == "5m":
                short.append((holder, ttl_node))
            elif ttl == "1h" and short:
                assert ttl_node is not None
                yield ctx.diagnostic(
                    "PC014",
                    "a 1h breakpoint comes after a 5m one; longer TTLs must come first "
                    "(HTTP 400): make the earlier breakpoints 1h too",
                    ttl_node,
                    Severity.ERROR,
                    fix=_promote(short, ctx),
                )
                short = []


def _ttl_of(node: ast.expr) -> ast.expr | None:
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == "ttl":
                return v
    return None


def _promote(
    short: list[tuple[ast.Dict | None, ast.expr | None]], ctx: ModuleContext
) -> Fix | None:
    edits = []
    for holder, ttl_node in short:
        if isinstance(ttl_node, ast.Constant):
            loc = ctx.location(ttl_node)
            quote = _quote(ttl_node, ctx)
            edits.append(
                TextEdit(loc.line, loc.col, loc.end_line, loc.end_col, f"{quote}1h{quote}")
            )
        elif holder is not None and holder.values and all(k is not None for k in holder.keys):
            last = holder.values[-1]
            first_key = holder.keys[0]
            quote = _quote(first_key, ctx) if isinstance(first_key, ast.Constant) else '"'
            loc = ctx.location(last)
            text = f", {quote}ttl{quote}: {quote}1h{quote}"
            edits.append(TextEdit(loc.end_line, loc.end_col, loc.end_line, loc.end_col, text))
        else:
            return None
    return Fix("make the earlier breakpoints 1h", tuple(sorted(edits))) if edits else None
