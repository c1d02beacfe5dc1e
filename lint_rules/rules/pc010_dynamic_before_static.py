r"""Dynamic content placed before long static content or the stored history.

Severity: warning
Fix: none

## What it does
In the system prompt (a string built from parts, or a list of system blocks) and the SDK's
frozen and session layers, reports a part that varies per call (a function parameter, a loop
variable, a time or unique value) placed before static text of at least 2,048 characters
(about 512 tokens, the smallest model minimum): the static pieces, or system blocks, between
it and the next part that varies, together. A date that changes once a day (`date.today()`,
`%Y-%m-%d`) is not reported here: the text after it stays cached all day, and PC001 reports
it as an info. The message gives that text's length in
characters ("at least" when a piece of it has a length the analysis does not know).

It also reports system text made from each turn's input ahead of the conversation history:
a request whose newest message is a user message holding a parameter of the function whole
(`{"role": "user", "content": question}`), whose system text (`system=`, `instructions=`, or
a system message of the list) holds that parameter too (`search(question)` in the
instructions, through the program's own functions), and whose message list holds, after that
system text, a stored history (a parameter or a field of `self`, `*history`, `[system] +
self.history + [user]`) that the same function appends to.

It also reports a count that the loop around the request changes on every pass, written into
that system text ahead of a history the same loop appends to: a local counter stepped by the
same nonzero number on every pass (`remaining -= 1`, `turn = turn + 1`, as a statement of the
loop's body that no `continue` can skip, and bound nowhere else in the loop), or `len()` of a
local list appended to on every pass (and not rebound, cut or handed to a call, other than as
a keyword argument, in the loop), written into the text (`f"{remaining} calls left"`,
`str(turn)`, `.format(...)`), also through a name bound to such text once, on every pass.
A fixed count (`len(TOOLS)`, a `max_turns` the caller passes), a count in the newest message,
and a request with no history after the count are not reported.

## Why is this bad?
The cache key is an exact prefix. Per-user or per-request text at the start makes everything
after it, the long static instructions included, a different prefix for every user or request;
the static part could be cached once and shared if it came first. Text retrieved for each
turn's question and put in the system prompt does the same to the conversation: the history,
which grows by one turn per request and would otherwise be read from the cache, is sent after
a system prompt that is new every turn, so all of it is written again on every request.

## Known problems
The order of the pieces is read where the text is written in the request, through a local
name, a `+=` outside a loop and a function of the same module that returns it; not through a
method, a function of another module or text added in a loop.

The retrieved-context case is reported only when each step is proven: the parameter reaches
the system text through code the analysis reads (context from a vector store's client is an
unproven flow, not a finding), the newest message's text is that parameter itself (a message
that also carries a setting of the session, `f"[{user_name}] {text}"`, is not), and the
function itself appends to the history it sends (a history handed in and never written back
may be rebuilt by the caller each time).

The count is read only in the function that sends the request, in the innermost loop around
it: a count kept in a field, in a state dict updated between runs (a budget of tool calls
carried from one step of a graph to the next), or in a stored thread's token total
(`sum(m.tokens for m in user.thread)`, grown by a storage class on each turn) is not followed,
nor is one stepped by a number only known at run time (`used += count_tokens(reply)`) or only
on some passes.

## Example
```python
def system_prompt(user):
    return f"You are helping {user.name}.\n\n{LONG_RULES}"
```

```python
def respond(history, question):
    context = "\n".join(search(question))
    system = {"role": "system", "content": f"{RULES}\n{context}"}
    user = {"role": "user", "content": question}
    reply = client.chat.completions.create(model=MODEL, messages=[system, *history, user])
    history.append(user)
```

## Use instead
```python
def system_prompt(user):
    return f"{LONG_RULES}\n\nYou are helping {user.name}."
```

```python
def respond(history, question):
    context = "\n".join(search(question))
    user = {"role": "user", "content": f"{context}\n\n{question}"}
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "system", "content": RULES}, *history, user]
    )
    history.append({"role": "user", "content": question})
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://developers.openai.com/api/docs/guides/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Related, Severity
from ..context import ModuleContext
from ..facts import Fact, Kind, Value
from ._shared import LONG_STATIC_CHARS


def _per_call(facts: frozenset[Fact]) -> bool:
    """True where ``facts`` make a piece differ from one call to the next (``Value.dynamic``)
    by more than a date: a time that changes only once a day (``date.today()``, ``%Y-%m-%d``)
    keeps the static text after it cached all day, and PC001 reports it as an info."""
    return Value(
        frozenset(f for f in facts if not (f.kind is Kind.TIME and f.granularity != "subday"))
    ).dynamic


def _message(node: ast.AST, length: int, unknown: bool) -> str:
    what = ast.unparse(node) if isinstance(node, ast.expr) else "text"
    if len(what) > 40:
        what = what[:37] + "..."
    count = f"at least {length}" if unknown else str(length)
    return (
        f"`{what}` varies per call and comes before {count} characters of static text, "
        "which then cannot be cached across calls: put the static text first"
    )


def _static_after(pieces: list[tuple[bool, int | None]]) -> tuple[int, bool]:
    """The longest static text in ``pieces`` (each: varies per call, length in characters or
    None when not known): a run of consecutive static pieces is one text (``f"{now}\\n{RULES}"``
    puts 1 + len(RULES) characters after ``now``). Returns its known characters and whether a
    piece of unknown length is in it (then it holds at least that many)."""
    best, best_unknown = 0, False
    run, unknown = 0, False
    for dynamic, length in (*pieces, (True, None)):
        if not dynamic:
            run += length or 0
            unknown = unknown or length is None
            continue
        if run > best:
            best, best_unknown = run, unknown
        run, unknown = 0, False
    return best, best_unknown


def _short(node: ast.AST) -> str:
    what = ast.unparse(node)
    return what if len(what) <= 40 else what[:37] + "..."


def _turn_context(ctx: ModuleContext, seen: set[tuple[int, int]]) -> Iterator[Diagnostic]:
    """A system message made from what the newest message holds, ahead of a stored history
    the function appends to (``SinkCall.turn_context``)."""
    for sink in ctx.sinks:
        if sink.once:
            continue
        for found in sink.turn_context:
            key = (found.content.lineno, found.content.col_offset)
            if key in seen:
                continue
            seen.add(key)
            fact = found.shared
            name = fact.detail
            history = _short(found.history)
            grown = found.grown.lineno
            message = (
                f"`{_short(found.content)}` is made from `{name}`, which the newest message "
                f"(line {found.newest.lineno}) holds too, and is system text ahead of the "
                f"stored history `{history}` (appended to at line {grown}): it changes every "
                "turn, so none of the history after it is read from the cache: put it in the "
                "newest message instead"
            )
            related = (
                *ctx.chain(fact, f"`{name}`, the turn's input, is a parameter here"),
                Related(ctx.location(found.newest), "the newest message holds it too"),
                Related(ctx.location(found.grown), f"`{history}` is appended to here"),
            )
            yield ctx.diagnostic("PC010", message, found.content, Severity.WARNING, related)


def _turn_counts(ctx: ModuleContext, seen: set[tuple[int, int]]) -> Iterator[Diagnostic]:
    """A system text holding a count that the loop around the request changes on every pass,
    ahead of a history the same loop appends to (``SinkCall.turn_counts``)."""
    for sink in ctx.sinks:
        if sink.once:
            continue
        for found in sink.turn_counts:
            key = (found.count.lineno, found.count.col_offset)
            if key in seen:
                continue
            seen.add(key)
            count = _short(found.count)
            history = _short(found.history)
            message = (
                f"`{count}` changes on every pass of the loop (line {found.changed.lineno}) "
                f"and is system text ahead of the history `{history}` that the loop appends to "
                f"(line {found.grown.lineno}): it changes every turn, so none of the history after "
                "it is read from the cache: put the count in the newest message instead"
            )
            related = (
                Related(ctx.location(found.changed), f"`{count}` changes here on every pass"),
                Related(ctx.location(found.grown), f"`{history}` is appended to here"),
            )
            yield ctx.diagnostic("PC010", message, found.count, Severity.WARNING, related)


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    seen: set[tuple[int, int]] = set()
    yield from _turn_context(ctx, seen)
    yield from _turn_counts(ctx, seen)
    for entry in ctx.entries:
        if entry.once or entry.region not in ("system", "frozen", "session"):
            continue
        # the text's own pieces, or those of the text a name holds or a helper returns
        for parts in (entry.parts, *entry.texts):
            for index, (node, dynamic, _, facts) in enumerate(parts):
                if not dynamic or not _per_call(facts):
                    continue
                longest, unknown = _static_after([(d, n) for _, d, n, _ in parts[index + 1 :]])
                if longest >= LONG_STATIC_CHARS:
                    key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
                    if key not in seen:
                        seen.add(key)
                        message = _message(node, longest, unknown)
                        yield ctx.diagnostic("PC010", message, node, Severity.WARNING)
                break
    for sink in ctx.sinks:
        if sink.once:
            continue
        system = [b for b in sink.blocks if b.region == "system"]
        for index, block in enumerate(system):
            if not block.value.dynamic or not _per_call(block.value.facts):
                continue
            longest, unknown = _static_after(
                [(b.value.dynamic, b.length) for b in system[index + 1 :]]
            )
            node = block.node
            if isinstance(node, ast.Dict):
                node = next(
                    (
                        v
                        for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant) and k.value == "text"
                    ),
                    node,
                )
            key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
            if longest >= LONG_STATIC_CHARS and key not in seen:
                seen.add(key)
                message = _message(node, longest, unknown)
                yield ctx.diagnostic("PC010", message, node, Severity.WARNING)
            break
