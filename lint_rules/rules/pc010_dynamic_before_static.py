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
instructions, through the program's own functions or the search call of a store whose code is
not seen: `similarity_search`, `retrieve`, `search`, `query`, ...; what such a call returns
was found for the text it was given), and whose message list holds, after that system text, a
stored history (a parameter or a field of `self`, `*history`, `history[-20:]`, `[system] +
self.history + [user]`) that the same function appends to. The list is read where it is
written, or where a list bound to a literal is then added to in order before the request
(`messages.extend(self.history)`, `for m in history: messages.append({"role": m["role"],
"content": m["content"]})`, then `messages.append(user)`). Where the function is given the
history and does not append to it, the finding is at the call of a web route's handler
(`@router.post(...)`, `@app.route(...)`) that passes as that history the one the request's
client sent (`data.history`, or its messages copied in order) and as the turn's input the
question it sent (`data.question`, a parameter of the handler): the client keeps the
conversation and sends it back with each question.

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
the system text through code the analysis reads or a search call (another call the analysis
cannot see makes it an unproven flow, not a finding), the newest message's text is that
parameter itself (a message that also carries a setting of the session, `f"[{user_name}]
{text}"`, is not), and the history is one the function appends to or one a web route's client
sent with the request (a history handed in by any other caller may be rebuilt by it each time,
and is not reported; nor is one filtered by a condition on the way, one passed with a fixed
question, searched for the same text each time, or an alias the driver does not find: the call
is found by the function's name, or the name it is imported as).

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
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from .._base import Diagnostic, Location, Related, Severity
from ..context import ModuleContext
from ..events import SinkCall
from ..facts import ASSUMED, SEARCHED, Fact, Kind, Value, replace
from ..regions import retrieved
from ._shared import LONG_STATIC_CHARS

#: a case of one kind found at a request (``TurnContext``, ``TurnCount``)
T = TypeVar("T")


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


def _searched(fact: Fact) -> Fact:
    """``fact`` with each step through a search call it went through (``retrieved``) named
    as such: what the search returns was found for the turn's input, a proven step."""
    if fact.proven or not retrieved(fact):
        return fact
    via = tuple(
        (
            f"{SEARCHED} {name}()" if text.startswith(ASSUMED) else text,
            line,
            name,
            path,
        )
        for text, line, name, path in fact.via
    )
    return replace(fact, via=via, detail=fact.detail.split("[", 1)[0].split(".", 1)[0])


def _each_once(
    ctx: ModuleContext,
    seen: set[tuple[int, int]],
    found_in: Callable[[SinkCall], Iterable[T]],
    node_of: Callable[[T], ast.AST],
) -> Iterator[T]:
    """Each case ``found_in`` gives of the module's requests sent more than once
    (``SinkCall.once`` false), once per place of the node ``node_of`` reports it at: a text
    reached by two requests is one finding, and so is one reported by two kinds of case
    (``seen`` holds the places of both)."""
    for sink in ctx.sinks:
        if sink.once:
            continue
        for found in found_in(sink):
            node = node_of(found)
            key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
            if key in seen:
                continue
            seen.add(key)
            yield found


def _turn_context(ctx: ModuleContext, seen: set[tuple[int, int]]) -> Iterator[Diagnostic]:
    """A system message made from what the newest message holds, ahead of a stored history
    the function appends to (``SinkCall.turn_context``)."""
    for found in _each_once(ctx, seen, lambda sink: sink.turn_context, lambda f: f.content):
        fact = _searched(found.shared)
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
    for found in _each_once(ctx, seen, lambda sink: sink.turn_counts, lambda f: f.count):
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


def _handed_turns(ctx: ModuleContext) -> Iterator[Diagnostic]:
    """A call passing the history its request's client sent to a function that puts text
    made from the turn's input ahead of it (``ModuleContext.handed_turns``)."""
    seen: set[tuple[int, int]] = set()
    for turn in ctx.handed_turns:
        key = (turn.argument.lineno, turn.argument.col_offset)
        if key in seen:
            continue
        seen.add(key)
        noted = turn.noted
        path = noted.path or ctx.path
        searched = "".join(f" through the search `{name}()`" for _, _, name, _ in noted.steps)
        message = (
            f"in {turn.callee}(), `{noted.content}` is made from `{noted.name}`{searched} and "
            f"is system text ahead of the history `{noted.history}`, given here as the one the "
            "request's client sent (its conversation, sent back with each question): it "
            "changes every turn, so none of the history after it is read from the cache: put "
            "it in the newest message instead"
        )
        related = (
            Related(
                Location(path, noted.line, noted.col, noted.line, noted.col),
                f"`{noted.content}` is system text made from `{noted.name}`, the turn's input",
            ),
            *(
                Related(
                    Location(p or path, line, 0, line, 0),
                    f"`{name}` is a search for `{noted.name}`: what it returns was found for it",
                    value=name,
                )
                for _, line, name, p in noted.steps
            ),
            Related(
                Location(path, noted.newest, 0, noted.newest, 0),
                f"the newest message holds `{noted.name}`, after `{noted.history}`",
            ),
        )
        yield ctx.diagnostic("PC010", message, turn.argument, Severity.WARNING, related)


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    seen: set[tuple[int, int]] = set()
    yield from _turn_context(ctx, seen)
    yield from _turn_counts(ctx, seen)
    yield from _handed_turns(ctx)
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
