"""Non-canonical repr in a prompt.

Severity: warning
Fix: none

## What it does
Reports `str()`, `repr()`, f-string, `%s` and `.format` conversions of a set, an instance of
a class with the default repr, or a dict whose key order is shown to vary between requests (as
PC003: filled while iterating a set or another hash- or filesystem-ordered source), when the
text reaches the cached prefix.

## Why is this bad?
A set's repr follows hash order, which changes per process for strings (an error). The default
repr of an object contains its memory address (`<Config object at 0x7f3a...>`), different in
every process (an error). A dict's repr follows insertion order and Python's repr rules, so
the same data built in another order renders differently (a warning). Use
`json.dumps(..., sort_keys=True)` or `promptcache.canonical_json` for data in prompts.

## Known problems
Python dicts keep insertion order, so a dict built the same way on every request (a literal, a
caller's dict, a pydantic `model_dump()`) renders to the same text and is not reported.

## Example
```python
settings = {key: profile[key] for key in profile.keys() & SHOWN}
system = f"User settings: {settings}"
```

## Use instead
```python
settings = {key: profile[key] for key in profile.keys() & SHOWN}
system = f"User settings: {json.dumps(settings, sort_keys=True)}"
```

## References
- https://docs.python.org/3/reference/datamodel.html#object.__repr__
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..facts import Kind


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(lambda f, e: f.kind is Kind.REPR):
        severity = Severity.ERROR if fact.granularity == "error" else Severity.WARNING
        yield ctx.diagnostic(
            "PC015",
            f"{fact.detail} is written into the cached prefix ({entry.sink}); it is not a "
            "canonical form: serialise with json.dumps(..., sort_keys=True)",
            entry.node,
            severity,
            ctx.chain(fact, "converted to text here"),
        )
