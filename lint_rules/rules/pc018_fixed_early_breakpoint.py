"""Only a fixed early message carries a breakpoint while a turn loop grows the history.

Severity: info
Fix: none

## What it does
For an Anthropic or Bedrock call inside a loop whose message list the loop appends to, reports
a `cache_control` assignment on a fixed early message (`history[0]...["cache_control"] = ...`,
any non-negative constant index) when that is the only breakpoint the loop's function puts on
the messages. A loop that marks the last appended block or the newest message
(`history[-1]`), a top-level automatic `cache_control`, or a breakpoint written into the
appended message literals is fine and not reported.

## Why is this bad?
A cache write happens only at a breakpoint, and a read looks back at most 20 block positions
from one (a run of tool_use/tool_result blocks counts as one). With the only message breakpoint
fixed on an early message, everything appended after it is prefilled again on every turn, and
no later breakpoint can be added cheaply once the history is more than 20 positions past it.
Marking the newest block each turn lets the next request read the previous one.

## Known problems
Silent when unsure: the loop must call the API itself and append to the list it sends; a
`for` loop over a literal or `range(n)` is reported only when it appends more than 20 messages
in all; any other `cache_control` in the function (other than on `system`/`tools` of the call),
or a call in the loop that is handed the message list (a helper that may mark it), keeps the
rule silent. A function of any module that puts a breakpoint on the list (`mark_tail(messages)`)
and is called once before the loop counts as the fixed mark.

## Example
```python
history[0]["content"][0]["cache_control"] = {"type": "ephemeral"}
while True:
    history.append({"role": "user", "content": input()})
    reply = client.messages.create(model=MODEL, max_tokens=512, messages=history)
    history.append({"role": "assistant", "content": reply.content})
```

## Use instead
```python
while True:
    history.append({"role": "user", "content": [{"type": "text", "text": input()}]})
    history[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    reply = client.messages.create(model=MODEL, max_tokens=512, messages=history)
    del history[-1]["content"][-1]["cache_control"]
    history.append({"role": "assistant", "content": reply.content})
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-12-01)
- https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html (checked 2026-12-01)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Related, Severity
from ..context import ModuleContext
from ..events import SinkCall
from ._shared import BREAKPOINT_APIS

#: Positions the lookback reaches (promptcache.lookback.ANTHROPIC_LOOKBACK).
LOOKBACK_BLOCKS = 20
_KEY = "cache_control"
_GROW = frozenset({"append", "extend"})


def _same(node: ast.expr, target: ast.expr) -> bool:
    return ast.dump(node) == ast.dump(target)


def _root_index(node: ast.expr, target: ast.expr) -> ast.expr | None:
    """For ``target[i][...]...``, the index ``i``; None when ``node`` is not under ``target``."""
    while isinstance(node, ast.Subscript):
        if _same(node.value, target):
            return node.slice
        node = node.value
    return None


def _fixed_marks(scope: ast.AST, target: ast.expr) -> list[ast.Assign]:
    out = []
    for node in ast.walk(scope):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        item = node.targets[0]
        if not (
            isinstance(item, ast.Subscript)
            and isinstance(item.slice, ast.Constant)
            and item.slice.value == _KEY
        ):
            continue
        index = _root_index(item, target)
        if isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0:
            out.append(node)
    return out


def _key_constants(scope: ast.AST, skip: set[int]) -> int:
    """``"cache_control"`` strings and keywords in ``scope``, outside the nodes in ``skip``."""
    count = 0
    stack: list[ast.AST] = [scope]
    while stack:
        node = stack.pop()
        if id(node) in skip:
            continue
        if (isinstance(node, ast.Constant) and node.value == _KEY) or (
            isinstance(node, ast.keyword) and node.arg == _KEY
        ):
            count += 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def _appends(loop: ast.stmt, target: ast.expr) -> int:
    """Statements in ``loop`` that grow ``target`` (append/extend, ``+=``, ``x = x + ...``)."""
    return sum(1 for node in ast.walk(loop) if _grows(node, target))


def _grows(node: ast.AST, target: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr in _GROW and _same(func.value, target)
    if isinstance(node, ast.AugAssign):
        return _same(node.target, target)
    return (
        isinstance(node, ast.Assign)
        and any(_same(t, target) for t in node.targets)
        and isinstance(node.value, ast.BinOp)
        and _same(node.value.left, target)
    )


def _long_enough(loop: ast.stmt, appends: int) -> bool:
    if isinstance(loop, ast.While):
        return True
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = loop.iter
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
        return len(it.elts) * appends > LOOKBACK_BLOCKS
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
        bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
        if len(bounds) != len(it.args) or not bounds:
            return True  # a variable number of turns
        turns = len(range(*bounds))
        return turns * appends > LOOKBACK_BLOCKS
    return True  # turns over user input, a queue, an iterator: not bounded by the code


def _hands_over(loop: ast.stmt, target: ast.expr, sink: ast.Call) -> bool:
    """A call other than the sink and append/extend that is given the message list."""
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call) or node is sink:
            continue
        if isinstance(node.func, ast.Attribute) and _same(node.func.value, target):
            continue
        args = [*node.args, *(k.value for k in node.keywords)]
        if any(_same(a, target) or _root_index(a, target) is not None for a in args):
            return True
    return False


def _helper_mark(
    ctx: ModuleContext,
    sink: SinkCall,
    loop: ast.stmt,
    target: ast.expr,
    scope: ast.AST,
    seen: set[int],
) -> Iterator[Diagnostic]:
    """A function (of any module) that puts a breakpoint on the message list, called once
    before the loop, when nothing else in the function marks a block: the breakpoint stays
    where that call put it while the loop grows the list."""
    inside = {id(n) for n in ast.walk(loop)}
    within = {id(n) for n in ast.walk(scope)}
    calls = [
        (call, name)
        for call, arg, name in ctx.breakpoint_calls
        if id(call) in within and id(call) not in inside and _same(arg, target)
    ]
    skip = {id(k.value) for k in sink.node.keywords if k.arg in ("system", "tools")}
    if len({id(c) for c, _ in calls}) != 1 or _key_constants(scope, skip):
        return
    call, name = calls[0]
    if id(call) in seen or call.lineno > getattr(loop, "lineno", 0):
        return
    seen.add(id(call))
    listed = ast.unparse(target)
    yield ctx.diagnostic(
        "PC018",
        f"the only message breakpoint is set once, by {name}(), before this loop appends to "
        f"`{listed}` every turn: everything after it is prefilled again on each request, and "
        f"a breakpoint reads only {LOOKBACK_BLOCKS} block positions back; mark the newest "
        "block each turn instead",
        call,
        Severity.INFO,
        (Related(ctx.location(sink.node), "the growing history is sent here"),),
    )


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    if _KEY not in ctx.source and not ctx.breakpoint_calls:
        return
    seen: set[int] = set()
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS or sink.messages is None or not sink.loops:
            continue
        if _KEY in sink.params:
            continue  # automatic caching: the breakpoint follows the tail
        target, loop = sink.messages, sink.loops[0]
        if not isinstance(target, (ast.Name, ast.Attribute)):
            continue
        appends = _appends(loop, target)
        if not appends or not _long_enough(loop, appends) or _hands_over(loop, target, sink.node):
            continue
        scope = sink.function or ctx.tree
        marks = _fixed_marks(scope, target)
        if not marks:
            yield from _helper_mark(ctx, sink, loop, target, scope, seen)
            continue
        skip = {id(k.value) for k in sink.node.keywords if k.arg in ("system", "tools")}
        if _key_constants(scope, skip) != len(marks):
            continue  # another breakpoint somewhere: maybe on the tail
        mark = marks[0]
        if id(mark) in seen:
            continue
        seen.add(id(mark))
        index = _root_index(mark.targets[0], target)
        position = index.value if isinstance(index, ast.Constant) else "?"
        name = ast.unparse(target)
        yield ctx.diagnostic(
            "PC018",
            f"the only message breakpoint is on `{name}[{position!s}]` while this loop appends "
            f"to `{name}` every turn: everything after it is prefilled again on each request, "
            f"and a breakpoint reads only {LOOKBACK_BLOCKS} block positions back; mark the "
            "newest block each turn instead",
            mark,
            Severity.INFO,
            (Related(ctx.location(sink.node), "the growing history is sent here"),),
        )
