"""Tool set built per request.

Severity: warning
Fix: none

## What it does
Reports a `tools` argument whose content is chosen per request inside the function that makes
the call: a conditional expression, a list filtered by a comprehension `if` that depends on the
request, or `append`/`extend` under an `if` on request data. Literal tool lists, lists built
once at import or in `__init__`, and filters on constants are not reported.

## Why is this bad?
Tools are the first part of the cached prefix. Two requests with different tool sets share no
cached prefix at all, not even the long system prompt after the tools. Offer every tool every
time (and steer with the prompt or `tool_choice`), or keep a small fixed number of tool sets.

## Example
```python
def ask(question, user):
    tools = [SEARCH]
    if user.is_admin:
        tools.append(DELETE_USER)
    return client.messages.create(model=MODEL, tools=tools, messages=[...])
```

## Use instead
```python
TOOLS = [SEARCH, DELETE_USER]  # always the same; the tool checks permissions when called

def ask(question, user):
    return client.messages.create(model=MODEL, tools=TOOLS, messages=[...])
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext, born_in
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(
        lambda f, e: f.kind is Kind.VARIES and not f.pinned and born_in(f, e.function),
        frozenset({"tools"}),
    ):
        yield ctx.diagnostic(
            "PC006",
            f"the tool set varies per request ({fact.detail}) "
            f"and reaches {entry.sink}; a different tool set shares no cached prefix",
            entry.node,
            Severity.WARNING,
            ctx.chain(fact, "the tool set varies here"),
        )
