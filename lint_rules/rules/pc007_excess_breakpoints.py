"""More than 4 cache breakpoints, or breakpoints added in an unbounded loop.

Severity: error
Fix: none

## What it does
Counts `cache_control` blocks (and Bedrock `cachePoint` blocks) in one request, the top-level
automatic `cache_control` included, and reports a fifth. Also reports a `for` loop over a
collection of unbounded length (all messages, all tools) that adds a breakpoint per element.

## Why is this bad?
Anthropic and Bedrock accept at most 4 breakpoints per request; a fifth is an HTTP 400 ("A
maximum of 4 blocks with cache_control may be provided. Found 5."). A loop that marks every
message works in a short test and fails once the conversation grows.

## Known problems
Loops over a capped slice (`messages[-2:]`, `messages[:3]`), over `range(n)` with n <= 4, with a
`break`, or that mark only under a test on the index or `len(...)` are not reported; nor is a
turn loop that calls the API and marks only the newest message.

## Example
```python
for message in messages:
    message["content"][-1]["cache_control"] = {"type": "ephemeral"}
```

## Use instead
```python
for message in messages[-2:]:
    message["content"][-1]["cache_control"] = {"type": "ephemeral"}
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
- https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ._shared import BREAKPOINT_APIS

_KEYS = ("cache_control", "cachePoint")


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS:
            continue
        marks = [b.bp_node for b in sink.blocks if b.bp_node is not None]
        auto = sink.params.get("cache_control")
        if auto is not None:
            marks.append(auto[0])
        if len(marks) > 4:
            yield ctx.diagnostic(
                "PC007",
                f"{len(marks)} cache breakpoints in one {sink.label} request; the API accepts "
                "at most 4 and answers HTTP 400",
                marks[4],
                Severity.ERROR,
            )
    if "cache_control" not in ctx.source and "cachePoint" not in ctx.source:
        return
    sink_nodes = {id(s.node) for s in ctx.sinks}
    for comp in ast.walk(ctx.tree):
        if isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and not any(
            _bounded(gen.iter) for gen in comp.generators
        ):
            mark = next((n for n in ast.walk(comp.elt) if _is_mark(n)), None)
            if mark is not None and not any(gen.ifs for gen in comp.generators):
                yield ctx.diagnostic(
                    "PC007",
                    "a cache breakpoint is added to every element of an unbounded "
                    "comprehension; past 4 the API answers HTTP 400: mark only the last one",
                    mark,
                    Severity.ERROR,
                )
    for loop in ast.walk(ctx.tree):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or _bounded(loop.iter):
            continue
        if any(isinstance(n, ast.Break) for n in _own_nodes(loop.body)):
            continue
        index_names = _index_names(loop)
        mark = _unguarded_mark(loop.body, index_names)
        if mark is None:
            continue
        if any(id(n) in sink_nodes for n in ast.walk(loop)):
            continue  # a turn loop that calls the API: marks the newest message only
        yield ctx.diagnostic(
            "PC007",
            "a cache breakpoint is added for every element of an unbounded loop; past 4 the "
            "API answers HTTP 400: mark only the last blocks (e.g. messages[-2:])",
            mark,
            Severity.ERROR,
        )


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes of a loop body, not descending into nested loops or functions."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                stack.append(child)


def _bounded(node: ast.expr) -> bool:
    """True when iterating ``node`` yields at most 4 elements."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        lower, upper = node.slice.lower, node.slice.upper
        low = _const_int(lower)
        up = _const_int(upper)
        if lower is not None and low is not None and low < 0 and (upper is None or up == -1):
            return -low <= 4 + 1
        if (lower is None or low == 0) and up is not None and up >= 0:
            return up <= 4
        return False
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return len(node.elts) <= 4
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "range" and node.args:
            return all(_const_int(a) is not None for a in node.args) and (
                len(range(*(_const_int(a) or 0 for a in node.args[:3]))) <= 4
            )
        if node.func.id in ("enumerate", "reversed", "list", "sorted", "zip") and node.args:
            return any(_bounded(a) for a in node.args)
    return False


def _const_int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _index_names(loop: ast.For | ast.AsyncFor) -> set[str]:
    it = loop.iter
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "enumerate"
        and isinstance(loop.target, ast.Tuple)
        and loop.target.elts
        and isinstance(loop.target.elts[0], ast.Name)
    ):
        return {loop.target.elts[0].id}
    if (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and isinstance(loop.target, ast.Name)
    ):
        return {loop.target.id}
    return set()


def _is_mark(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        return isinstance(node.slice, ast.Constant) and node.slice.value in _KEYS
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value in _KEYS for k in node.keys)
    if isinstance(node, ast.keyword):
        return node.arg in _KEYS
    return False


def _guard(test: ast.expr, index_names: set[str]) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and (node.id in index_names or node.id == "len"):
            return True
        if _const_int(node) == -1 if isinstance(node, ast.expr) else False:
            return True
    return False


def _unguarded_mark(body: list[ast.stmt], index_names: set[str]) -> ast.AST | None:
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not _guard(stmt.test, index_names):
                found = _unguarded_mark(stmt.body, index_names) or _unguarded_mark(
                    stmt.orelse, index_names
                )
                if found is not None:
                    return found
            continue
        if isinstance(
            stmt, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            continue
        for node in ast.walk(stmt):
            if _is_mark(node):
                return node
    return None
