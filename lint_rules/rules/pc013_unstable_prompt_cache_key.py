"""Unstable OpenAI prompt_cache_key.

Severity: error
Fix: none

## What it does
Reports an OpenAI `prompt_cache_key` (keyword or inside `extra_body`) built from a per-request
unique or time value: `uuid4()`, `secrets.token_hex()`, `random`, `time.time()`; or computed
from the whole message history sent with it (`hash(json.dumps(messages))`, or a same-module
helper that reads its whole argument), which grows every turn. A key that changes only once a
day (a date) is reported as info, as PC001 grades a date; one that changes more often is an
error.

## Why is this bad?
OpenAI routes a request by a hash of about the first 256 tokens combined with
`prompt_cache_key`. A random key per request sends each request to a machine that holds no
cache for it, which destroys the hit rate it was meant to raise. A key hashed from the whole
history changes every turn in the same way. Derive it from a stable tenant, user or
conversation id (or from the opening messages only, `messages[:2]`).

## Example
```python
client.chat.completions.create(model=MODEL, messages=messages, prompt_cache_key=str(uuid4()))
```

## Use instead
```python
client.chat.completions.create(
    model=MODEL, messages=messages, prompt_cache_key=f"tenant-{tenant_id}"
)
```

## References
- https://developers.openai.com/api/docs/guides/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .._base import Diagnostic, Severity
from ..context import ModuleContext
from ..facts import Kind
from ._shared import CACHE_KEY_APIS, how_often


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    functions = {
        n.name: n for n in ctx.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for sink in ctx.sinks:
        param = sink.params.get("prompt_cache_key")
        if param is None or sink.api not in CACHE_KEY_APIS:
            continue
        facts = [f for f in param[1].facts if f.kind in (Kind.UNIQUE, Kind.TIME) and not f.pinned]
        if facts:
            # the most often changing origin named, with how often it changes (a time
            # formatted to the minute or the day is not new on every request)
            rank = {"on every request": 0, "more than once a day": 1, "once a day": 2}
            origin = min(facts, key=lambda f: (rank[how_often(f)], f.line, f.col))
            often = how_often(origin)
            if often == "on every request":
                why = "new on every request; it routes each request away from its cache"
            else:
                why = (
                    f"which changes {often}; each new key routes the requests away from the "
                    "cache built under the one before"
                )
            yield ctx.diagnostic(
                "PC013",
                f"prompt_cache_key comes from `{origin.detail}`, {why}: derive it from a tenant "
                "or conversation id",
                param[0],
                Severity.INFO if often == "once a day" else Severity.ERROR,
                ctx.chain(origin),
            )
            continue
        history = sink.messages
        key = _bound_once(param[0], sink.function)
        if isinstance(history, ast.Name) and _reads_whole(key, history.id, functions):
            yield ctx.diagnostic(
                "PC013",
                f"prompt_cache_key is computed from the whole message history `{history.id}`, "
                "which grows every turn, so each turn gets a new key and is routed away from "
                "its cache: derive it from a conversation or tenant id, or the opening messages",
                param[0],
                Severity.ERROR,
            )


def _bound_once(expr: ast.expr, function: ast.AST | None) -> ast.expr:
    """What a name passed as the key is bound to, when the sink's function binds it once
    (``key = hashlib.sha256(...)``); else ``expr`` itself."""
    if not isinstance(expr, ast.Name) or function is None:
        return expr
    bound = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
    ]
    return bound[0] if len(bound) == 1 else expr


#: calls that read the whole of their argument (its every element goes into the result)
_WHOLE_READERS = frozenset({"dumps", "str", "repr", "hash", "tuple", "frozenset"})


def _reads_whole(
    expr: ast.AST,
    name: str,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int = 0,
) -> bool:
    """True when ``expr`` passes the whole list ``name`` to a call that reads all of it: a
    serialiser or ``hash`` (``json.dumps(messages)``), or a same-module function whose
    parameter is read whole (not only ``param[:2]``, ``param[0]`` or ``len(param)``)."""
    for node in ast.walk(expr):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        for index, arg in enumerate(node.args):
            if not (isinstance(arg, ast.Name) and arg.id == name):
                continue
            if called in _WHOLE_READERS:
                return True
            target = functions.get(called) if isinstance(func, ast.Name) else None
            if target is None or depth > 2:
                continue
            params = [a.arg for a in (*target.args.posonlyargs, *target.args.args)]
            if index < len(params) and _param_read_whole(
                target, params[index], functions, depth + 1
            ):
                return True
    return False


def _param_read_whole(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    param: str,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    depth: int,
) -> bool:
    """True when ``func`` reads all of its parameter ``param``: iterates it, or hands it
    whole to a reader (``_reads_whole``)."""
    for node in ast.walk(func):
        if isinstance(node, (ast.For, ast.comprehension)) and (
            isinstance(node.iter, ast.Name) and node.iter.id == param
        ):
            return True
    return any(_reads_whole(stmt, param, functions, depth) for stmt in func.body)
