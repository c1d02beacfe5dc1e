r"""JSON without sorted keys in prompt text or tools.

Severity: warning
Fix: always

## What it does
Reports `json.dumps(...)` without `sort_keys=True` (and `yaml.dump(..., sort_keys=False)`)
whose text flows into the cached prefix: the system prompt, a tool definition or an earlier
message. Values whose key order is fixed in the source (strings, numbers, `True`, `False`, `None`
and literal containers of them) are not reported.

## Why is this bad?
`json.dumps` writes keys in insertion order. A dict built from an API response, a merge of
`**kwargs` or a set iteration can list the same keys in a different order on the next request,
which changes the prompt bytes and breaks the cached prefix. Anthropic's docs warn that tool-use
JSON must keep a stable key order.

## Example
```python
system = "Context:\n" + json.dumps(profile)
```

## Use instead
```python
system = "Context:\n" + json.dumps(profile, sort_keys=True)
```

## Fix safety
The fix adds `sort_keys=True` (or turns `sort_keys=False` into `True`). It changes the text
sent once; afterwards the text is stable. Safe.

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://docs.python.org/3/library/json.html#json.dumps
"""

from __future__ import annotations

from collections.abc import Iterator

from .._base import Diagnostic, Fix, Severity, TextEdit
from ..context import ModuleContext
from ..facts import Fact, Kind


def _fix(fact: Fact) -> Fix | None:
    spec = fact.fix
    if not spec:
        return None
    if spec[0] == "insert":
        _, line, col, text = spec
        edit = TextEdit(int(line), int(col), int(line), int(col), str(text))
    else:
        _, line, col, end_line, end_col, text = spec
        edit = TextEdit(int(line), int(col), int(end_line), int(end_col), str(text))
    return Fix("sort the keys: sort_keys=True", (edit,))


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(lambda f, e: f.kind is Kind.JSON_UNSORTED):
        yield ctx.diagnostic(
            "PC003",
            f"`{fact.detail}` flows into the cached prefix ({entry.sink}); key order can "
            "change between requests: use sort_keys=True",
            entry.node,
            Severity.WARNING,
            ctx.chain(fact, "serialised here"),
            _fix(fact),
        )
