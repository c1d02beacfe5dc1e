"""Model chosen per request within a session.

Severity: warning
Fix: none

## What it does
Reports the `model` (`modelId` for Bedrock, the deployment `engine` or `deployment_id` of the
pre-1.0 openai SDK's Azure calls) of an LLM call when it is chosen per request inside
the calling function (for a call at module level, inside the loop around it: a script's
turns): a conditional expression, an `if` that assigns different models, or a random choice,
there or in a helper it calls there (`model=pick_model()`). A model passed in by the caller, set
in `__init__`, a module constant, drawn at module level outside loops or by a `functools.cache`
helper is not reported.

## Why is this bad?
Caches are per model: "switching models always misses" (Anthropic prompt caching docs). Routing
turns of one conversation to different models (a cheap model for short questions, a strong
one otherwise) re-sends the whole history uncached on every switch, which can cost more than
the routing saves.

## Example
```python
model = "claude-haiku-4-5" if len(question) < 200 else "claude-sonnet-4-5"
client.messages.create(model=model, system=SYSTEM, messages=history)
```

## Use instead
```python
# Pick the model once per conversation and keep it.
client.messages.create(model=self.model, system=SYSTEM, messages=history)
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext, first_fact_born_in, request_scope
from ..facts import Kind

_KINDS = (Kind.VARIES, Kind.UNIQUE, Kind.TIME)


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        for key in ("model", "modelId", "model_name", "engine", "deployment_id"):
            param = sink.params.get(key)
            if param is None:
                continue
            origin = first_fact_born_in(param[1], request_scope(sink), _KINDS)
            if origin is not None:
                yield ctx.diagnostic(
                    "PC011",
                    f"the model of {sink.label} is chosen per request ({origin.detail}); each "
                    "switch of model re-sends the conversation uncached",
                    param[0],
                    Severity.WARNING,
                    ctx.chain(origin, "the model is chosen here"),
                )
