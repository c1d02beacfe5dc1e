r"""Unique or random id in the cached prefix.

Severity: error
Fix: none

## What it does
Follows per-call unique or random values into the cached prefix: `uuid1/4/6/7()`,
`secrets.*`, module-level `random.*` and an unseeded `random.Random()`, `os.urandom`,
`id()`, `hash()` of a str or bytes (randomised per process by PYTHONHASHSEED),
ULID and nanoid generators.

## Why is this bad?
A request id or nonce in the system prompt makes every prefix unique, so the cache is written
on every request and never read. OpenAI routes requests by a hash of the first ~256 tokens, so
a unique value there also spreads requests over machines.

## Known problems
`uuid5`/`uuid3` of constants, a seeded `random.Random(42)`, the process id (`os.getpid()`,
fixed for the process: one prefix per worker, the same on every request it serves) and ids
computed once per session (in `__init__`) or at import are stable and not reported. One
whole element drawn from a pool, `random.choice(pool)` (or `rng.choice`) outside any loop or
comprehension, or an element of `random.sample(pool, k)` (or `rng.sample`) taken in a loop, is
one of the pool's values, a prefix that repeats and is cached when it does, and is not
reported; text or a tool list that gathers sampled elements in their drawn order (a join, what
the loop appends), an element at a fixed index of a sample, draws made in a loop or a
comprehension, and draws from a string (characters) or a `range` (numbers) are. A whole
number drawn between bounds, `random.randint(a, b)` or `random.randrange(...)` (or `rng.`'s),
outside any loop or comprehension, is one of a few values when its bounds are written as
numbers spanning at most 16 (`randint(1, 6)`), and is not shown to be more when the analysis
cannot read its bounds (`randrange(self.low, self.high)` of a setting): it varies per request
(a model drawn so is PC011) but is not reported here; bounds written as numbers spanning more
(`randint(1000, 9999)`, `randrange(10**12)`, `sys.maxsize`) are. An id used
only as a key, a path or in a condition is not prompt text and is not followed. Ids in
`metadata=`, `user=`, `extra_headers=` or the newest user message are outside the prefix and
not reported. A chain through a call the analysis cannot see is not a finding: `promptcache
lint --explain` shows it.

## Example
```python
def ask(question):
    request_id = uuid.uuid4().hex
    system = f"<meta>request {request_id}</meta>\n{RULES}"
    return client.messages.create(model=MODEL, system=system, messages=[...])
```

## Use instead
```python
def ask(question):
    request_id = uuid.uuid4().hex
    return client.messages.create(
        model=MODEL, system=RULES, messages=[...], metadata={"user_id": request_id}
    )
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://developers.openai.com/api/docs/guides/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(lambda f, e: f.kind is Kind.UNIQUE and not f.pinned):
        yield ctx.diagnostic(
            "PC002",
            f"unique value `{fact.detail}` enters the cached prefix ({entry.sink}); every "
            "request gets a new prefix: pass ids in metadata or the newest message instead",
            entry.node,
            Severity.ERROR,
            ctx.chain(fact),
        )
