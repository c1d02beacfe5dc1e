"""Conversations a function starts and holds: a list of messages written out in place, then sent
and grown by a loop of the same function.

```python
conversation = [
    {"role": "system", "content": system_prompt},
    {"role": "user", "content": task},
]
for _ in range(max_turns):
    reply = llm.chat(conversation)
    conversation.append({"role": "assistant", "content": reply})
```

Every request of the loop resends the messages the list was made with, unchanged: what they
hold (a time, a run id) was written once into this conversation, frozen there, and changes only
with the next conversation, which starts from no history at all. The analysis takes it as
computed once, as a field set by ``__init__`` is once per object (``Value.pinned``; a
parameter's fact gets granularity ``"once"``, so that a caller's argument is pinned too).

What is passed beside such a conversation to the calls of its loop is held with it
(``held_companions``): a system text bound once before the loop and given as Anthropic's
``system=`` or the Responses API's ``instructions=`` while ``messages`` (or ``input``) grows,

```python
system = f"You are a worker. Now: {datetime.now():%H:%M}."
messages = [{"role": "user", "content": task}]
while True:
    reply = client.messages.create(model=..., system=system, messages=messages)
    messages.append({"role": "assistant", "content": reply.content})
```

is resent unchanged with the same growing list, so what it holds is this conversation's too
(so are system blocks bound once: ``system = [{"type": "text", "text": ..., "cache_control":
...}]``). The list may start empty there (``messages = []``, then written out in place). The
name must be bound once, outside loops (or be a parameter never rebound), and read nowhere but
as a bare argument of a call of the loop that also takes the held list, or by ``print``,
``len`` or a logger's method: a one-shot request given the same text, or text built from it,
keeps it reported.

The list may also start empty, or short, and be written out message by message before the
loop (``conversation.append({"role": "system", ...})``, ``insert(0, {...})``, ``+= [{...}]``;
``held_appends``): those messages are written once too.

Not such a conversation: a list that takes a history from elsewhere (``[system, *history]``,
``conversation.extend(self.history)`` before the loop), one rebound, or one whose messages are
replaced or moved (``conversation[0] = ...``, ``insert`` in the loop), or one made inside the
loop that sends it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

#: methods that add messages after the existing ones
_GROWS = frozenset({"append", "extend"})
#: methods that change which message is where in the list, or remove one
_REWRITES = frozenset({"insert", "pop", "remove", "clear", "reverse", "sort", "__setitem__"})
#: what adds messages written out in place before the loop that sends the conversation: an
#: ``insert`` there only places a message once (in the loop it moves the later ones: rewrites)
_ADDS = _GROWS | {"insert"}
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def held_conversations(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the list displays ``func`` binds a name to, once, outside any loop, whose
    elements are message dicts or constructor calls (no ``*splat``), where a later loop of
    ``func`` both passes the bare name to a call (the request, or a wrapper that sends it) and
    grows it (``append``, ``extend``, ``+=``), and nothing anywhere in ``func`` rebinds the
    name, grows it outside such a loop or rewrites its messages (item stores, ``insert``,
    ``pop`` ...). Found once per function (kept on the node)."""
    known: frozenset[int] | None = func.__dict__.get("_held_conversations")
    if known is None:
        known = func.__dict__["_held_conversations"] = frozenset(_find(func))
    return known


def held_contents(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the ``content`` values of the message dicts written out in the
    conversations ``func`` holds (``held_conversations``): a system message's text there is
    written once into the conversation, not sent afresh per request."""
    known: frozenset[int] | None = func.__dict__.get("_held_contents")
    if known is None:
        out: set[int] = set()
        appends = held_appends(func)
        for node in ast.walk(func):
            written: list[ast.expr] = []
            if isinstance(node, ast.List) and (
                id(node) in held_conversations(func) or id(node) in appends
            ):
                written = list(node.elts)
            elif isinstance(node, ast.Call) and id(node) in appends:
                written = list(node.args[-1:])
                if isinstance(node.func, ast.Attribute) and node.func.attr == "extend":
                    written = [
                        e for a in written if isinstance(a, (ast.List, ast.Tuple)) for e in a.elts
                    ]
            for element in written:
                if isinstance(element, ast.Dict):
                    out.update(
                        id(value)
                        for key, value in zip(element.keys, element.values, strict=True)
                        if isinstance(key, ast.Constant) and key.value == "content"
                    )
        known = func.__dict__["_held_contents"] = frozenset(out)
    return known


def held_appends(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of what adds messages written out in place to a conversation ``func`` holds,
    outside the loops that send it (``conversation.append({"role": "system", ...})`` after
    ``conversation = []``, ``insert(0, {...})``, ``extend([...])``: the calls; ``+= [...]``:
    the list added): written once into the conversation, as its list display is."""
    known: frozenset[int] | None = func.__dict__.get("_held_appends")
    if known is None:
        out: set[int] = set()
        for _, name, loops in _held_lists(func, _empty_or_messages):
            inside = {id(sub) for loop in loops for sub in ast.walk(loop)}
            for node, _ in _own(func):
                if id(node) in inside:
                    continue
                if isinstance(node, ast.AugAssign) and _is(node.target, name):
                    out.add(id(node.value))
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _ADDS
                    and _is(node.func.value, name)
                ):
                    out.add(id(node))
        known = func.__dict__["_held_appends"] = frozenset(out)
    return known


def held_companions(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int | str]:
    """What ``func`` passes beside a conversation it holds (module docstring): the ids of the
    values bound once, outside loops, to names read only as bare arguments of the calls of a
    holding loop that also take the held list, and the names of such parameters (never
    rebound). Found once per function (kept on the node)."""
    known: frozenset[int | str] | None = func.__dict__.get("_held_companions")
    if known is None:
        known = func.__dict__["_held_companions"] = frozenset(_find_companions(func))
    return known


def _own(node: ast.AST, in_loop: bool = False) -> list[tuple[ast.AST, bool]]:
    """Every node of ``node``'s own body (not of a nested function or class), each with
    whether it lies inside a loop of that body."""
    out: list[tuple[ast.AST, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(child, in_loop) for child in ast.iter_child_nodes(node)]
    while todo:
        current, looped = todo.pop()
        if isinstance(current, _SCOPES):
            continue
        out.append((current, looped))
        inner = looped or isinstance(current, _LOOPS)
        todo.extend((child, inner) for child in ast.iter_child_nodes(current))
    return out


def _message_list(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.List)
        and bool(node.elts)
        and all(isinstance(e, (ast.Dict, ast.Call)) for e in node.elts)
    )


def _find(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    return [id(value) for value, _, _ in _held_lists(func, _empty_or_messages)]


def _empty_or_messages(node: ast.expr) -> bool:
    return _message_list(node) or (isinstance(node, ast.List) and not node.elts)


def _find_companions(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int | str]:
    nodes = _own(func)
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    stores: dict[str, list[tuple[ast.AST, bool]]] = {}
    loads: dict[str, list[ast.Name]] = {}
    parents: dict[int, ast.AST] = {}
    declared: set[str] = set()
    for node, looped in nodes:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.setdefault(node.id, []).append(node)
            else:
                stores.setdefault(node.id, []).append((node, looped))
    found: list[int | str] = []
    dicts = _dicts(func)
    for _, conversation, loops in _held_lists(func, _empty_or_messages):
        calls = [
            node
            for loop in loops
            for node, _ in _own(loop)
            if isinstance(node, ast.Call) and any(_is(a, conversation) for a in _args(node, dicts))
        ]
        beside = {
            id(a)
            for call in calls
            for a in _args(call, dicts)
            if isinstance(a, ast.Name) and a.id != conversation
        }
        for call in calls:
            for arg in _args(call, dicts):
                if not isinstance(arg, ast.Name) or arg.id == conversation:
                    continue
                name = arg.id
                if name in declared or not all(
                    id(n) in beside or _only_shown(n, parents) for n in loads.get(name, [])
                ):
                    continue  # read elsewhere too: in a one-shot request, or built upon
                written = stores.get(name, [])
                if name in params:
                    if not written:
                        found.append(name)
                    continue
                if len(written) != 1 or written[0][1]:
                    continue
                stmt = parents.get(id(written[0][0]))
                if (
                    isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    and stmt.value is not None
                    and (isinstance(stmt, ast.AnnAssign) or len(stmt.targets) == 1)
                    and (stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0])
                    is written[0][0]
                    and stmt.lineno < min(loop.lineno for loop in loops)
                ):
                    found.append(id(stmt.value))
    return found


#: calls that only show or measure what they are given: a text logged or counted is not sent
_SHOWN = frozenset({"print", "len"})
_LOGGED = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def _only_shown(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """``node`` is an argument of ``print``/``len`` or of a logger's method
    (``log.debug("system: %s", system)``), also inside an f-string given to one."""
    child: ast.AST = node
    parent = parents.get(id(child))
    while isinstance(parent, (ast.FormattedValue, ast.JoinedStr)):
        child, parent = parent, parents.get(id(parent))
    if not isinstance(parent, ast.Call) or child is parent.func:
        return False
    func = parent.func
    if isinstance(func, ast.Name):
        return func.id in _SHOWN
    return isinstance(func, ast.Attribute) and func.attr in _LOGGED


def _held_lists(
    func: ast.FunctionDef | ast.AsyncFunctionDef, shape: Callable[[ast.expr], bool]
) -> list[tuple[ast.expr, str, list[ast.stmt]]]:
    """Each list display of ``shape`` that ``func`` binds a name to and holds
    (``held_conversations``), with the name and the loops that send and grow it."""
    nodes = _own(func)
    bindings: dict[str, list[tuple[ast.AST, bool]]] = {}
    for node, looped in nodes:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.NamedExpr):
            targets = [node.target]
        for target in targets:
            for written in ast.walk(target):
                if isinstance(written, ast.Name) and isinstance(written.ctx, ast.Store):
                    bindings.setdefault(written.id, []).append((node, looped))
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
    found: list[tuple[ast.expr, str, list[ast.stmt]]] = []
    for name, bound in bindings.items():
        if len(bound) != 1 or name in params:
            continue
        stmt, looped = bound[0]
        if looped or not isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(stmt, ast.Assign) and (
            len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name)
        ):
            continue
        value = stmt.value
        if value is None or not shape(value):
            continue
        loops = _holding_loops(func, name, stmt)
        if loops:
            found.append((value, name, loops))
    return found


def _holding_loops(
    func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, bound: ast.stmt
) -> list[ast.stmt]:
    """The loops after ``bound`` that send and grow ``name``, where nothing else in ``func``
    changes it (none where something does): outside such a loop it grows only by messages
    written out in place, in no other loop (``conversation.append({"role": "user", ...})``,
    not ``extend(self.history)`` nor a loop copying a history into it), no call takes it, no
    message of it is rewritten anywhere, and it is not ``global``/``nonlocal``."""
    nodes = _own(func)
    holding: list[ast.stmt] = [
        node
        for node, _ in nodes
        if isinstance(node, _LOOPS)
        and node.lineno > bound.lineno
        and _sends(node, name, _dicts(func))
        and _grows(node, name)
    ]
    if not holding:
        return []
    inside = {id(sub) for loop in holding for sub in ast.walk(loop)}
    for node, looped in nodes:
        held = id(node) in inside
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return []
        if (
            not held
            and isinstance(node, ast.Call)
            and any(_is(a, name) for a in (*node.args, *(k.value for k in node.keywords)))
        ):
            return []  # handed to a call outside the loop, which may add a history to it
        if isinstance(node, ast.AugAssign) and _is(node.target, name):
            if not held and (looped or not _written_out(node.value)):
                return []
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, ast.Subscript) and _is(_base(t), name) for t in targets):
                return []  # ``conversation[0] = ...``: a message replaced
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is(_base(node.func.value), name)
        ):
            method = node.func.attr
            if method == "insert" and _is(node.func.value, name) and not held and not looped:
                # a message placed once, before the loop (``insert(0, {"role": "system",
                # ...})``)
                added = node.args[1] if len(node.args) == 2 and not node.keywords else None
                if not isinstance(added, ast.Dict):
                    return []
            elif method in _REWRITES:
                return []
            elif method in _GROWS and not held:
                added = node.args[0] if len(node.args) == 1 and not node.keywords else None
                if (
                    looped
                    or added is None
                    or not (
                        isinstance(added, ast.Dict) if method == "append" else _written_out(added)
                    )
                ):
                    return []
    return holding


def _written_out(node: ast.expr) -> bool:
    """A list of message dicts written out in place (``[{"role": "user", ...}]``)."""
    return isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Dict) for e in node.elts
    )


def _is(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _base(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node


def _dicts(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.Dict]:
    """The names ``func`` binds once, to a dict display (``kwargs = {"system": system,
    "messages": messages}``), each with that display. Found once per function."""
    known: dict[str, ast.Dict] | None = func.__dict__.get("_held_dicts")
    if known is None:
        bound: dict[str, list[ast.AST]] = {}
        for node, _ in _own(func):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                bound.setdefault(node.id, []).append(node)
        known = {}
        for node, _ in _own(func):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if (
                    len(targets) == 1
                    and isinstance(targets[0], ast.Name)
                    and len(bound.get(targets[0].id, [])) == 1
                ):
                    known[targets[0].id] = node.value
        func.__dict__["_held_dicts"] = known
    return known


def _args(call: ast.Call, dicts: dict[str, ast.Dict]) -> list[ast.expr]:
    """What ``call`` is given: its arguments, and the values of a dict display it splats
    (``create(**kwargs)`` after ``kwargs = {"system": system, "messages": messages}``)."""
    out: list[ast.expr] = [*call.args]
    for keyword in call.keywords:
        splat = dicts.get(keyword.value.id) if isinstance(keyword.value, ast.Name) else None
        if keyword.arg is None and splat is not None:
            out.extend(
                value
                for key, value in zip(splat.keys, splat.values, strict=True)
                if isinstance(key, ast.Constant)
            )
        else:
            out.append(keyword.value)
    return out


def _sends(loop: ast.stmt, name: str, dicts: dict[str, ast.Dict]) -> bool:
    """A call in ``loop`` takes the bare name as an argument (``llm.chat(conversation)``,
    ``create(messages=conversation)``, ``create(**kwargs)`` of a dict holding it)."""
    for node, _ in _own(loop):
        if isinstance(node, ast.Call) and any(_is(arg, name) for arg in _args(node, dicts)):
            return True
    return False


def _grows(loop: ast.stmt, name: str) -> bool:
    for node, _ in _own(loop):
        if isinstance(node, ast.AugAssign) and _is(node.target, name):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _GROWS
            and _is(node.func.value, name)
        ):
            return True
    return False
