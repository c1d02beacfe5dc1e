"""Earlier history rewritten in a call loop.

Severity: warning
Fix: none

## What it does
For a message list passed to an LLM call inside a loop (or kept in `self.<attr>` by a chat
object whose methods are called turn after turn), reports statements that change messages
before the newest one: `pop(0)` or `pop(i)`, `del history[0]`, `insert(i, ...)` before the end,
`remove(...)`, a sliding window `history = history[-20:]`, and assignments to `history[i]` for
an earlier `i` (also of the messages kept on an object, `branch.messages =
branch.messages[-4:]` for the `branch` of a loop that sends `branch.messages`); and a method
that puts a system message into a fresh list, adds the stored history `self.<attr>` after it
and stores the list back as `self.<attr>` (every call puts one more system message in front of
the earlier turns). A chat object that builds each request afresh from a window of the newest
stored turns, `self.<attr>[-n:]` or a loop that appends the same turns one by one (`for i, m
in enumerate(self.<attr>)` that skips while `i < len(self.<attr>) - n`; read in one method,
followed through the local lists it is added to, the methods of the class that return them and
the calls that hand them to the method that sends them), is reported when a method of the
class adds to `self.<attr>`; so is a call that hands `self.<attr>` to a helper of the module
or class that keeps the newest messages that fit a limit (it walks its list argument from the
end, `for m in reversed(history)`, adds each message to a fresh list it returns, not under a
condition, and stops at an ordering test, `if total + n > budget: break`; also of the history
with the new turn, `trim(self.history + [turn])`), and, where a history is sent from a loop,
`history = helper(history)`. A window kept in a local name and stored back, `trimmed =
self.history[-10:]` (or `trim(self.history)`) then `self.history = trimmed + [turn]`, is
reported too. A fixed cut (`self.history[:40]`, a
forward walk that keeps the oldest messages that fit), a budget check that raises, a backwards
walk without a stop, a window that is only logged and a window of turns nothing adds to after
the constructor are not. In a function that is
handed the whole history as a parameter (called once per turn), only a window that keeps the
newest messages, `history = history[-20:]`, written before the call that sends the history is
reported: a fixed cut such as `messages[1:]` drops the same message every turn, and a window
after the call (in the handler of a failed request) rebinds a name that no later turn's request
reads; so is a `pop(i)` or `del history[i]` of earlier messages that a `while` loop repeats
or an `if` that compares sizes guards (`while count_tokens(messages) > limit:
messages.pop(0)`), a cut to the newest messages that fit a limit (a pop under a test of a
role, or of the newest message, is not). The window may be sent through a method of another
class of the module that sends its argument (`self.llm.run(self.history[-20:])`, `self.llm =
Client()`). A loop that repeats the request only when it raised (a `try` whose body breaks or
returns right after the call) is a retry loop, not a turn loop (also where the `try` sits in
an `if` of the loop, or where its body ends at the call and the loop breaks right after the
`try`): a failed request cached nothing. A fixed cut (`messages = messages[1:]`) of a list
made afresh earlier in the same pass (`messages = build(conv)`) drops the same messages every pass,
and an `insert()` at a constant index from the start (`messages.insert(0, system)`) into a
local list bound to a new list earlier in the same pass (`messages = list(history)`, or `[]`
then filled; not under an inner loop, and not rebound in between) puts the message at the
same place of every request. An Anthropic request whose breakpoints all close its tools or
system blocks, in a module that writes no other breakpoint (none on a message, no top-level
`cache_control=`) and that hands the history to no call but the request (`len` and `print`
aside: a helper of another module may mark a message), caches none of its messages:
Anthropic caches only up to a breakpoint, so a window over its history loses nothing cached
and is not reported. One with no breakpoint at all still is: the window would undo the
message breakpoint that caching its history needs.

## Why is this bad?
The cached prefix ends where the history first differs from the previous request. Dropping the
oldest message on every turn shifts everything after it, so every turn re-sends the whole
window uncached (a sliding window caches nothing past the system prompt). Appending, and editing
only the newest message, keep the prefix.

## Known problems
Rewrites that happen rarely on purpose (compacting the history into a summary every 50 turns)
are reported too; suppress the line with `# promptcache: ignore[PC016]` or use the SDK's
`Conversation.compact()`.

## Example
```python
while True:
    history.append({"role": "user", "content": input()})
    if len(history) > 20:
        history.pop(0)
    reply = client.messages.create(model=MODEL, system=SYSTEM, messages=history)
```

## Use instead
```python
while True:
    history.append({"role": "user", "content": input()})
    reply = client.messages.create(model=MODEL, system=SYSTEM, messages=history)
```

## References
- https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from .._base import Diagnostic, Related, Severity
from ..context import ModuleContext
from ..events import SinkCall
from ..statements import fixed_locals
from ..taint import INIT_METHODS

Target = tuple[str, str]


def _target(node: ast.expr) -> Target | None:
    """The history a node names: a plain name, ``self.<attr>``, or an attribute of another
    name (``conv.messages`` of a loop variable), as ``("attr", "conv.messages")``."""
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "self":
            return ("self", node.attr)
        return ("attr", f"{node.value.id}.{node.attr}")
    return None


def _newest(index: ast.expr, target: Target) -> bool:
    """``-1`` or ``len(history) - 1``: the newest message."""
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        return isinstance(index.operand, ast.Constant) and index.operand.value == 1
    if isinstance(index, ast.BinOp) and isinstance(index.op, ast.Sub):
        left = index.left
        return (
            isinstance(left, ast.Call)
            and isinstance(left.func, ast.Name)
            and left.func.id == "len"
            and bool(left.args)
            and _target(left.args[0]) == target
        )
    return False


def _rewrite(node: ast.AST, target: Target, windows: frozenset[str] = frozenset()) -> str | None:
    """What ``node`` does to the earlier messages of ``target``, if it changes them; ``windows``
    are local names bound to a cut of ``target`` from an index (``trimmed =
    self.history[-10:]``), stored back as ``target`` in a rewrite too."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if _target(node.func.value) != target:
            return None
        method = node.func.attr
        if method == "pop" and node.args and not _newest(node.args[0], target):
            return "pop() of an earlier message"
        if method == "insert" and node.args:
            first = node.args[0]
            at_end = (
                isinstance(first, ast.Call)
                and isinstance(first.func, ast.Name)
                and first.func.id == "len"
            )
            if not at_end:
                return "insert() before the newest message"
        if method == "remove":
            return "remove() of a message"
        return None
    if isinstance(node, ast.Delete):
        for item in node.targets:
            if (
                isinstance(item, ast.Subscript)
                and _target(item.value) == target
                and not _newest(item.slice, target)
            ):
                return "del of earlier messages"
        return None
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for item in targets:
            if _target(item) == target:
                for sub in ast.walk(node.value):
                    if (
                        isinstance(sub, ast.Subscript)
                        and isinstance(sub.slice, ast.Slice)
                        and sub.slice.lower is not None
                        and _target(sub.value) == target
                    ):
                        return "a sliding window that drops the oldest messages"
                    if isinstance(sub, ast.Name) and sub.id in windows:
                        # ``trimmed = self.history[-10:]`` ... ``self.history = trimmed + [...]``
                        return "a sliding window that drops the oldest messages"
                continue
            inner = item
            while isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Subscript):
                inner = inner.value
            if isinstance(inner, ast.Subscript) and _target(inner.value) == target:
                if isinstance(inner.slice, ast.Slice):
                    return "a slice assignment over the history"
                if not _newest(inner.slice, target):
                    return "an edit of an earlier message"
    return None


def _is_parameter(function: ast.AST, target: Target) -> bool:
    if target[0] != "name" or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = function.args
    return any(a.arg == target[1] for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


def _window(node: ast.AST, target: Target) -> str | None:
    """``history = history[-N:]``: keeps the newest N messages, dropping the oldest."""
    if not isinstance(node, ast.Assign) or not any(_target(t) == target for t in node.targets):
        return None
    for sub in ast.walk(node.value):
        if (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.slice, ast.Slice)
            and isinstance(sub.slice.lower, ast.UnaryOp)
            and isinstance(sub.slice.lower.op, ast.USub)
            and _target(sub.value) == target
        ):
            return "a sliding window that drops the oldest messages"
    return None


def _head(expr: ast.expr) -> Target | None:
    """The history ``expr`` is, or whose messages a list it makes starts with
    (``history + [turn]``, ``[*history, turn]``)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _head(expr.left)
    if isinstance(expr, ast.List) and expr.elts and isinstance(expr.elts[0], ast.Starred):
        return _target(expr.elts[0].value)
    return _target(expr)


def _window_names(
    scope: ast.AST,
    target: Target,
    cls: ast.ClassDef | None = None,
    helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> frozenset[str]:
    """Local names ``scope`` binds to a cut of ``target`` from an index (``trimmed =
    self.history[-10:]``, ``rest = history[2:]``) or to what a helper that keeps the newest
    messages that fit a limit returns of it (``trimmed = trim(self.history + [turn])``), and to
    nothing else."""
    cut: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(scope):
        if not isinstance(node, ast.Assign):
            continue
        for item in node.targets:
            if not isinstance(item, ast.Name):
                continue
            value = node.value
            trim = _trimmed(cls, value, helpers or {}) if isinstance(value, ast.Call) else None
            if (
                isinstance(value, ast.Subscript)
                and isinstance(value.slice, ast.Slice)
                and value.slice.lower is not None
                and value.slice.step is None
                and _target(value.value) == target
            ) or (trim is not None and _head(trim.argument) == target):
                cut.add(item.id)
            else:
                other.add(item.id)
    return frozenset(cut - other)


def _ordering(test: ast.expr) -> bool:
    """A test that compares sizes (``count(messages) > limit``, ``len(h) >= n``)."""
    return any(
        isinstance(n, ast.Compare)
        and any(isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)) for op in n.ops)
        for n in ast.walk(test)
    )


def _limit_drops(function: ast.AST, target: Target) -> set[int]:
    """The ``pop(i)``/``del history[i]`` of earlier messages of ``target`` that a ``while``
    loop repeats, or that an ``if`` comparing sizes guards (``while count(messages) > limit:
    messages.pop(0)``): the history cut to its newest messages that fit a limit, a window."""
    found: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.While) or (isinstance(node, ast.If) and _ordering(node.test)):
            for stmt in node.body:
                if not isinstance(stmt, (ast.Expr, ast.Delete)):
                    continue
                done = stmt.value if isinstance(stmt, ast.Expr) else stmt
                if _rewrite(done, target) in (
                    "pop() of an earlier message",
                    "del of earlier messages",
                ):
                    found.add(id(done))
    return found


def _after(node: ast.AST, call: ast.Call) -> bool:
    """The statement ``node`` ends after ``call`` starts (same function, no loop between)."""
    end = (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
    return end > (call.lineno, call.col_offset)


def _scopes(ctx: ModuleContext, sink_function: ast.AST | None, target: Target) -> list[ast.AST]:
    if target[0] != "self" or sink_function is None:
        return []
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.ClassDef) and sink_function in node.body:
            return [
                method
                for method in node.body
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
                and method.name not in INIT_METHODS
            ]
    return []


def _system_dict(node: ast.AST) -> bool:
    """A message dict literal with a literal system or developer role."""
    return isinstance(node, ast.Dict) and any(
        isinstance(k, ast.Constant)
        and k.value == "role"
        and isinstance(v, ast.Constant)
        and v.value in ("system", "developer")
        for k, v in zip(node.keys, node.values, strict=True)
    )


def _prepended(function: ast.AST, name: str) -> tuple[ast.AST, str] | None:
    """In a method, a system message put into the local list ``name`` before the stored
    history ``self.<attr>`` is added to it, and the list then stored back as ``self.<attr>``:
    every call adds one more system message in front of the earlier turns. Returns the place
    the history is added and the attribute."""
    system_at: ast.AST | None = None
    added: tuple[ast.AST, str] | None = None
    stored: set[str] = set()
    for node in sorted(
        (n for n in ast.walk(function) if isinstance(n, (ast.Call, ast.Assign, ast.AugAssign))),
        key=lambda n: (n.lineno, n.col_offset),
    ):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == name):
                continue
            if node.func.attr in ("append", "insert") and any(map(_system_dict, node.args)):
                system_at = system_at or node
            elif node.func.attr == "extend" and node.args and system_at is not None:
                history = _target(node.args[0])
                if history is not None and history[0] == "self" and added is None:
                    added = (node, history[1])
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets) and (
                isinstance(node.value, ast.List) and any(map(_system_dict, node.value.elts))
            ):
                system_at = system_at or node
            if isinstance(node.value, ast.Name) and node.value.id == name:
                stored |= {t[1] for t in map(_target, node.targets) if t and t[0] == "self"}
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and system_at is not None
            and added is None
        ):
            history = _target(node.value)
            if history is not None and history[0] == "self":
                added = (node, history[1])
    return added if added is not None and added[1] in stored else None


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _owner(ctx: ModuleContext, function: ast.AST | None) -> ast.ClassDef | None:
    if function is None:
        return None
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.ClassDef) and function in node.body:
            return node
    return None


def _grown(cls: ast.ClassDef, attr: str) -> bool:
    """A method of ``cls`` (not its constructor) adds to ``self.<attr>``: the history grows."""
    for name, method in _methods(cls).items():
        if name in INIT_METHODS:
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend")
                and _target(node.func.value) == ("self", attr)
            ):
                return True
            if (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and _target(node.target) == ("self", attr)
            ):
                return True
            if (
                isinstance(node, ast.Assign)
                and any(_target(t) == ("self", attr) for t in node.targets)
                and _added_to(node.value)
            ):
                # ``self.history = trimmed + [reply]``: stored back with a message added
                return True
    return False


def _added_to(expr: ast.expr) -> bool:
    """A list of another's messages with more after them: ``kept + [turn]``, ``[*kept,
    turn]``."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return isinstance(expr.right, ast.List) and bool(expr.right.elts)
    return (
        isinstance(expr, ast.List)
        and len(expr.elts) > 1
        and isinstance(expr.elts[0], ast.Starred)
        and not any(isinstance(e, ast.Starred) for e in expr.elts[1:])
    )


def _negative(lower: ast.expr | None) -> bool:
    """``-n``, ``-2 * n``: a lower bound counted from the end."""
    if isinstance(lower, ast.BinOp) and isinstance(lower.op, ast.Mult):
        lower = lower.left
    return isinstance(lower, ast.UnaryOp) and isinstance(lower.op, ast.USub)


def _stored_windows(
    cls: ast.ClassDef,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    expr: ast.expr,
    out: dict[tuple[int, int], tuple[ast.expr | ast.stmt, str, Trim | None]],
    depth: int = 0,
    visited: set[tuple[int, str]] | None = None,
    helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
    classes: tuple[ast.ClassDef, ...] = (),
) -> None:
    """The windows ``self.<attr>[-n:]`` of a history a method of ``cls`` adds to, whose
    messages make up ``expr`` (in ``function``): followed through local names (assigned,
    added to, extended, appended, a loop over them), the methods of ``cls`` that return them
    and the callers that pass them to ``function``'s parameter (methods of ``cls``, and methods
    of the other ``classes`` of the module that call it on an instance of ``cls`` they keep,
    ``self.llm.run(...)`` with ``self.llm = Client()``). A loop that appends only the
    newest n messages of ``self.<attr>`` (``_loop_window``) is such a window too."""
    if depth > 6:
        return
    step = depth + 1
    visited = set() if visited is None else visited
    if isinstance(expr, ast.Subscript):
        target = _target(expr.value)
        if (
            isinstance(expr.slice, ast.Slice)
            and expr.slice.upper is None
            and _negative(expr.slice.lower)
            and target is not None
            and target[0] == "self"
            and _grown(cls, target[1])
        ):
            out.setdefault((expr.lineno, expr.col_offset), (expr, target[1], None))
        return
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        _stored_windows(cls, function, expr.left, out, step, visited, helpers, classes)
        _stored_windows(cls, function, expr.right, out, step, visited, helpers, classes)
        return
    if isinstance(expr, (ast.List, ast.Tuple)):
        for elt in expr.elts:
            if isinstance(elt, ast.Starred):
                _stored_windows(cls, function, elt.value, out, step, visited, helpers, classes)
        return
    if isinstance(expr, ast.Call):
        func = expr.func
        trim = _trimmed(cls, expr, helpers or {})
        if trim is not None:
            # also of the history with the new turn added (``trim(self.history + [turn])``)
            target = _head(trim.argument)
            if target is not None and target[0] == "self" and _grown(cls, target[1]):
                out.setdefault((expr.lineno, expr.col_offset), (expr, target[1], trim))
            return
        if isinstance(func, ast.Name) and func.id == "list" and len(expr.args) == 1:
            _stored_windows(cls, function, expr.args[0], out, step, visited, helpers, classes)
        elif isinstance(func, ast.Attribute) and func.attr == "copy" and not expr.args:
            _stored_windows(cls, function, func.value, out, step, visited, helpers, classes)
        elif _target(func) == ("self", getattr(func, "attr", "")) and not expr.args:
            method = _methods(cls).get(getattr(func, "attr", ""))
            if (
                method is not None
                and method.name not in INIT_METHODS
                and (id(method), "") not in visited
            ):
                visited.add((id(method), ""))
                for node in ast.walk(method):
                    if isinstance(node, ast.Return) and node.value is not None:
                        _stored_windows(
                            cls, method, node.value, out, step, visited, helpers, classes
                        )
        return
    if not isinstance(expr, ast.Name):
        return
    name = expr.id
    if (id(function), name) in visited:
        return
    visited.add((id(function), name))
    if _is_parameter(function, ("name", name)):
        args = function.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        static = any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list
        )
        index = positional.index(name) - (not static) if name in positional else None
        for caller_name, caller in _methods(cls).items():
            if caller_name in INIT_METHODS:
                continue
            for node in ast.walk(caller):
                if not (
                    isinstance(node, ast.Call) and _target(node.func) == ("self", function.name)
                ):
                    continue
                passed = [k.value for k in node.keywords if k.arg == name]
                if index is not None and 0 <= index < len(node.args):
                    passed.append(node.args[index])
                for value in passed:
                    if not isinstance(value, ast.Starred):
                        _stored_windows(cls, caller, value, out, step, visited, helpers, classes)
        if static or index is None:
            return
        for other in classes:
            if other is cls:
                continue
            holders = _instances(other, cls.name)
            for caller_name, caller in _methods(other).items():
                if not holders or caller_name in INIT_METHODS:
                    continue
                for node in ast.walk(caller):
                    if not (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and node.func.attr == function.name
                        and _target(node.func.value) in holders
                    ):
                        continue
                    passed = [k.value for k in node.keywords if k.arg == name]
                    if 0 <= index < len(node.args) and not any(
                        isinstance(a, ast.Starred) for a in node.args[: index + 1]
                    ):
                        passed.append(node.args[index])
                    for value in passed:
                        _stored_windows(other, caller, value, out, step, visited, helpers, classes)
        return
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ) or (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            _stored_windows(cls, function, node.value, out, step, visited, helpers, classes)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and len(node.args) == 1
        ):
            if node.func.attr == "extend" or _loop_target(function, node.args[0]):
                _stored_windows(cls, function, node.args[0], out, step, visited, helpers, classes)
            elif node.func.attr == "append":
                kept = _loop_window(function, node)
                if kept is not None and _grown(cls, kept[1]):
                    out.setdefault((kept[0].lineno, kept[0].col_offset), (*kept, None))
        elif (
            isinstance(node, (ast.For, ast.AsyncFor))
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            _stored_windows(cls, function, node.iter, out, step, visited, helpers, classes)


def _instances(cls: ast.ClassDef, kept: str) -> set[Target]:
    """The attributes ``self.<x>`` that methods of ``cls`` bind only to a new ``kept(...)``
    object of the module's class ``kept``."""
    binds: dict[Target, bool] = {}
    for method in _methods(cls).values():
        for node in ast.walk(method):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for item in targets:
                target = _target(item)
                if target is None or target[0] != "self":
                    continue
                made = (
                    isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name)
                    and node.value.func.id == kept
                )
                binds[target] = binds.get(target, True) and made
    return {t for t, only in binds.items() if only}


def _loop_window(
    function: ast.FunctionDef | ast.AsyncFunctionDef, append: ast.Call
) -> tuple[ast.If, str] | None:
    """``append`` (``msgs.append(m)``) adds only the newest n messages of ``self.<attr>``,
    one by one, as ``msgs.extend(self.<attr>[-n:])`` would: its argument is the element ``m``
    of ``for i, m in enumerate(self.<attr>)`` (or its part of ``enumerate(zip(self.<attr>,
    ...))``), and the loop's body either starts the turn with ``if i < len(self.<attr>) - n:
    continue`` or appends under ``if i >= len(self.<attr>) - n:``, where ``n`` is a positive
    whole number or a local name bound once to one (``last_num = 3``). Returns that ``if`` and
    the attribute; None for any other shape."""
    element = append.args[0] if len(append.args) == 1 and not append.keywords else None
    if not isinstance(element, ast.Name):
        return None
    for loop in ast.walk(function):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.orelse:
            continue
        source = _enumerated_source(loop, element.id)
        if source is None or not any(n is append for n in ast.walk(loop)):
            continue  # another loop's window (one only logged) is not what ``append`` adds
        index, attr = source
        if any(
            isinstance(n, ast.Name)
            and n.id in (index, element.id)
            and isinstance(n.ctx, (ast.Store, ast.Del))
            for stmt in loop.body
            for n in ast.walk(stmt)
        ):
            return None
        for stmt in loop.body:
            holds = any(n is append for n in ast.walk(stmt))
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and not holds
                and len(stmt.body) == 1
                and isinstance(stmt.body[0], ast.Continue)
                and _before_window(function, stmt.test, index, attr, ast.Lt)
            ):
                return stmt, attr
            if holds:
                if (
                    isinstance(stmt, ast.If)
                    and not stmt.orelse
                    and any(n is append for b in stmt.body for n in ast.walk(b))
                    and _before_window(function, stmt.test, index, attr, ast.GtE)
                ):
                    return stmt, attr
                return None
    return None


def _enumerated_source(loop: ast.For | ast.AsyncFor, element: str) -> tuple[str, str] | None:
    """For ``for i, m in enumerate(self.<attr>)`` and ``element`` ``m`` (or ``for i, (m, a)
    in enumerate(zip(self.<attr>, ...))``, ``m`` taken from ``self.<attr>``): the index name
    and the attribute."""
    target, call = loop.target, loop.iter
    if not (
        isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[0], ast.Name)
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "enumerate"
        and len(call.args) == 1
        and not call.keywords
    ):
        return None
    index, item, sequence = target.elts[0].id, target.elts[1], call.args[0]
    if (
        isinstance(item, ast.Tuple)
        and isinstance(sequence, ast.Call)
        and isinstance(sequence.func, ast.Name)
        and sequence.func.id == "zip"
        and len(sequence.args) == len(item.elts)
        and all(k.arg == "strict" for k in sequence.keywords)
    ):
        for part, zipped in zip(item.elts, sequence.args, strict=True):
            if isinstance(part, ast.Name) and part.id == element:
                item, sequence = part, zipped
                break
    held = _target(sequence)
    if isinstance(item, ast.Name) and item.id == element and held and held[0] == "self":
        return index, held[1]
    return None


def _before_window(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    test: ast.expr,
    index: str,
    attr: str,
    op: type[ast.cmpop],
) -> bool:
    """``test`` is ``index <op> len(self.<attr>) - n``, ``n`` a positive whole number (or a
    local name of ``function`` bound once to one)."""
    if not (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == index
        and len(test.ops) == 1
        and isinstance(test.ops[0], op)
    ):
        return False
    bound = test.comparators[0]
    if not (
        isinstance(bound, ast.BinOp)
        and isinstance(bound.op, ast.Sub)
        and isinstance(bound.left, ast.Call)
        and isinstance(bound.left.func, ast.Name)
        and bound.left.func.id == "len"
        and len(bound.left.args) == 1
        and _target(bound.left.args[0]) == ("self", attr)
    ):
        return False
    size = bound.right
    if isinstance(size, ast.Name):
        value = fixed_locals(function).get(size.id)
    elif isinstance(size, ast.Constant):
        value = size.value
    else:
        return False
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _loop_target(function: ast.AST, value: ast.expr) -> bool:
    """``value`` is the name a ``for`` of ``function`` binds (each element appended)."""
    return isinstance(value, ast.Name) and any(
        isinstance(node, (ast.For, ast.AsyncFor))
        and isinstance(node.target, ast.Name)
        and node.target.id == value.id
        for node in ast.walk(function)
    )


@dataclass(frozen=True)
class Trim:
    """A call of a helper that returns a window of the newest messages of its list argument
    (``_budget_trim``): the argument it trims, the helper's name, the parameter and the
    statement where its walk stops."""

    argument: ast.expr
    helper: str
    parameter: str
    stop: ast.stmt


def _module_functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions defined at the top level of a module, by name."""
    body = tree.body if isinstance(tree, ast.Module) else []
    return {f.name: f for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _whole_number(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _whole_number(node.operand)
        return None if inner is None else -inner
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def _walked_backwards(loop: ast.For | ast.AsyncFor, params: set[str]) -> str | None:
    """``for m in reversed(p)`` (or ``reversed(p[:-1])``, ``reversed(p[1:])``) over a
    parameter ``p``: the parameter, walked from its newest element. A slice that ends at a
    fixed index (``p[:10]``) walks the same elements every call and is no window."""
    walk = loop.iter
    if not (
        isinstance(walk, ast.Call)
        and isinstance(walk.func, ast.Name)
        and walk.func.id == "reversed"
        and len(walk.args) == 1
        and not walk.keywords
    ):
        return None
    sequence = walk.args[0]
    if isinstance(sequence, ast.Subscript) and isinstance(sequence.slice, ast.Slice):
        cut = sequence.slice
        lower, upper = _whole_number(cut.lower), _whole_number(cut.upper)
        if (
            cut.step is not None
            or (cut.lower is not None and (lower is None or lower < 0))
            or (cut.upper is not None and (upper is None or upper >= 0))
        ):
            return None
        sequence = sequence.value
    if isinstance(sequence, ast.Name) and sequence.id in params:
        return sequence.id
    return None


def _kept_into(stmt: ast.stmt, element: str) -> str | None:
    """``kept.insert(0, m)`` or ``kept.append(m)`` of the loop's element ``m``: ``kept``."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not (
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and not call.keywords
    ):
        return None
    args = call.args
    if call.func.attr == "append" and len(args) == 1:
        added = args[0]
    elif call.func.attr == "insert" and len(args) == 2 and _whole_number(args[0]) == 0:
        added = args[1]
    else:
        return None
    return call.func.value.id if isinstance(added, ast.Name) and added.id == element else None


def _stops_at_limit(stmt: ast.stmt, kept: str) -> bool:
    """``if <an ordering comparison>: break`` (or ``return kept``): the walk stops once a
    budget or count is passed (a role test, ``if m["role"] == "system": break``, is no
    limit)."""
    return (
        isinstance(stmt, ast.If)
        and any(
            isinstance(b, ast.Break)
            or (isinstance(b, ast.Return) and b.value is not None and _made_from(b.value, kept))
            for b in stmt.body
        )
        and any(
            isinstance(n, ast.Compare)
            and any(isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)) for op in n.ops)
            for n in ast.walk(stmt.test)
        )
    )


def _made_from(expr: ast.expr, name: str) -> bool:
    """``expr`` is the list ``name``, reversed or joined to other messages (``kept``,
    ``kept[::-1]``, ``list(reversed(kept))``, ``[first, *kept]``, ``[first] + kept``)."""
    if isinstance(expr, ast.Name):
        return expr.id == name
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        cut = expr.slice
        return (
            cut.lower is None
            and cut.upper is None
            and _whole_number(cut.step) == -1
            and _made_from(expr.value, name)
        )
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id in ("list", "reversed")
        and len(expr.args) == 1
        and not expr.keywords
    ):
        return _made_from(expr.args[0], name)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _made_from(expr.left, name) or _made_from(expr.right, name)
    if isinstance(expr, ast.List):
        return any(isinstance(e, ast.Starred) and _made_from(e.value, name) for e in expr.elts)
    return False


def _budget_trim(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ast.stmt] | None:
    """A helper that returns a window of the newest elements of a list parameter: it walks the
    parameter from its end (``for m in reversed(history)``), adds each element to a fresh local
    list (``kept.insert(0, m)`` or ``kept.append(m)``, not under a condition), stops once a
    limit is passed (``if total + n > budget: break``, before or after the add) and returns
    that list (``kept``, ``kept[::-1]``, ``list(reversed(kept))``, or with other messages).
    Returns the parameter and the ``if`` that stops the walk; None for any other shape (a walk
    without a stop keeps every element, a check that raises trims nothing)."""
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    for loop in ast.walk(function):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.target, ast.Name):
            continue
        param = _walked_backwards(loop, params)
        if param is None:
            continue
        kept = {k for k in (_kept_into(s, loop.target.id) for s in loop.body) if k is not None}
        if len(kept) != 1:
            continue
        (name,) = kept
        stop = next((s for s in loop.body if _stops_at_limit(s, name)), None)
        if stop is None:
            continue
        binds = [
            n
            for n in ast.walk(function)
            if (
                isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
            )
            or (isinstance(n, ast.AnnAssign) and _target(n.target) == ("name", name))
        ]
        fresh = bool(binds) and all(
            (isinstance(n, ast.AnnAssign) or len(n.targets) == 1)
            and n.value is not None
            and (
                isinstance(n.value, ast.List)
                or (
                    isinstance(n.value, ast.Call)
                    and isinstance(n.value.func, ast.Name)
                    and n.value.func.id == "list"
                    and not n.value.args
                )
            )
            for n in binds
        )
        if name in params or not fresh:
            continue
        if any(
            isinstance(n, ast.Return) and n.value is not None and _made_from(n.value, name)
            for n in ast.walk(function)
        ):
            return param, stop
    return None


def _trimmed(
    cls: ast.ClassDef | None,
    call: ast.Call,
    helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> Trim | None:
    """``call`` calls a function of the module (``trim(history)``) or a method of ``cls``
    (``self._trim(self.history)``) that returns a window of the newest elements of one of its
    arguments (``_budget_trim``): that argument, as passed."""
    func = call.func
    static = True
    if isinstance(func, ast.Name):
        helper = helpers.get(func.id)
    elif cls is not None and _target(func) == ("self", getattr(func, "attr", "")):
        helper = _methods(cls).get(getattr(func, "attr", ""))
        static = helper is not None and any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in helper.decorator_list
        )
    else:
        return None
    if helper is None:
        return None
    found = _budget_trim(helper)
    if found is None:
        return None
    param, stop = found
    passed = [k.value for k in call.keywords if k.arg == param]
    positional = [a.arg for a in [*helper.args.posonlyargs, *helper.args.args]]
    if param in positional:
        index = positional.index(param) - (not static)
        if 0 <= index < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]
        ):
            passed.append(call.args[index])
    if len(passed) != 1:
        return None
    return Trim(passed[0], helper.name, param, stop)


def _trim_window(
    node: ast.AST,
    target: Target,
    cls: ast.ClassDef | None,
    helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
) -> str | None:
    """``history = trim(history)`` with a helper that keeps the newest messages that fit a
    limit (``_budget_trim``): a window stored back, as ``history = history[-20:]``."""
    if not (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and any(_target(t) == target for t in node.targets)
    ):
        return None
    trim = _trimmed(cls, node.value, helpers)
    if trim is None or _target(trim.argument) != target:
        return None
    return (
        f"a window of the newest messages kept by `{trim.helper}` (it walks them from the end "
        f"and stops at a limit, line {trim.stop.lineno})"
    )


def _straight(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` that run, in order, on every pass that gets past them: the
    body itself and, inside it, the bodies of ``try`` and ``with`` statements."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.Try, ast.With, ast.AsyncWith)):
            yield from _straight(stmt.body)


def _loop_of(scope: ast.AST, node: ast.AST) -> ast.For | ast.AsyncFor | ast.While | None:
    """The innermost loop in ``scope`` (``scope`` included) whose body holds ``node``."""
    found: ast.For | ast.AsyncFor | ast.While | None = None
    for loop in ast.walk(scope):
        if (
            isinstance(loop, (ast.For, ast.AsyncFor, ast.While))
            and loop is not node
            and any(n is node for n in ast.walk(loop))
            and (found is None or any(n is loop for n in ast.walk(found)))
        ):
            found = loop
    return found


def _fixed_cut_of_fresh(scope: ast.AST, node: ast.AST, target: Target) -> bool:
    """``messages = messages[1:]`` (a cut from a fixed index) after ``messages = build(...)``
    earlier in the same pass of the innermost loop around it, from a value that does not read
    ``messages``: every pass cuts the same leading messages off a list made afresh, so the
    list sent keeps its prefix (no window moves)."""
    if not (isinstance(node, ast.Assign) and target[0] == "name"):
        return False
    cuts = [
        sub
        for sub in ast.walk(node.value)
        if isinstance(sub, ast.Subscript)
        and isinstance(sub.slice, ast.Slice)
        and _target(sub.value) == target
    ]
    for cut in cuts:
        assert isinstance(cut.slice, ast.Slice)
        lower = _whole_number(cut.slice.lower)
        if cut.slice.step is not None or lower is None or lower < 0:
            return False
    if not cuts:
        return False
    loop = _loop_of(scope, node)
    if loop is None:
        return False
    return any(
        isinstance(stmt, ast.Assign)
        and stmt.lineno < node.lineno
        and any(_target(t) == target for t in stmt.targets)
        and not any(isinstance(n, ast.expr) and _target(n) == target for n in ast.walk(stmt.value))
        for stmt in _straight(loop.body)
    )


_COPIES = frozenset({"list", "copy", "deepcopy"})


def _new_list(value: ast.expr, name: str) -> bool:
    """``value`` makes a new list that does not read ``name``: a list display or
    comprehension, ``a + b``, a slice, ``list(...)``, ``copy(...)``/``deepcopy(...)`` or
    ``x.copy()``."""
    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
        return False
    if isinstance(value, (ast.List, ast.ListComp)):
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        return True
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return called in _COPIES
    return False


def _binds(stmt: ast.stmt, name: str) -> bool:
    """``stmt`` (or a statement inside it) may bind ``name``."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
    return False


def _fixed_insert_of_fresh(scope: ast.AST, node: ast.AST, target: Target) -> bool:
    """``messages.insert(0, system)`` (at a constant index from the start) into a local list
    bound to a new list earlier in the same pass of the innermost loop around it (a binding
    that runs before the insert on every pass: in the loop body, or in an enclosing block of
    the insert, with no inner loop or function between): every pass puts the message at the
    same place of a list made afresh, so the earlier messages keep their order."""
    if not (
        target[0] == "name"
        and isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "insert"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and type(node.args[0].value) is int
        and node.args[0].value >= 0
    ):
        return False
    loop = _loop_of(scope, node)
    if loop is None:
        return False
    name = target[1]
    # the blocks from the loop body down to the statement that holds the insert
    path: list[tuple[list[ast.stmt], int]] = []
    blocks: list[list[ast.stmt]] = [loop.body]
    while blocks:
        block = blocks.pop()
        for i, stmt in enumerate(block):
            if not any(n is node for n in ast.walk(stmt)):
                continue
            path.append((block, i))
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                return False  # an inner loop may insert more than once a pass
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return False
            if isinstance(stmt, ast.If):
                blocks.extend([stmt.body, stmt.orelse])
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                blocks.append(stmt.body)
            elif isinstance(stmt, ast.Try):
                blocks.extend([stmt.body, stmt.orelse, stmt.finalbody])
                blocks.extend(h.body for h in stmt.handlers)
            break
    for block, index in reversed(path):
        for stmt in reversed(block[:index]):
            if not _binds(stmt, name):
                continue
            return (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == name
                and _new_list(stmt.value, name)
            )
    return False


def _without_calls(stmt: ast.stmt) -> bool:
    """An assignment that reads the reply without calling anything (cannot raise a retry)."""
    return isinstance(stmt, (ast.Assign, ast.AnnAssign)) and not any(
        isinstance(n, ast.Call) for n in ast.walk(stmt)
    )


def _attempts(body: list[ast.stmt]) -> Iterator[tuple[ast.stmt, list[ast.stmt]]]:
    """The statements of a loop's ``body`` that may hold an attempt, each with the statements
    after it in its block: the body itself and, inside it, the bodies of ``try`` and ``with``
    statements and both branches of an ``if`` (``if stream: try: ...``)."""
    for i, stmt in enumerate(body):
        yield stmt, body[i + 1 :]
        if isinstance(stmt, (ast.Try, ast.With, ast.AsyncWith)):
            yield from _attempts(stmt.body)
        elif isinstance(stmt, ast.If):
            yield from _attempts(stmt.body)
            yield from _attempts(stmt.orelse)


def _leaves(rest: list[ast.stmt]) -> bool | None:
    """True where ``rest`` breaks or returns after only call-free assignments, False where a
    statement that may call comes first, None where it ends without either."""
    for after in rest:
        if isinstance(after, (ast.Break, ast.Return)):
            return True
        if not _without_calls(after):
            return False
    return None


def _retry_loop(loop: ast.stmt, call: ast.Call) -> bool:
    """``loop`` (the innermost loop around ``call``) repeats ``call`` only when it raised: the
    call sits in the body of a ``try`` of the loop (also inside an ``if`` of it) that has
    handlers, and right after the statement that holds the call (only call-free assignments
    between) the ``try`` body breaks or returns (or its ``else`` does, or, where the body ends
    there, the statement after the ``try``). A failed request cached nothing, so what the
    retry sends is no next turn."""
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        return False
    for stmt, following in _attempts(loop.body):
        if not (isinstance(stmt, ast.Try) and stmt.handlers):
            continue
        for i, held in enumerate(stmt.body):
            if not any(n is call for n in ast.walk(held)):
                continue
            if isinstance(held, ast.Return):
                return True
            leaves = _leaves(stmt.body[i + 1 :])
            if leaves is None:
                leaves = _leaves(stmt.orelse[:1]) if stmt.orelse else _leaves(following[:1])
            return bool(leaves)
    return False


def _closing_breakpoints(ctx: ModuleContext, sink: SinkCall) -> set[int] | None:
    """The ``"cache_control"`` keys written into ``sink``'s own tools and system blocks (a key
    of one of them, or an item store into the list given as ``tools=`` or ``system=``, also
    through a dict the request splats: ``client.messages.stream(**kwargs)`` after ``kwargs =
    {"system": blocks, ...}``); None where ``sink`` is no Anthropic Messages request, asks for
    automatic caching (a top-level ``cache_control``) or puts a breakpoint on a message."""
    if sink.api != "anthropic" or "cache_control" in sink.params:
        return None
    own: set[int] = set()
    lists: set[str] = set()
    for block in sink.blocks:
        if block.region == "messages":
            if block.breakpoint is not None:
                return None
            continue
        if block.bp_node is not None:
            own.add(id(block.bp_node))
        if isinstance(block.node, ast.Name):
            lists.add(block.node.id)
    given = [(k.arg, k.value) for k in sink.node.keywords]
    splats = {
        k.value.id for k in sink.node.keywords if k.arg is None and isinstance(k.value, ast.Name)
    }
    for node in ast.walk(ctx.tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node.value, ast.Dict) and any(
            isinstance(t, ast.Name) and t.id in splats for t in targets
        ):
            given.extend(
                (key.value, value)
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            )
    lists.update(v.id for k, v in given if k in ("system", "tools") and isinstance(v, ast.Name))
    for node in ast.walk(ctx.tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in lists and node.value is not None:
                # the list itself, written out where it is bound
                own.update(id(sub) for sub in ast.walk(node.value) if _names_breakpoint(sub))
            base = target
            while isinstance(base, ast.Subscript):
                base = base.value
            if (
                isinstance(target, ast.Subscript)
                and isinstance(base, ast.Name)
                and base.id in lists
            ):
                own.add(id(target.slice))
    return {i for i in own if i in _breakpoint_keys(ctx)}


def _names_breakpoint(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cache_control"


def _breakpoint_keys(ctx: ModuleContext) -> set[int]:
    """The ``"cache_control"`` constants of the module that put a breakpoint (not one taken
    out again: ``.pop("cache_control")``, ``del block["cache_control"]``)."""
    known: set[int] | None = ctx.tree.__dict__.get("_promptcache_breakpoint_keys")
    if known is None:
        taken: set[int] = set()
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "pop" and node.args:
                    taken.add(id(node.args[0]))
            elif isinstance(node, ast.Delete):
                taken.update(id(t.slice) for t in node.targets if isinstance(t, ast.Subscript))
        known = {
            id(node)
            for node in ast.walk(ctx.tree)
            if _names_breakpoint(node) and id(node) not in taken
        }
        ctx.tree.__dict__["_promptcache_breakpoint_keys"] = known
    return known


def _uncached_messages(ctx: ModuleContext) -> set[int]:
    """The ids of the module's Anthropic Messages requests that cache none of their messages:
    each puts a breakpoint on its own tools or system blocks, none on a message and none at
    the top level (automatic caching), and every breakpoint written in the module closes the
    tools or system blocks of such a request (none on a message anywhere, none a
    ``cache_control=`` keyword). Anthropic reads and writes the cache only up to a breakpoint
    (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, checked
    2026-12-07), so a window over such a request's history loses nothing cached. A request
    with no breakpoint at all is not taken: it caches nothing yet, and the window is what
    would undo the message breakpoint its author adds next."""
    closing = {id(sink): _closing_breakpoints(ctx, sink) for sink in ctx.sinks}
    if any(isinstance(n, ast.keyword) and n.arg == "cache_control" for n in ast.walk(ctx.tree)):
        return set()
    placed: set[int] = set()
    for keys in closing.values():
        placed.update(keys or ())
    if _breakpoint_keys(ctx) - placed:
        return set()  # a breakpoint written elsewhere: on a message, or by a helper
    by_id = {id(sink): sink for sink in ctx.sinks}
    return {key for key, keys in closing.items() if keys and not _handed_on(ctx, by_id[key])}


def _handed_on(ctx: ModuleContext, sink: SinkCall) -> bool:
    """Whether the history ``sink`` sends, or one of its messages, is given to a call other
    than ``sink`` itself (``len``/``print`` aside) in the code around it: a helper of another
    module may put a breakpoint on a message (``mark_last(history)``)."""
    target = _target(sink.messages) if sink.messages is not None else None
    if target is None:
        return True
    scope = sink.function if sink.function is not None else ctx.tree
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call) or node is sink.node:
            continue
        if isinstance(node.func, ast.Name) and node.func.id in ("len", "print"):
            continue
        for arg in (*node.args, *(k.value for k in node.keywords)):
            base = arg.value if isinstance(arg, ast.Starred) else arg
            while isinstance(base, ast.Subscript):
                base = base.value
            if _target(base) == target:
                return True
    return False


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    seen: set[tuple[int, int]] = set()
    helpers = _module_functions(ctx.tree)
    uncached = _uncached_messages(ctx)
    for sink in ctx.sinks:
        if sink.messages is None or id(sink) in uncached:
            continue
        if isinstance(sink.messages, ast.Name) and sink.function is not None:
            found = _prepended(sink.function, sink.messages.id)
            if found is not None:
                node, attr = found
                key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
                if key not in seen:
                    seen.add(key)
                    yield ctx.diagnostic(
                        "PC016",
                        f"a system message is put in front of the stored history `self.{attr}` on "
                        f"every call, and `{sink.messages.id}` is stored back as it: each turn "
                        "the history gains one more system message at its start, so no request "
                        "shares a prefix with the one before: add the system message only while "
                        "the history is empty",
                        node,
                        Severity.WARNING,
                        (Related(ctx.location(sink.node), "the history is sent here"),),
                    )
        cls = _owner(ctx, sink.function)
        if (
            cls is not None
            and isinstance(sink.function, (ast.FunctionDef, ast.AsyncFunctionDef))
            and sink.function.name not in INIT_METHODS
        ):
            windows: dict[tuple[int, int], tuple[ast.expr | ast.stmt, str, Trim | None]] = {}
            _stored_windows(
                cls,
                sink.function,
                sink.messages,
                windows,
                helpers=helpers,
                classes=tuple(n for n in ast.walk(ctx.tree) if isinstance(n, ast.ClassDef)),
            )
            for key, (node, attr, trim) in sorted(windows.items()):
                if key in seen:
                    continue
                seen.add(key)
                sent = Related(ctx.location(sink.node), "the history is sent here")
                if trim is None:
                    yield ctx.diagnostic(
                        "PC016",
                        f"a sliding window of the stored history `self.{attr}` (its newest "
                        f"messages) makes up the messages sent to {sink.label}, and the history "
                        "grows every turn: once it is longer than the window, the oldest "
                        "message kept changes on every call and the cache misses from it on: "
                        "send the whole history, or compact rarely",
                        node,
                        Severity.WARNING,
                        (sent,),
                    )
                    continue
                yield ctx.diagnostic(
                    "PC016",
                    f"`{trim.helper}` keeps a window of the newest messages of the stored "
                    f"history `self.{attr}` (it walks them from the end and stops at a limit), "
                    f"and that window makes up the messages sent to {sink.label} while the "
                    "history grows every turn: once the history passes the limit, the oldest "
                    "message kept changes on every call and the cache misses from it on: send "
                    "the whole history, or compact rarely",
                    node,
                    Severity.WARNING,
                    (
                        Related(
                            ctx.location(trim.stop),
                            f"`{trim.helper}` walks `{trim.parameter}` from its newest message "
                            "and stops here, dropping the older ones",
                        ),
                        sent,
                    ),
                )
        target = _target(sink.messages)
        if target is None:
            continue
        loops = list(sink.loops)
        if loops and _retry_loop(loops[-1], sink.node):
            # a retry loop repeats the request only when it failed: no turn loop
            loops.pop()
        scopes: list[ast.AST] = [loops[0]] if loops else []
        parameter = False
        before: ast.Call | None = None
        if not scopes:
            scopes = _scopes(ctx, sink.function, target)
        if not scopes and sink.function is not None and _is_parameter(sink.function, target):
            # a per-turn function handed the whole history: only a window that keeps the last
            # N messages moves every turn (a fixed cut such as messages[1:] does not), and only
            # one written before the call: no loop encloses it, and the window rebinds a local
            # name, so one after it (a retry in an except handler) never reaches what it sends;
            # so does a pop of the oldest messages repeated while the history is over a limit
            scopes, parameter, before = [sink.function], True, sink.node
        drops: set[int] = set()
        kept: frozenset[str] = frozenset()
        for scope in scopes:
            if parameter:
                drops = _limit_drops(scope, target)
            else:
                kept = _window_names(scope, target, cls, helpers)
            for node in ast.walk(scope):
                if parameter:
                    why = _window(node, target) or (
                        "a trim to a limit that drops the oldest messages"
                        if id(node) in drops
                        else None
                    )
                else:
                    why = _rewrite(node, target, kept)
                why = why or _trim_window(node, target, cls, helpers)
                if why is None or (
                    before is None
                    and (
                        _fixed_cut_of_fresh(scope, node, target)
                        or _fixed_insert_of_fresh(scope, node, target)
                    )
                ):
                    continue
                if before is not None and _after(node, before):
                    continue
                key = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
                if key in seen:
                    continue
                seen.add(key)
                yield ctx.diagnostic(
                    "PC016",
                    f"{why} in `{target[1]}`, which is re-sent to {sink.label} every turn; "
                    "the cache misses from the first changed message on: append only, or "
                    "compact rarely",
                    node,
                    Severity.WARNING,
                    (Related(ctx.location(sink.node), "the history is sent here"),),
                )
