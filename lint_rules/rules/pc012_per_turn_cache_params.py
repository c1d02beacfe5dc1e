"""tool_choice, thinking or effort varies per turn.

Severity: warning
Fix: none

## What it does
Reports `tool_choice` (`function_call` in the pre-1.0 openai SDK), `thinking`,
`reasoning_effort`, `reasoning` and `output_config` arguments whose value is chosen per request
inside the calling function (a conditional, an `if` on the turn number, a random choice). A
conditional that only fills in or converts the value it tests
(`{"type": choice} if choice else None`) chooses nothing of its own: it changes only when that
value does.

## Why is this bad?
At Anthropic, "`tool_choice` ... and thinking parameters invalidate messages": a turn whose
`tool_choice` or thinking budget differs from the previous turn re-reads only tools and system
from the cache and pays full price for the whole conversation history.

## Example
```python
for turn, question in enumerate(questions):
    choice = {"type": "any"} if turn == 0 else {"type": "auto"}
    client.messages.create(model=MODEL, tool_choice=choice, messages=history)
```

## Use instead
```python
for question in questions:
    client.messages.create(model=MODEL, tool_choice={"type": "auto"}, messages=history)
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext, first_fact_born_in, request_scope
from ..facts import Kind

_PARAMS = (
    "tool_choice",
    "function_call",
    "thinking",
    "reasoning_effort",
    "reasoning",
    "output_config",
)
_KINDS = (Kind.VARIES, Kind.UNIQUE, Kind.TIME)


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        for key in _PARAMS:
            param = sink.params.get(key)
            if param is None:
                continue
            origin = first_fact_born_in(param[1], request_scope(sink), _KINDS)
            if origin is not None:
                yield ctx.diagnostic(
                    "PC012",
                    f"`{key}` of {sink.label} changes between turns ({origin.detail}); a "
                    "change invalidates the cached messages: keep it fixed per conversation",
                    param[0],
                    Severity.WARNING,
                    ctx.chain(origin, f"{key} is chosen here"),
                )
