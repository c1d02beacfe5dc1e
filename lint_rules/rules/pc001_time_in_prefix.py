r"""Time value in the cached prefix.

Severity: error
Fix: none

## What it does
Follows values of the current time (`datetime.now()`, `utcnow()`, `today()`, `date.today()`,
`time.time()`, `time.strftime(fmt)` without a time, arrow, pendulum, django `timezone.now()`,
pandas `Timestamp.now()`) through assignments, f-strings, `+`, `%`, `.format`, `join`, `dedent`
and same-module function calls, and reports where one enters the cached prefix: tools, the
system prompt, a message before the newest one, the SDK's frozen or session layer, a
`{"role": "system"}` message, or a function that builds the system prompt.

The granularity comes from the format string: text that changes within a day (`%H:%M`,
`isoformat()`) is an error, a date (`%Y-%m-%d`, `date.today()`) is info (it breaks the prefix
once a day), a month or a year is not reported. A format that is one of a few constants
(`fmt = "%H:%M" if precise else "%Y-%m-%d"`) counts as the one a caller's argument picks, or
else the finer of them.

A chain that passes through a call the analysis cannot see (a third-party function whose
result is assumed to carry its arguments) is not a finding: `promptcache lint --explain` shows
it.

## Why is this bad?
Prompt caches match an exact prefix. A timestamp near the start of the system prompt makes
every request's prefix new: each request pays a cache write (1.25x the input price at
Anthropic) and never reads (0.1x). "A change at one level invalidates that level and all later
ones" (Anthropic prompt caching docs).

## Known problems
Time used only in the newest user message, in the SDK's dynamic layer, in `metadata=`, headers
or logging is not in the prefix and is not reported. A value computed once at import, in
`__init__` or in a `functools.cache` function is pinned and is not reported either.

## Example
```python
def answer(question):
    system = f"Current time: {datetime.now():%H:%M}\n" + INSTRUCTIONS
    return client.messages.create(model=MODEL, system=system, messages=[...])
```

## Use instead
```python
def answer(question):
    now = f"Current time: {datetime.now():%H:%M}"
    return client.messages.create(
        model=MODEL,
        system=INSTRUCTIONS,
        messages=[{"role": "user", "content": f"{now}\n\n{question}"}],
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
from ..events import PrefixEntry
from ..facts import Fact, Kind
from ._shared import how_often


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    # one origin formatted both to the second and to the day (``now.strftime("%H:%M")`` and
    # ``now.strftime("%A")`` in one dict) is one finding at each place: the sub-day one
    subday_found = list(
        ctx.facts_in_prefix(
            lambda f, e: f.kind is Kind.TIME and not f.pinned and f.granularity == "subday"
        )
    )
    reported = {_where(entry, fact) for entry, fact in subday_found}
    day_found = [
        (entry, fact)
        for entry, fact in ctx.facts_in_prefix(
            lambda f, e: f.kind is Kind.TIME and not f.pinned and f.granularity != "subday"
        )
        if _where(entry, fact) not in reported
    ]
    found = sorted(
        subday_found + day_found,
        key=lambda pair: (_where(pair[0], pair[1]), pair[1].granularity != "subday"),
    )
    for entry, fact in found:
        subday = fact.granularity == "subday"
        why = f"it changes {how_often(fact)}, so the prefix is written afresh " + (
            "each time it does" if subday else "each day"
        )
        yield ctx.diagnostic(
            "PC001",
            f"time value `{fact.detail}` enters the cached prefix ({entry.sink}); {why}: move "
            "it after the cached part",
            entry.node,
            Severity.ERROR if subday else Severity.INFO,
            ctx.chain(fact),
        )


def _where(entry: PrefixEntry, fact: Fact) -> tuple[int, int, str, int, int, str]:
    """Where a finding is reported and the origin it names."""
    node = entry.node
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        fact.path,
        fact.line,
        fact.col,
        fact.detail,
    )
