"""Breakpoint on a volatile block while an earlier stable block has none.

Severity: error
Fix: none

## What it does
Reports a `cache_control` (or `cachePoint`) breakpoint on a tool, system block or earlier
message whose text changes every request (a time or unique value) or every day (a date, which
PC001 reports as info), when a stable block before it, after the previous breakpoint, carries
no breakpoint. A block that changes only once a day is reported as info, as PC001 grades a
date; one that changes more often is an error.

## Why is this bad?
"A breakpoint on a block that changes every request never hits: put it on the last stable
block" (Anthropic prompt caching docs). The request pays a cache write at 1.25x every time and
never reads it, so it costs more than no caching; the stable part before it is never cached.
A block holding only a date is read within the day, but each new day writes it afresh with
everything before it, which a breakpoint on the stable block would keep.

## Known problems
The newest message is exempt: marking it is how a conversation caches incrementally.

## Example
```python
system=[
    {"type": "text", "text": RULES},
    {"type": "text", "text": f"Now: {datetime.now()}", "cache_control": {"type": "ephemeral"}},
]
```

## Use instead
```python
system=[
    {"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": f"Now: {datetime.now()}"},
]
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Related, Severity
from ..context import ModuleContext
from ..facts import Kind
from ._shared import BREAKPOINT_APIS, how_often


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS:
            continue
        stable = None
        for block in sink.blocks:
            volatile = [
                f for f in block.value.facts if f.volatile and f.kind in (Kind.TIME, Kind.UNIQUE)
            ]
            if block.bp_node is not None:
                if volatile and not block.tail and stable is not None:
                    # a date (PC001's daily info) makes the block change once a day, not on
                    # every request: named only when nothing in the block changes more often
                    daily = [f for f in volatile if how_often(f) == "once a day"]
                    every = [f for f in volatile if f not in daily]
                    origin = min(every or daily, key=lambda f: (f.line, f.col))
                    if every:
                        what = (
                            f"changes every request (`{origin.detail}`): it is written each "
                            "time and never read"
                        )
                    else:
                        what = (
                            f"changes once a day (`{origin.detail}`): it is written afresh "
                            "each day, with everything before it"
                        )
                    yield ctx.diagnostic(
                        "PC009",
                        f"breakpoint on a block that {what}; put it on the stable block "
                        f"before it (line {getattr(stable.node, 'lineno', 0)})",
                        block.bp_node,
                        Severity.ERROR if every else Severity.INFO,
                        (
                            *ctx.chain(origin),
                            Related(ctx.location(stable.node), "stable block without breakpoint"),
                        ),
                    )
                stable = None
            elif not volatile and not block.tail:
                stable = block
