r"""JSON without sorted keys in prompt text or tools.

Severity: warning
Fix: always

## What it does
Reports `json.dumps(...)` without `sort_keys=True` (and `yaml.dump(..., sort_keys=False)`)
whose text flows into the cached prefix (the system prompt, a tool definition or an earlier
message) when the dumped dict's key order is shown to vary: the dict was built by iterating a
set or another hash- or filesystem-ordered source, or the text is a tool call's `arguments`
serialised again into the history (arguments the model wrote, parsed and stored by the
application, whose key order is the store's).

## Why is this bad?
`json.dumps` writes keys in insertion order. A dict filled while iterating a set lists its keys
in an order that changes between processes, and a database JSON column may hand stored tool-call
arguments back in another order, so the same data renders as different prompt bytes and breaks
the cached prefix. Anthropic's docs warn that tool-use JSON must keep a stable key order.
A dict built in an unstable order is a warning. Stored tool-call arguments are info: Python
keeps the order the model wrote them in, and a store that reorders them does so the same way
on every read (PostgreSQL's `jsonb` keeps keys in one fixed order of its own), so the text
changes at most once per call stored, between the requests sent before it was stored and those
rebuilt from the store, not on every request.

## Known problems
Python dicts keep insertion order, so a dict built the same way on every request (a literal,
a pydantic `model_dump()` or `model_json_schema()`, a response parsed from a server) dumps to
the same text and is not reported, whatever its values. Where the only such source reaches the
dumped value through a call the analysis cannot see (a set listed into one request's prompt,
then the model's answer to it dumped into the next), the answer's keys come in the order the
model wrote them: an unproven flow, shown by `--explain`, not a finding.

## Example
```python
profile = {field: customer[field] for field in customer.keys() & SHOWN_FIELDS}
system = "Context:\n" + json.dumps(profile)
```

## Use instead
```python
profile = {field: customer[field] for field in customer.keys() & SHOWN_FIELDS}
system = "Context:\n" + json.dumps(profile, sort_keys=True)
```

## Fix safety
The fix adds `sort_keys=True` (or turns `sort_keys=False` into `True`). It changes the text
sent once; afterwards the text is stable. Safe.

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://docs.python.org/3/library/json.html#json.dumps
- https://www.postgresql.org/message-id/571D6FE6.5080604%40dunslane.net (`jsonb`'s key order
  is fixed; checked 2026-12-07)
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


def _why(fact: Fact) -> str:
    if fact.granularity == "arguments":
        return (
            "a tool call's arguments come in the key order they were stored with, which a "
            "database's JSON column may change once after the model wrote them, so the text "
            "can change once per call stored"
        )
    line = fact.site[0]
    where = f" at line {line}" if line else ""
    return (
        f"its keys are inserted in an unstable order (iterated{where}), so the text can "
        "change between requests"
    )


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for entry, fact in ctx.facts_in_prefix(lambda f, e: f.kind is Kind.JSON_UNSORTED):
        yield ctx.diagnostic(
            "PC003",
            f"`{fact.detail}` flows into the cached prefix ({entry.sink}); {_why(fact)}: "
            "use sort_keys=True",
            entry.node,
            Severity.INFO if fact.granularity == "arguments" else Severity.WARNING,
            ctx.chain(fact, "serialised here"),
            _fix(fact),
        )
