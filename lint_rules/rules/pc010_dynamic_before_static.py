r"""Dynamic content placed before long static content.

Severity: warning
Fix: none

## What it does
In the system prompt (a string built from parts, or a list of system blocks) and the SDK's
frozen and session layers, reports a part that varies per call (a function parameter, a loop
variable, a time or unique value) placed before a static part of at least 2,048 characters
(about 512 tokens, the smallest model minimum).

## Why is this bad?
The cache key is an exact prefix. Per-user or per-request text at the start makes everything
after it, the long static instructions included, a different prefix for every user or request;
the static part could be cached once and shared if it came first.

## Example
```python
def system_prompt(user):
    return f"You are helping {user.name}.\n\n{LONG_RULES}"
```

## Use instead
```python
def system_prompt(user):
    return f"{LONG_RULES}\n\nYou are helping {user.name}."
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://developers.openai.com/api/docs/guides/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ._shared import LONG_STATIC_CHARS


def _message(node: ast.AST, length: int) -> str:
    what = ast.unparse(node) if isinstance(node, ast.expr) else "text"
    if len(what) > 40:
        what = what[:37] + "..."
    return (
        f"`{what}` varies per call and comes before {length} characters of static text, "
        "which then cannot be cached across calls: put the static text first"
    )


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    seen: set[tuple[int, int]] = set()
    for entry in ctx.entries:
        if entry.once or not entry.parts or entry.region not in ("system", "frozen", "session"):
            continue
        for index, (node, dynamic, _, _) in enumerate(entry.parts):
            if not dynamic:
                continue
            longest = max((n or 0 for _, d, n, _ in entry.parts[index + 1 :] if not d), default=0)
            if longest >= LONG_STATIC_CHARS:
                key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
                if key not in seen:
                    seen.add(key)
                    yield ctx.diagnostic("PC010", _message(node, longest), node, Severity.WARNING)
            break
    for sink in ctx.sinks:
        if sink.once:
            continue
        system = [b for b in sink.blocks if b.region == "system"]
        for index, block in enumerate(system):
            if not block.value.dynamic:
                continue
            longest = max(
                (b.length or 0 for b in system[index + 1 :] if not b.value.dynamic), default=0
            )
            node = block.node
            if isinstance(node, ast.Dict):
                node = next(
                    (
                        v
                        for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant) and k.value == "text"
                    ),
                    node,
                )
            key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
            if longest >= LONG_STATIC_CHARS and key not in seen:
                seen.add(key)
                yield ctx.diagnostic("PC010", _message(node, longest), node, Severity.WARNING)
            break
