"""Cache breakpoint below the model's minimum cacheable prefix.

Severity: warning
Fix: none

## What it does
When both the model (a string constant) and every block up to a breakpoint (tools, system,
messages as literals or module constants) are known, estimates the prefix length in tokens and
reports a breakpoint whose prefix is shorter than the model's minimum. The estimate counts 3
ASCII characters per token and 1.5 tokens per other character, which over-estimates, so a
report means the prefix is really too short.

## Why is this bad?
Below the minimum there is no error: the request simply is not cached and both cache usage
fields come back 0, so the breakpoint only misleads. Minimums (tokens): 512 for Opus 5; 1024 for
Opus 4.8, Sonnet 5, Sonnet 4.6/4.5, Opus 4.1/4, Sonnet 4/3.7; 2048 for Opus 4.7 and Haiku 3.5;
4096 for Opus 4.6/4.5 and Haiku 4.5 (bundled table, `promptcache/data/model_minimums.toml`,
`lint_min_tokens` where it differs from the SDK's).

## Options
`[tool.promptcache.lint.model-minimums]` overrides or adds models, in tokens.

## Example
```python
client.messages.create(
    model="claude-opus-4-5",
    system=[{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    messages=messages,
)
```

## Use instead
```python
# Cache only a prefix that reaches the model's minimum, or leave the breakpoint out.
client.messages.create(model="claude-opus-4-5", system="You are terse.", messages=messages)
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..models import estimate_tokens, minimum_tokens
from ._shared import BREAKPOINT_APIS


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS:
            continue
        model_param = sink.params.get("model") or sink.params.get("modelId")
        if model_param is None or model_param[1].const is None:
            continue
        model = model_param[1].const
        minimum = minimum_tokens(model, ctx.config.model_minimums)
        if minimum is None:
            continue
        chars = non_ascii = 0
        for block in sink.blocks:
            if block.length is None:
                break
            chars += block.length
            non_ascii += block.non_ascii
            if block.bp_node is None:
                continue
            tokens = estimate_tokens(chars, non_ascii)
            if tokens < minimum:
                yield ctx.diagnostic(
                    "PC008",
                    f"breakpoint after at most about {tokens} token{'' if tokens == 1 else 's'}, "
                    f"below the {minimum}-token minimum of {model}: nothing is cached here; "
                    "move it later or remove it",
                    block.bp_node,
                    Severity.WARNING,
                )
