"""Unstable OpenAI prompt_cache_key.

Severity: error
Fix: none

## What it does
Reports an OpenAI `prompt_cache_key` (keyword or inside `extra_body`) built from a per-request
unique or time value: `uuid4()`, `secrets.token_hex()`, `random`, `time.time()`.

## Why is this bad?
OpenAI routes a request by a hash of about the first 256 tokens combined with
`prompt_cache_key`. A random key per request sends each request to a machine that holds no
cache for it, which destroys the hit rate it was meant to raise. Derive it from a stable tenant,
user or conversation id.

## Example
```python
client.chat.completions.create(model=MODEL, messages=messages, prompt_cache_key=str(uuid4()))
```

## Use instead
```python
client.chat.completions.create(
    model=MODEL, messages=messages, prompt_cache_key=f"tenant-{tenant_id}"
)
```

## References
- https://developers.openai.com/api/docs/guides/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..facts import Kind
from ._shared import CACHE_KEY_APIS


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        param = sink.params.get("prompt_cache_key")
        if param is None or sink.api not in CACHE_KEY_APIS:
            continue
        facts = [f for f in param[1].facts if f.kind in (Kind.UNIQUE, Kind.TIME) and not f.pinned]
        if facts:
            origin = min(facts, key=lambda f: (f.line, f.col))
            yield ctx.diagnostic(
                "PC013",
                f"prompt_cache_key comes from `{origin.detail}`, new on every request; it "
                "routes each request away from its cache: derive it from a tenant or "
                "conversation id",
                param[0],
                Severity.ERROR,
                ctx.chain(origin),
            )
