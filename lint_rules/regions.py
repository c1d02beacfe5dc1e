"""Sink arguments -> prefix regions and cache blocks, for the taint engine.

``RegionsMixin.handle_sink`` evaluates a recognised LLM call: each argument named in the sink's
spec is walked structurally (list and dict literals, names bound to them in the same scope or at
module level) into ``Block`` objects in prefix order and ``PrefixEntry`` records; every other
argument is evaluated normally (``metadata=``, ``user=``, ``extra_headers=`` are not prefix).

The newest message (the last element of a literal message list) is the tail: its content is not
recorded as prefix, though its blocks still count for breakpoints and TTLs.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .conversations import held_companions, held_conversations
from .events import Block, HandedHistory, HandedTurn, SinkCall, TurnContext, TurnCount
from .facts import ASSUMED, CLEAN, Fact, Kind, Shape, Value, held_once, map_facts, replace
from .frames import Choice, ClassInfo, EngineState, ExternalClass
from .nodes import all_nodes
from .sinks import SinkSpec, is_measure_name, sent_tool_fields

if TYPE_CHECKING:
    from .frames import Frame, Summary

_REGION_RANK = {"tools": 0, "system": 1, "messages": 2}
#: APIs whose cache covers only what precedes an explicit breakpoint
_EXPLICIT_BREAKPOINTS = frozenset(
    {"anthropic", "bedrock", "bedrock.invoke", "custom.anthropic", "custom.bedrock"}
)


#: shapes of an argument that is not a history (``render(history, now)``)
_SCALARS = frozenset({Shape.STR, Shape.NUM, Shape.DATETIME, Shape.DATE})


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
    )


def _inside(node: ast.AST, span: tuple[int, int, int, int]) -> bool:
    line, col, end_line, end_col = _span(node)
    return (span[0], span[1]) <= (line, col) and (end_line, end_col) <= (span[2], span[3])


def dict_get(node: ast.AST, key: str) -> ast.expr | None:
    """The value under a constant key in a dict literal, or None."""
    if not isinstance(node, ast.Dict):
        return None
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


#: roles of the model's own reply in a chat history (OpenAI, Anthropic; Gemini's ``model``)
_REPLY_ROLES = frozenset({"assistant", "model"})


def _message_parts(node: ast.expr) -> tuple[str, list[ast.expr]] | None:
    """The constant role of a chat message and the nodes of its other values: a dict display
    (``{"role": "system", "content": text}``) or a call with a ``role=`` keyword
    (``Message(role="system", content=text)``, ``dict(role=...)``) or a class-named callee
    given the role first (``Message("system", text)``). None for anything else."""
    if isinstance(node, ast.Dict):
        role = dict_get(node, "role")
        others = [
            v for k, v in zip(node.keys, node.values, strict=True) if k is None or v is not role
        ]
    elif isinstance(node, ast.Call):
        role = next((kw.value for kw in node.keywords if kw.arg == "role"), None)
        others = [kw.value for kw in node.keywords if kw.arg != "role"]
        callee = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        if role is None and node.args and callee[:1].isupper():
            role, others = node.args[0], [*node.args[1:], *others]
        else:
            others = [*node.args, *others]
    else:
        return None
    if isinstance(role, ast.Constant) and isinstance(role.value, str):
        return role.value, others
    return None


def _appended(stmt: ast.stmt) -> tuple[str, list[ast.expr]] | None:
    """The list a statement appends to (the source of a name or a field of one) and the
    elements it appends: ``L.append(m)``, ``L.extend([...])``, ``L += [...]``,
    ``L = L + [...]``. None for any other statement."""
    target: ast.expr | None = None
    added: ast.expr | None = None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in ("append", "extend")
            and len(call.args) == 1
            and not call.keywords
        ):
            target = call.func.value
            added = call.args[0] if call.func.attr == "extend" else ast.List([call.args[0]])
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
        target, added = stmt.target, stmt.value
    elif (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.value, ast.BinOp)
        and isinstance(stmt.value.op, ast.Add)
        and ast.unparse(stmt.value.left) == ast.unparse(stmt.targets[0])
    ):
        target, added = stmt.targets[0], stmt.value.right
    if not isinstance(target, (ast.Name, ast.Attribute)) or not isinstance(
        added, (ast.List, ast.Tuple)
    ):
        return None
    return ast.unparse(target), list(added.elts)


def later_history_turns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the value nodes (its content) of each system or developer message that
    ``func`` appends to a history list after the model's own reply: an earlier statement of
    the same block, or of a block around it, appended to the same list (``L``, ``self.L``)
    a message of role ``assistant`` or ``model`` with a value that is not a literal (what the
    model answered), or a later statement of a loop's own body appends one to it on every
    pass (``_replied_each_pass``). Such a message is not the system prompt at the head of the
    request: the history it joins already holds this conversation's own reply before it, and
    what is written there once stays, as a user or tool turn does (a stored history is frozen:
    ``region_messages``). A system message appended first, or only after other roles or in a
    branch or loop that may not have run, is not one. Found once per tree (kept on the
    node)."""
    known: frozenset[int] | None = func.__dict__.get("_later_turns")
    if known is None:
        out: set[int] = set()
        _later_turns(func.body, frozenset(), out)
        known = func.__dict__["_later_turns"] = frozenset(out)
    return known


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """The nodes of ``func``'s own body, not of a function, lambda or class nested in it."""
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            ):
                todo.append(child)


def _callee_name(node: ast.expr) -> str:
    return (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )


def _turn_stream(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr] | None:
    """The values ``func`` yields (``yield v``, ``yield from v``) when it is a generator that
    yields no chat message of a role other than system or developer and does not hand on a
    sequence's items one by one (``for m in history: yield m``). None for any other function:
    one that yields nothing, or builds a request's messages (a user turn, the history)."""
    yielded: list[ast.expr] = []
    args = func.args
    # names that stand for items of something else: a parameter, a loop's or a with's target
    relayed = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    relayed.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    for node in _own_nodes(func):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.withitem)):
            target = node.optional_vars if isinstance(node, ast.withitem) else node.target
            if target is not None:
                relayed.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        if isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
            parts = _message_parts(node.value)
            if parts is not None and parts[0] not in ("system", "developer"):
                return None
            yielded.append(node.value)
    if any(isinstance(v, ast.Name) and v.id in relayed for v in yielded):
        return None
    return yielded or None


#: words of a decorator or a keyword under which a function handed on makes a prompt, not a
#: turn (``@agent.system_prompt``, ``instructions=make_rules``), or of a decorator that
#: registers nothing (``@functools.cache``, ``@property``)
_NOT_TURN_WORDS = (
    "system",
    "prompt",
    "instruction",
    "cache",
    "wraps",
    "property",
    "setter",
    "abstract",
    "override",
    "overload",
    "contextmanager",
)


def _handed_on(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names of functions a module hands on instead of calling: a bare name (or
    ``self.name``) that is not called where it stands (``ToolSpec(execute=run_tool)``,
    ``register_hook("x", on_tool)``), and apart the functions decorated by a registering call
    or attribute (``@command("lesson")``, ``@mcp.tool``). Not under a keyword, nor with a
    decorator, that names a prompt (``_NOT_TURN_WORDS``)."""
    callees: set[int] = set()
    excluded: set[int] = set()
    for node in all_nodes(tree):
        if isinstance(node, ast.Call):
            callees.add(id(node.func))
            for kw in node.keywords:
                if kw.arg and any(w in kw.arg.lower() for w in _NOT_TURN_WORDS):
                    excluded.update(id(n) for n in ast.walk(kw.value))
    named: set[str] = set()
    decorated: set[str] = set()
    for node in all_nodes(tree):
        if id(node) in callees or id(node) in excluded:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            named.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            named.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                text = ast.unparse(deco).lower()
                if isinstance(deco, (ast.Call, ast.Attribute)) and not any(
                    w in text for w in _NOT_TURN_WORDS
                ):
                    decorated.add(node.name)
    return named, decorated


def _turn_sources(tree: ast.Module) -> tuple[frozenset[int], frozenset[str]]:
    """The functions of a module whose results are turns handed one at a time to a loop the
    module does not show (the ids of their nodes), and the names of the functions whose
    every call there (at least one) is such a function's yielded value. A generator of turns
    (``_turn_stream``) is one where the module hands it on (``_handed_on``: a tool's execute
    function, a hook, a command), or where it is called there only (at least once) for
    another one to yield its items (``yield from read_one(path)``). A generator called by
    name to be listed, splatted or composed into something else (``yield from
    prompt_timeinfo()`` in a prompt builder nothing hands on) is not one. Found once per
    tree."""
    known: tuple[frozenset[int], frozenset[str]] | None = tree.__dict__.get("_turn_sources")
    if known is not None:
        return known
    funcs = [n for n in all_nodes(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    streams = {id(f): f for f in funcs if _turn_stream(f) is not None}
    named, decorated = _handed_on(tree)
    handed = named | decorated
    # every call of a name, and the calls that a generator of the module yields whole
    calls: dict[str, list[int]] = {}
    for node in all_nodes(tree):
        if isinstance(node, ast.Call):
            name = _callee_name(node.func)
            if name:
                calls.setdefault(name, []).append(id(node))
    yielded_by: dict[int, int] = {}
    for key, func in streams.items():
        for value in _turn_stream(func) or ():
            if isinstance(value, ast.Call):
                yielded_by[id(value)] = key
    # a function handed on that returns a generator's call (``def execute_fn(cmd): return
    # run(cmd)``, ``execute_fn=execute_fn``) hands that generator's items on as its own
    relays: set[int] = set()
    for func in funcs:
        if func.name in handed and id(func) not in streams:
            for node in _own_nodes(func):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
                    yielded_by[id(node.value)] = id(func)
                    relays.add(id(func))
    turns = {key for key, func in streams.items() if func.name in handed}
    grew = True
    while grew:
        grew = False
        for key, func in streams.items():
            if key in turns or func.name in handed:
                continue
            sites = calls.get(func.name, [])
            if sites and all(yielded_by.get(site) in turns | relays for site in sites):
                turns.add(key)
                grew = True
    returned = frozenset(
        func.name
        for func in funcs
        if func.name not in named
        and calls.get(func.name)
        and all(yielded_by.get(site) in turns for site in calls[func.name])
    )
    known = tree.__dict__["_turn_sources"] = (frozenset(turns), returned)
    return known


def yielded_turns(func: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module) -> frozenset[int]:
    """The ids of the value nodes (its content) of each system or developer message object
    that ``func`` hands, one at a time, to a loop that writes it into a history: a message
    that a generator of turns (``_turn_sources``: a tool's, hook's or command's generator
    that the module hands on, or one only it yields from) yields (``yield Message("system",
    out)``, or a name bound once to it and yielded), or that ``func`` returns (``return
    Message(...)``) where every call of ``func`` in its module is yielded whole by such a
    generator (``yield new_session(cmd)``). The caller appends each item to the
    conversation's log after the model's reply that asked for it, and the whole log is sent
    on later turns, so what it holds is written once and frozen, as ``later_history_turns``'
    turns are. Found once per tree (kept on the node)."""
    known: frozenset[int] | None = func.__dict__.get("_yielded_turns")
    if known is not None:
        return known
    out: set[int] = set()
    turns, returned = _turn_sources(tree)
    messages: list[ast.expr] = []
    if id(func) in turns:
        stream = _turn_stream(func) or []
        names = {v.id for v in stream if isinstance(v, ast.Name)}
        bound: dict[str, list[ast.expr | None]] = {}
        for node in _own_nodes(func):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id in names:
                            bound.setdefault(name.id, []).append(node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                target = node.target
                if isinstance(target, ast.Name) and target.id in names:
                    bound.setdefault(target.id, []).append(None)
        messages += [v for v in stream if not isinstance(v, ast.Name)]
        messages += [values[0] for values in bound.values() if len(values) == 1 and values[0]]
    if func.name in returned:
        messages += [
            node.value
            for node in _own_nodes(func)
            if isinstance(node, ast.Return) and node.value is not None
        ]
    for value in messages:
        parts = _message_parts(value)
        if parts is not None and parts[0] in ("system", "developer"):
            out.update(id(node) for node in parts[1])
    known = func.__dict__["_yielded_turns"] = frozenset(out)
    return known


def unread_messages(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the value nodes (its content) of each chat message (``_message_parts``) that
    ``func`` binds to a local name, alone or as an element of a list or tuple display
    (``messages = [{"role": "system", "content": prompt}, ...]``), where nothing in ``func``
    (nor a function nested in it) reads that name and it is not ``global``/``nonlocal``: a
    message list built and never sent. Found once per function (kept on the node)."""
    known: frozenset[int] | None = func.__dict__.get("_unread")
    if known is None:
        read: set[str] = set()
        declared: set[str] = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                read.add(node.id)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
        out: set[int] = set()
        for node in ast.walk(func):
            if not (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and node.value is not None
                and len(node.targets if isinstance(node, ast.Assign) else [node.target]) == 1
            ):
                continue
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if not isinstance(target, ast.Name) or target.id in read or target.id in declared:
                continue
            value = node.value
            elements = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            for elt in elements:
                parts = _message_parts(elt)
                if parts is not None:
                    out.update(id(part) for part in parts[1])
        known = func.__dict__["_unread"] = frozenset(out)
    return known


def measured_messages(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the value nodes (its content) of each chat message (``_message_parts``) that
    ``func`` gives straight to a call named for measuring it (``is_measure_name``: ``len(...)``,
    ``count_tokens(...)``, ``self._estimate_message_tokens(...)``), as an argument or an
    element of a list or tuple display given as one. Such a message is counted, to size what is
    sent, and never sent itself. Found once per tree (kept on the node)."""
    known: frozenset[int] | None = func.__dict__.get("_measured")
    if known is None:
        out: set[int] = set()
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func
            name = (
                callee.attr
                if isinstance(callee, ast.Attribute)
                else callee.id
                if isinstance(callee, ast.Name)
                else ""
            )
            if not is_measure_name(name):
                continue
            for arg in [*node.args, *(kw.value for kw in node.keywords)]:
                elements = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                for elt in elements:
                    parts = _message_parts(elt)
                    if parts is not None:
                        out.update(id(value) for value in parts[1])
        known = func.__dict__["_measured"] = frozenset(out)
    return known


def _replied_each_pass(loop: ast.For | ast.AsyncFor | ast.While) -> frozenset[str]:
    """The lists a statement of ``loop``'s own body (not a branch of it) appends the model's
    reply to (a message of role ``assistant`` or ``model`` holding what is not a literal) on
    every pass, where nothing in the loop rebinds, cuts or reorders that list (an assignment
    to it other than ``L = L + [...]``, an item or slice store, ``del``, ``pop``, ``insert``,
    ``remove``, ``clear``, ``sort``, ``reverse``). A system message the same body appends to
    such a list before the reply (``history.append({"role": "system", "content":
    f"{left:.2f} seconds left"})``, then the request, then the reply) follows the previous
    pass's reply from the second pass on, and on the first it is the newest message: the list
    only grows, so what it is given once stays where it was written."""
    found: set[str] = set()
    for stmt in loop.body:
        appended = _appended(stmt)
        if appended is None:
            continue
        key, elements = appended
        for elt in elements:
            parts = _message_parts(elt)
            if (
                parts is not None
                and parts[0] in _REPLY_ROLES
                and any(not isinstance(node, ast.Constant) for node in parts[1])
            ):
                found.add(key)
    if not found:
        return frozenset()
    appends = {id(stmt) for stmt in loop.body if _appended(stmt) is not None}
    for node in ast.walk(loop):
        if id(node) in appends:
            continue
        touched: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            touched = [t.value if isinstance(t, ast.Subscript) else t for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            target = node.target
            touched = [target.value if isinstance(target, ast.Subscript) else target]
        elif isinstance(node, ast.Delete):
            touched = [t.value if isinstance(t, ast.Subscript) else t for t in node.targets]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("pop", "insert", "remove", "clear", "sort", "reverse")
        ):
            touched = [node.func.value]
        for expr in touched:
            if isinstance(expr, (ast.Tuple, ast.List)):
                touched.extend(expr.elts)
            elif isinstance(expr, (ast.Name, ast.Attribute)):
                found.discard(ast.unparse(expr))
    return frozenset(found)


def _later_turns(body: list[ast.stmt], replied: frozenset[str], out: set[int]) -> None:
    lists = set(replied)
    for stmt in body:
        found = _appended(stmt)
        if found is not None:
            key, elements = found
            for elt in elements:
                parts = _message_parts(elt)
                if parts is None:
                    continue
                role, others = parts
                if role in ("system", "developer") and key in lists:
                    out.update(id(node) for node in others)
                elif role in _REPLY_ROLES and any(
                    not isinstance(node, ast.Constant) for node in others
                ):
                    lists.add(key)
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner = frozenset(lists)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                if name == "body" and isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                    _later_turns(block, inner | _replied_each_pass(stmt), out)
                else:
                    _later_turns(block, inner, out)
        for handler in getattr(stmt, "handlers", ()):
            _later_turns(handler.body, inner, out)
        for case in getattr(stmt, "cases", ()):
            _later_turns(case.body, inner, out)


def dict_key_node(node: ast.Dict, key: str) -> ast.expr | None:
    for k in node.keys:
        if isinstance(k, ast.Constant) and k.value == key:
            return k
    return None


def literal_length(node: ast.AST) -> tuple[int, int] | None:
    """(characters, non-ASCII characters) of a literal's JSON form, or None if not literal."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return len(text), sum(1 for ch in text if ord(ch) > 127)


def _entry_node(splat: ast.expr, key: str) -> ast.Subscript:
    """``splat[key]`` at the splat's position: the entry a ``**splat`` passes as keyword
    ``key``; made once per splat and key, so the analysis sees the same node on every pass."""
    made: dict[str, ast.Subscript] = splat.__dict__.setdefault("_promptcache_entries", {})
    node = made.get(key)
    if node is None:
        node = ast.Subscript(value=splat, slice=ast.Constant(value=key), ctx=ast.Load())
        node._promptcache_splat = ast.unparse(splat)  # type: ignore[attr-defined]
        ast.copy_location(node, splat)
        ast.copy_location(node.slice, splat)
        made[key] = node
    return node


def _key_node(holder: ast.expr, key: str) -> ast.Subscript:
    """``holder[key]`` at the holder's position: what a named dict holds under ``key`` where
    it is read; made once per holder and key, so the analysis sees the same node on every
    pass."""
    made: dict[str, ast.Subscript] = holder.__dict__.setdefault("_promptcache_keys", {})
    node = made.get(key)
    if node is None:
        node = ast.Subscript(value=holder, slice=ast.Constant(value=key), ctx=ast.Load())
        ast.copy_location(node, holder)
        ast.copy_location(node.slice, holder)
        made[key] = node
    return node


#: keywords of a request whose text comes ahead of its messages
_SYSTEM_KEYWORDS = frozenset({"system", "instructions", "system_instruction"})


#: the search calls of vector stores, retrievers and search services (LangChain, LlamaIndex,
#: Chroma's ``collection.query(query_texts=[...])``, ...): what such a call returns is what
#: it found for the text it was given, made for that text, even where the analysis cannot
#: see the store's code (``retrieved``)
RETRIEVAL_CALLS = frozenset(
    {
        "similarity_search",
        "asimilarity_search",
        "similarity_search_with_score",
        "similarity_search_with_relevance_scores",
        "max_marginal_relevance_search",
        "get_relevant_documents",
        "aget_relevant_documents",
        "retrieve",
        "aretrieve",
        "search",
        "asearch",
        "query",
        "aquery",
    }
)


def retrieved(fact: Fact) -> bool:
    """True for a parameter's fact that passes through calls the analysis cannot see only
    where each is a search call (``RETRIEVAL_CALLS``: ``store.similarity_search(question)``,
    ``collection.query(query_texts=[question])``): what it carries is what was found for that
    parameter, made for it."""
    steps = [s for s in fact.via if s[0].startswith(ASSUMED)]
    return bool(steps) and all(
        name in RETRIEVAL_CALLS and text == f"{ASSUMED} {name}()" for text, _, name, _ in steps
    )


def _entry_of_input(fact: Fact, held: set[tuple[int, str]]) -> bool:
    """True when ``fact`` is the newest message's parameter, or an entry or field of what a
    search found for it (``question['documents']``)."""
    return any(
        fact.param == param
        and (fact.detail == name or fact.detail.startswith((f"{name}[", f"{name}.")))
        for param, name in held
    )


def _short_text(node: ast.AST) -> str:
    what = ast.unparse(node)
    return what if len(what) <= 40 else what[:37] + "..."


#: the decorators that make a function a web route's handler (FastAPI, Flask, Starlette,
#: Quart, Sanic): ``@router.post("/chat")``, ``@app.route("/ask", methods=["POST"])``
_ROUTE_DECORATORS = frozenset({"post", "put", "patch", "route", "api_route", "websocket"})


def _route_handler(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call)
        and isinstance(d.func, ast.Attribute)
        and d.func.attr in _ROUTE_DECORATORS
        and isinstance(d.func.value, (ast.Name, ast.Attribute))
        for d in func.decorator_list
    )


def _request_field(node: ast.expr, params: set[str]) -> bool:
    """``data.history``, ``data["history"]`` (or a tail slice of it): a field of a parameter
    of the handler, what the request's client sent."""
    node = _history_base(node)
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id in params
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in params
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    )


def _request_input(node: ast.expr, params: set[str]) -> bool:
    """A parameter of the handler (``question: str``) or a field of one (``data.question``,
    ``data["question"]``): what the request carried."""
    return (isinstance(node, ast.Name) and node.id in params) or _request_field(node, params)


def _client_history(node: ast.expr, params: set[str]) -> bool:
    """True for a field of a request's parameter (``_request_field``), or a list of its
    messages copied in order (``[{"role": m.role, "content": m.content} for m in
    data.history]``, no condition)."""
    if _request_field(node, params):
        return True
    if not isinstance(node, ast.ListComp) or len(node.generators) != 1:
        return False
    gen = node.generators[0]
    return (
        not gen.ifs
        and not gen.is_async
        and isinstance(gen.target, ast.Name)
        and _request_field(gen.iter, params)
        and _copied_from(node.elt, gen.target.id)
    )


def _history_base(node: ast.expr) -> ast.expr:
    """The history a part of a message list sends: ``node``, or the list a tail slice of
    it reads (``history[-20:]``: its newest messages, in order)."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Slice)
        and node.slice.upper is None
        and node.slice.step is None
    ):
        return node.value
    return node


def _copied_from(value: ast.expr, item: str) -> bool:
    """True when ``value`` is the loop's item ``item`` itself, or a message made of its own
    fields only (``{"role": m["role"], "content": m["content"]}``, ``m.content``)."""
    if isinstance(value, ast.Name):
        return value.id == item
    if isinstance(value, ast.Dict):
        return bool(value.keys) and all(
            isinstance(k, ast.Constant) and _field_of(v, item)
            for k, v in zip(value.keys, value.values, strict=True)
        )
    return False


def _field_of(node: ast.expr, item: str) -> bool:
    """``item["key"]``, ``item.key`` or ``item.get("key")`` with a constant key."""
    if isinstance(node, ast.Subscript):
        return (
            isinstance(node.value, ast.Name)
            and node.value.id == item
            and isinstance(node.slice, ast.Constant)
        )
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == item
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == item
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and not node.keywords
    )


def _added_parts(
    func: ast.AST,
    name: ast.expr,
    literal: ast.expr,
    parts: list[tuple[ast.expr, bool]],
    sink: ast.Call,
) -> list[tuple[ast.expr, bool]] | None:
    """The parts of the list ``name``, bound to ``literal`` (its ``parts``), as the request
    at ``sink`` first sends it: each statement of ``func``'s body between the two adds at
    its end one message (``name.append(m)``), a whole list (``name.extend(history)``,
    ``name += history``), or each message of a list in order, copied (``for m in
    history[-20:]: name.append({"role": m["role"], "content": m["content"]})``); the
    statement holding the request touches the list only after it. None where a statement
    between reads or changes the list in any other way (an ``insert``, an append under a
    condition, a new binding): then the order the request sends is not known."""
    if not isinstance(name, ast.Name) or not isinstance(
        func, (ast.FunctionDef, ast.AsyncFunctionDef)
    ):
        return None
    start = getattr(literal, "end_lineno", 0) or 0
    out = list(parts)
    for stmt in func.body:
        if (getattr(stmt, "end_lineno", None) or stmt.lineno) <= start:
            continue
        if stmt.lineno > sink.lineno:
            break
        mentions = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name.id]
        if (getattr(stmt, "end_lineno", None) or stmt.lineno) >= sink.lineno:
            # the statement that holds the request (``for`` a tool loop, ``try``): nothing
            # in it before the request may touch the list
            return None if any(n.lineno < sink.lineno for n in mentions) else out
        if not mentions:
            continue
        added = _added_in_place(stmt, name.id)
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if added is not None:
            items = _list_parts(added)
            out.extend(items if items is not None else [(added, True)])
        elif (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == name.id
            and call.func.attr in ("append", "extend")
            and len(call.args) == 1
            and not call.keywords
            and not isinstance(call.args[0], ast.Starred)
            and len(mentions) == 1
        ):
            arg = call.args[0]
            if call.func.attr == "append":
                out.append((arg, False))
            else:
                items = _list_parts(arg)
                out.extend(items if items is not None else [(arg, True)])
        elif (
            isinstance(stmt, ast.For)
            and isinstance(stmt.target, ast.Name)
            and not stmt.orelse
            and len(stmt.body) == 1
            and len(mentions) == 1
        ):
            appended = _appends_to(stmt.body[0], name.id)
            if appended is None or not _copied_from(appended, stmt.target.id):
                return None
            out.append((stmt.iter, True))
        else:
            return None
    return out


def _list_parts(node: ast.expr) -> list[tuple[ast.expr, bool]] | None:
    """The parts of a message list written as a literal or a sum of lists, in order, each
    with whether it is a whole list (``*history``, the ``history`` of ``[system] + history``)
    rather than one message; None for any other expression."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [
            (elt.value, True) if isinstance(elt, ast.Starred) else (elt, False) for elt in node.elts
        ]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _list_parts(node.left)
        right = _list_parts(node.right)
        if left is None:
            left = [(node.left, True)]
        if right is None:
            right = [(node.right, True)]
        return left + right
    return None


def _message_role(message: ast.Dict | None) -> str | None:
    role = dict_get(message, "role") if message is not None else None
    return role.value if isinstance(role, ast.Constant) and isinstance(role.value, str) else None


def _stored_history(node: ast.expr, params: set[str], self_name: str | None) -> bool:
    """True for a history the request does not rebuild: a parameter of the function, or a
    field of ``self`` (``self.history``)."""
    if isinstance(node, ast.Name):
        return node.id in params
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and self_name is not None
        and node.value.id == self_name
    )


def _grows_in(func: ast.AST, history: ast.expr) -> ast.Call | ast.AugAssign | None:
    """The first statement of ``func`` (outside nested functions and classes) that appends
    to ``history`` (``history.append(...)``, ``.extend(...)``, ``history += ...``), or None."""
    want = ast.unparse(history)
    todo: list[ast.AST] = list(ast.iter_child_nodes(func))
    found: list[ast.Call | ast.AugAssign] = []
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and ast.unparse(node.func.value) == want
        ) or (isinstance(node, ast.AugAssign) and ast.unparse(node.target) == want):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return min(found, key=lambda n: (n.lineno, n.col_offset)) if found else None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _in_loop(loop: ast.stmt) -> Iterator[ast.AST]:
    """Every node of ``loop``'s body and ``else`` (not of nested functions or classes)."""
    todo: list[ast.AST] = [*loop.body, *loop.orelse]  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _every_pass(loop: ast.stmt) -> list[ast.stmt]:
    """The statements of ``loop`` that run on every pass: its body's own, and those of a
    ``with`` among them; [] where a ``continue`` of the loop itself may skip the rest of a
    pass."""
    todo: list[ast.AST] = list(loop.body)  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Continue):
            return []
        if not isinstance(node, (*_SCOPES, *_LOOPS)):
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, _LOOPS):
            todo.extend(node.orelse)
    out: list[ast.stmt] = []
    stmts = list(loop.body)  # type: ignore[attr-defined]
    while stmts:
        stmt = stmts.pop(0)
        out.append(stmt)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            stmts[:0] = stmt.body
    return out


def _binds(loop: ast.stmt, name: str) -> list[ast.AST]:
    """The nodes of ``loop`` that bind the local ``name`` (an assignment, a loop's or a
    ``with``'s target, ``:=``, ``del``)."""
    found: list[ast.AST] = []
    for node in _in_loop(loop):
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, (ast.Store, ast.Del))
        ):
            found.append(node)
    if isinstance(loop, (ast.For, ast.AsyncFor)) and any(
        isinstance(n, ast.Name) and n.id == name for n in ast.walk(loop.target)
    ):
        found.append(loop.target)
    return found


def _stepped(loop: ast.stmt, name: str) -> ast.stmt | None:
    """The statement that changes the counter ``name`` by the same nonzero number on every
    pass of ``loop`` (``remaining -= 1``, ``turn = turn + 1``), where nothing else in the
    loop binds it; None otherwise."""
    binds = _binds(loop, name)
    if len(binds) != 1:
        return None
    target: ast.expr
    for stmt in _every_pass(loop):
        if isinstance(stmt, ast.AugAssign):
            target, op, step = stmt.target, stmt.op, stmt.value
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.value, ast.BinOp)
            and isinstance(stmt.value.left, ast.Name)
            and stmt.value.left.id == name
        ):
            target, op, step = stmt.targets[0], stmt.value.op, stmt.value.right
        else:
            continue
        if (
            target is binds[0]
            and isinstance(op, (ast.Add, ast.Sub))
            and isinstance(step, ast.Constant)
            and type(step.value) in (int, float)
            and step.value != 0
        ):
            return stmt
    return None


_REMOVALS = frozenset({"clear", "pop", "popleft", "remove", "__delitem__"})
#: calls that read a list given to them and never change it
_READERS = frozenset({"len", "list", "tuple", "str"})


def _appended_in(loop: ast.stmt, name: str, every: bool) -> ast.stmt | None:
    """The statement of ``loop`` that appends one item to the list ``name``
    (``name.append(...)``), on every pass where ``every``; None where there is none or where
    the loop binds ``name``, removes from it or stores into it by index; where ``every``,
    also where the loop hands it whole to a call as a positional argument (``trim(history)``
    may cut it in place), but for ``len``, ``list``, ``tuple`` and ``str``."""
    if _binds(loop, name):
        return None
    for node in _in_loop(loop):
        if (
            every
            and isinstance(node, ast.Call)
            and not (isinstance(node.func, ast.Name) and node.func.id in _READERS)
            and any(
                isinstance(a, ast.Name) and a.id == name
                for arg in node.args
                for a in (arg.value if isinstance(arg, ast.Starred) else arg,)
            )
        ):
            return None
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _REMOVALS
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ) or (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and isinstance(node.value, ast.Name)
            and node.value.id == name
        ):
            return None
    stmts = _every_pass(loop) if every else [n for n in _in_loop(loop) if isinstance(n, ast.stmt)]
    found = [stmt for stmt in stmts if _appends_to(stmt, name) is not None]
    return min(found, key=lambda n: (n.lineno, n.col_offset)) if found else None


def _written(text: ast.expr) -> Iterator[ast.expr]:
    """The expressions ``text`` writes into it: an f-string's values, the argument of
    ``str(...)`` and the arguments of ``.format(...)``."""
    for node in ast.walk(text):
        if isinstance(node, ast.FormattedValue):
            yield node.value
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
                yield node.args[0]
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "format":
                yield from node.args
                yield from (k.value for k in node.keywords)


def _turn_count(
    func: ast.AST, loop: ast.stmt, text: ast.expr, depth: int = 0
) -> tuple[ast.expr, ast.stmt] | None:
    """A count in ``text`` that changes on every pass of ``loop``, with the statement that
    changes it: a counter ``_stepped`` there, or ``len()`` of a local list the loop appends
    to on every pass; also through a local name bound once in the function, by a statement
    that runs on every pass of the loop, to text holding one (two names deep)."""
    for shown in _written(text):
        if isinstance(shown, ast.Name):
            stepped = _stepped(loop, shown.id)
            if stepped is not None:
                return shown, stepped
            if depth < 2:
                bound = _bound_each_pass(func, loop, shown.id)
                if bound is not None:
                    found = _turn_count(func, loop, bound, depth + 1)
                    if found is not None:
                        return found
        elif (
            isinstance(shown, ast.Call)
            and isinstance(shown.func, ast.Name)
            and shown.func.id == "len"
            and len(shown.args) == 1
            and isinstance(shown.args[0], ast.Name)
        ):
            grown = _appended_in(loop, shown.args[0].id, every=True)
            if grown is not None:
                return shown, grown
    return None


def _bound_each_pass(func: ast.AST, loop: ast.stmt, name: str) -> ast.expr | None:
    """The value of the one assignment to the local ``name`` in ``func``, where it is a
    statement that runs on every pass of ``loop``; None otherwise."""
    binds = [
        n
        for n in all_nodes(func)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
    ]
    if len(binds) != 1:
        return None
    for stmt in _every_pass(loop):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.targets[0] is binds[0]:
            return stmt.value
    return None


_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp)


def _comprehension(node: ast.expr, frame: Frame) -> ast.ListComp | ast.GeneratorExp | None:
    """The list comprehension or generator expression ``node`` is, or the one a name of
    ``frame`` was last bound to (``stamped = [... for m in history]``); None otherwise."""
    if isinstance(node, ast.Name):
        node = frame.defs.get(node.id, node)
    return node if isinstance(node, _COMPREHENSIONS) else None


def _appends_to(stmt: ast.stmt, name: str) -> ast.expr | None:
    """The value ``stmt`` appends to the list ``name`` (``name.append(v)``), or None."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == name
        and len(call.args) == 1
        and not call.keywords
    ):
        return call.args[0]
    return None


def _added_in_place(stmt: ast.stmt, name: str) -> ast.expr | None:
    """The value ``name += value`` adds to the list ``name`` in place; None for any other
    statement."""
    if (
        isinstance(stmt, ast.AugAssign)
        and isinstance(stmt.op, ast.Add)
        and isinstance(stmt.target, ast.Name)
        and stmt.target.id == name
    ):
        return stmt.value
    return None


def _extends_with(stmt: ast.stmt, name: str) -> ast.ListComp | ast.GeneratorExp | None:
    """The comprehension ``stmt`` adds to the list ``name`` (``name.extend([... for
    ...])``, ``name += [... for ...]``), or None."""
    added = _added_in_place(stmt, name)
    if added is None and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr == "extend"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == name
            and len(call.args) == 1
        ):
            added = call.args[0]
    return added if isinstance(added, _COMPREHENSIONS) else None


def _loop_appends(
    body: list[ast.stmt],
    name: str,
    iters: list[ast.expr],
    out: list[tuple[ast.expr, list[ast.expr]]],
) -> None:
    """Each value appended to ``name`` inside a ``for`` loop of ``body`` (at any depth, not
    in a nested definition), with the iterables of the loops around it, outermost first."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        added = _appends_to(stmt, name)
        if added is not None and iters:
            out.append((added, list(iters)))
            continue
        comp = _extends_with(stmt, name)
        if comp is not None:
            out.append((comp, list(iters)))
            continue
        here = [*iters, stmt.iter] if isinstance(stmt, (ast.For, ast.AsyncFor)) else iters
        for block in ("body", "orelse", "finalbody"):
            _loop_appends(getattr(stmt, block, []), name, here, out)
        for handler in getattr(stmt, "handlers", []):
            _loop_appends(handler.body, name, here, out)


def earlier_turns(
    func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, start: int, end: int
) -> list[tuple[ast.expr, list[ast.expr]]]:
    """The messages a function writes into its local list ``name`` by iterating something
    (``for m in history: name.append({...})``, ``name += [... for m in history]``) after
    line ``start`` and before the statement at the function's top level that appends the
    newest message (``name.append(question)``), itself before line ``end`` (the request):
    each appended value (a comprehension: the whole of it) with the iterables of the loops
    around it. Empty when no top-level append follows them: the last appended is then the
    newest message."""
    own = [s for s in func.body if start < s.lineno < end]
    last = max((i for i, s in enumerate(own) if _appends_to(s, name) is not None), default=-1)
    out: list[tuple[ast.expr, list[ast.expr]]] = []
    _loop_appends(own[:last], name, [], out)
    return out


def _births(value: Value) -> Iterator[tuple[object, ...]]:
    """Each fact of ``value`` by its kind and birth place (line, column, file)."""
    return ((f.kind, f.line, f.col, f.path) for f in value.facts)


def _without_births(value: Value, given: set[tuple[object, ...]]) -> Value:
    """``value`` without the facts born where one in ``given`` was (``_births``): what a
    history handed to a renderer or a loop held already, frozen there."""
    if not given:
        return value
    return value.with_facts(
        frozenset(f for f in value.facts if (f.kind, f.line, f.col, f.path) not in given)
    )


def _tool_fields(value: Value, module: str) -> dict[str, frozenset[str] | None] | None:
    """The sent fields (``sinks.sent_tool_fields``) of the SDK tool class ``value`` is an
    instance of, when its fields are known; None otherwise (``module``: the module being
    analysed, for a class of its own)."""
    if value.items is None:
        return None
    ref = value.ref
    if isinstance(ref, ExternalClass):
        return sent_tool_fields(ref.qualname)
    if isinstance(ref, ClassInfo) and module:
        return sent_tool_fields(f"{module}.{ref.node.name}")
    return None


def _kept(value: Value, sent: frozenset[str] | None) -> set[tuple[object, ...]]:
    """The identities (``Fact.identity``) of the facts of ``value`` that a tool definition
    sends when it sends the fields ``sent`` of it (None: all of it): those of its fields in
    ``sent``, and those it holds outside every field (chosen per request, built in a loop);
    all of them when its fields are not known."""
    if sent is None or value.items is None:
        return {f.identity for f in value.facts}
    in_fields = {f.identity for _, held in value.items for f in held.facts}
    kept = {f.identity for f in value.facts} - in_fields
    for key, held in value.items:
        if key in sent:
            kept |= {f.identity for f in held.facts}
    return kept


def _unsent(value: Value, module: str) -> set[tuple[object, ...]]:
    """The identities of the facts that ``value``, an SDK tool object, holds only in what its
    SDK does not send (``sinks.sent_tool_fields``); empty for any other value."""
    fields = _tool_fields(value, module)
    if fields is None:
        return set()
    assert value.items is not None
    in_fields = {f.identity for _, held in value.items for f in held.facts}
    kept = {f.identity for f in value.facts} - in_fields
    for key, held in value.items:
        if key in fields:
            kept |= _kept(held, fields[key])
    return {f.identity for f in value.facts} - kept


def sent_tools(value: Value, module: str = "") -> Value:
    """``value``, given to a tools region, as the SDK sends it: an SDK tool object
    (``sinks.SENT_TOOL_FIELDS``) with only what its sent fields hold, and a list whose
    elements are all known (``Value.elem``, or ``Value.elts`` of a list of fixed length)
    without what its tool objects hold only in unsent fields; any other value as it is. A fact
    that a sent field, another element or the list itself (its order, a choice) also holds is
    kept."""
    if not value.facts:
        return value
    elements: tuple[Value, ...]
    whole = value.elts is not None and not value.more
    if value.items is not None:
        elements = (value,)
    elif value.elem is not None and not (whole and isinstance(value.elem.ref, Choice)):
        elements = (value.elem,)
    elif value.elts is not None and not value.more:
        # also a list of tools of several classes (its ``elem`` a ``Choice``, whose fields
        # are merged across the classes): each element's class says what it sends
        elements = value.elts
    else:
        return value
    dropped: set[tuple[object, ...]] = set()
    kept: set[tuple[object, ...]] = set()
    for element in elements:
        unsent = _unsent(element, module)
        dropped |= unsent
        kept |= {f.identity for f in element.facts} - unsent
    dropped -= kept
    if not dropped:
        return value
    return replace(value, facts=frozenset(f for f in value.facts if f.identity not in dropped))


class RegionsMixin(EngineState):
    """Structural walk of sink arguments (mixed into ``taint.Analyzer``)."""

    #: the argument of a request being walked into its region (``system=s3``'s ``s3``), or
    #: None: where a value recorded meanwhile enters the request (``PrefixEntry.arg``)
    sink_arg: ast.expr | None = None

    def handle_sink(self, spec: SinkSpec, node: ast.Call) -> Value:
        sink = SinkCall(node, spec.api, spec.label)
        first_entry = len(self.entries)
        outer, self.sink_call = self.sink_call, node
        try:
            for index, arg in enumerate(node.args):
                kind = spec.positional.get(index)
                if kind is not None and not isinstance(arg, ast.Starred):
                    self.walk_region(kind, arg, sink, f"{spec.label}()")
                else:
                    self.eval(arg)
                    if isinstance(arg, ast.Starred):
                        sink.complete = False
            for name, value_node, at in self._keywords(node, sink, spec.params, spec.regions):
                self.keyword_argument(spec, sink, name, value_node, f"{spec.label}({name}=)", at)
        finally:
            self.sink_call = outer
        extra_body = sink.params.get("extra_body")
        if extra_body is not None:
            key = dict_get(self.deref(extra_body[0])[0], "prompt_cache_key")
            if key is not None:
                sink.params["prompt_cache_key"] = (key, self.eval(key))
        sink.blocks.sort(key=lambda b: _REGION_RANK.get(b.region, 3))
        if spec.api in _EXPLICIT_BREAKPOINTS and "cache_control" not in sink.params:
            self.drop_uncached(sink, first_entry)
        self.add_sink(sink)
        return CLEAN

    def keyword_argument(
        self,
        spec: SinkSpec,
        sink: SinkCall,
        name: str,
        value: ast.expr,
        label: str,
        at: ast.expr | None = None,
    ) -> None:
        """One named argument of a sink (a keyword, a splatted or posted dict's key): walked
        into its region, recorded as a cache parameter, or evaluated as an ordinary value.
        ``at``: where it enters the request, when not at ``value`` (the ``**kwargs`` of a
        splatted dict's key)."""
        kind = spec.regions.get(name)
        if kind is not None:
            self.walk_region(kind, value, sink, label, at)
        elif name in spec.params:
            sink.params[name] = (value, self.eval(value))
        else:
            self.eval(value)
        if name == spec.messages_kw:
            sink.messages = value

    def _keywords(
        self,
        node: ast.Call,
        sink: SinkCall,
        params: Collection[str] = (),
        regions: Collection[str] = (),
    ) -> Iterator[tuple[str, ast.expr, ast.expr]]:
        """The call's keyword arguments, each as (name, value, where it enters the request:
        the value, or the splat's ``kwargs`` of ``**kwargs``), with ``**kwargs`` splats of a
        dict built in the same scope mapped onto keywords: its literal's constant keys, then
        ``kwargs["k"] = v`` assignments after it. Any other splat makes the request
        incomplete; when its value knows its keys (``Value.items``: a dict literal returned by
        a helper), those among ``params`` go into ``sink.params``. A splat of one of the
        function's own parameters, whole (``def send(payload): create(**payload)``), passes
        each of ``regions`` not given by keyword as that entry of the parameter
        (``payload["system"]``), so the summary says which entry of the caller's dict reaches
        which region."""
        named = {kw.arg for kw in node.keywords if kw.arg is not None}
        for kw in node.keywords:
            if kw.arg is not None:
                yield kw.arg, kw.value, kw.value
                continue
            literal, frame = self.deref(kw.value)
            literal = self.keyword_dict(literal)
            later = (
                self.frame.dict_keys.get(kw.value.id, {}) if isinstance(kw.value, ast.Name) else {}
            )
            if not isinstance(literal, ast.Dict) or frame is not self.frame:
                splat = self.eval(kw.value)
                sink.complete = False
                # a dict built elsewhere (returned by a helper): its known keys that select
                # cache behaviour are read from the value, reported at the splat
                for key_name, item_value in splat.items or ():
                    if key_name in params and key_name not in sink.params:
                        sink.params[key_name] = (kw.value, item_value)
                if splat.items is None and self._own_param(kw.value, splat):
                    for key_name in regions:
                        if key_name not in named:
                            yield key_name, _entry_node(kw.value, key_name), kw.value
                continue
            for key, item in zip(literal.keys, literal.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if key.value not in later:
                        yield key.value, item, kw.value
                else:
                    if item is not None:
                        self.eval(item)
                    sink.complete = False
            for key_name, assignment in later.items():
                value = self.assigned_value(assignment)
                if value is not None:
                    # the entry the dict holds at the call, on every path (the value yielded
                    # is the last one assigned)
                    value.__dict__["_promptcache_held"] = _key_node(kw.value, key_name)
                    yield key_name, value, kw.value

    def _own_param(self, expr: ast.expr, value: Value) -> bool:
        """True when ``expr`` names one of the current function's own parameters, whole (not
        an entry or field of one, not ``*args`` or ``**kwargs``), holding only what the caller
        passed."""
        func = self.frame.func
        if func is None or not isinstance(expr, ast.Name) or expr.id not in self.frame.params:
            return False
        if (func.args.vararg and func.args.vararg.arg == expr.id) or (
            func.args.kwarg and func.args.kwarg.arg == expr.id
        ):
            return False
        # the parameter as the caller gave it: anything the function stored into it (under
        # keys not known here) would spread to every entry read from it
        own = (id(func),)
        return any(f.detail == expr.id for f in value.facts) and all(
            f.kind is Kind.PARAM and f.fix == own for f in value.facts
        )

    def _grown(self, name: ast.expr, literal: ast.expr, sink: SinkCall | None) -> bool:
        """True when the list ``name`` (bound to ``literal``) gets an ``append``/``extend`` call
        or a ``name += ...`` between the literal and the sink call, in straight-line code of
        the same function."""
        func = self.frame.func
        if not isinstance(name, ast.Name) or func is None or sink is None:
            return False
        start = getattr(literal, "end_lineno", 0) or 0
        end = sink.node.lineno
        for stmt in func.body:  # top-level statements only: a conditional append may not run
            if not start < stmt.lineno < end:
                continue
            if _added_in_place(stmt, name.id) is not None:
                return True
            if not isinstance(stmt, ast.Expr):
                continue
            call = stmt.value
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("append", "extend")
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == name.id
            ):
                return True
        return False

    def _rendered(self, call: ast.Call, value: Value, frame: Frame) -> Value:
        """What of the history a call renders (``render(self.history)``, ``*to_api(history)``)
        is made per request: the facts the call makes itself (an id or a time stamped on each
        message as it is rendered), not those of the history it is given. A history handed to
        it by name (``self.history``, a parameter ``history``) holds what was written into it
        once, frozen there, as a stored history splatted whole (``*history``) does; so does
        the object whose method renders it (``self.memory.messages()``): their facts
        (compared by kind and birth place) are left out. Arguments that are text, numbers or
        times (``render(history, now)``) are not histories: what they hold stays."""
        given: set[tuple[object, ...]] = set()
        receiver = [call.func.value] if isinstance(call.func, ast.Attribute) else []
        for arg in (*receiver, *call.args, *(k.value for k in call.keywords)):
            if isinstance(arg, ast.Starred):
                arg = arg.value
            if not isinstance(arg, (ast.Name, ast.Attribute)):
                continue
            held = self._value(arg, frame)
            if held.shape in _SCALARS:
                continue
            given.update(_births(held))
        return _without_births(value, given)

    def _restamped(self, iters: list[ast.expr], value: Value, frame: Frame) -> Value:
        """What a comprehension or loop writes per request from the history it iterates
        (``[{"role": m["role"], "content": f"[{now}] {m['content']}"} for m in history]``):
        the facts it adds itself (the time stamped on every earlier turn), not those of the
        iterables ``iters``, whose messages hold what was written into them once, frozen
        there (as a history a call renders: ``_rendered``)."""
        given: set[tuple[object, ...]] = set()
        for it in iters:
            given.update(_births(self._value(it, frame)))
        return _without_births(value, given)

    def _record_earlier_turns(
        self, name: ast.expr, literal: ast.expr, sink: SinkCall, label: str
    ) -> None:
        """Record as prefix each message the function writes into its list ``name`` (bound to
        ``literal``) by iterating a history before it appends the newest message
        (``earlier_turns``): the turns are rebuilt on every request, so what the loop adds to
        them per request (``_restamped``) changes the cached prefix."""
        func = self.frame.func
        if not isinstance(name, ast.Name) or func is None:
            return
        start = getattr(literal, "end_lineno", 0) or 0
        for added, iters in earlier_turns(func, name.id, start, sink.node.lineno):
            if isinstance(added, _COMPREHENSIONS):
                iters = [*iters, *(gen.iter for gen in added.generators)]
                text: ast.expr = added
            else:
                content = dict_get(added, "content")
                text = content if content is not None else added
            role = dict_get(added, "role")
            system = isinstance(role, ast.Constant) and role.value in ("system", "developer")
            value = self._restamped(iters, self.eval(text), self.frame)
            self.record("system" if system else "messages", value, text, label)

    def assigned_value(self, target: ast.Subscript) -> ast.expr | None:
        """The right-hand side of the assignment whose target is ``target``."""
        func = self.frame.func
        for stmt in ast.walk(func) if func is not None else ():
            if isinstance(stmt, ast.Assign) and target in stmt.targets:
                return stmt.value
        return None

    def drop_uncached(self, sink: SinkCall, first_entry: int) -> None:
        """With explicit breakpoints, blocks after the last one are not cached: what enters
        them is not in the cached prefix. Applied only when every later block is a literal
        (an opaque history could hold a later breakpoint)."""
        marks = [i for i, b in enumerate(sink.blocks) if b.bp_node is not None]
        if not marks:
            return
        after = sink.blocks[marks[-1] + 1 :]
        if not after or any(b.opaque for b in after):
            return
        spans = [_span(b.node) for b in after]
        self.entries[first_entry:] = [
            e for e in self.entries[first_entry:] if not any(_inside(e.node, s) for s in spans)
        ]

    # ------------------------------------------------------------------ helpers

    @contextmanager
    def in_frame(self, frame: Frame) -> Iterator[None]:
        saved = self.frame
        self.frame = frame
        try:
            yield
        finally:
            self.frame = saved

    def keyword_dict(self, node: ast.expr) -> ast.expr:
        """``node``, or for a ``dict(k=v, ...)`` call of keywords only the dict display it
        equals (``{"k": v, ...}``: made once per call, located at it, its values the call's
        own nodes), so that the keys of a chat message or of a splatted request built this
        way are read as a literal's are."""
        if (
            not isinstance(node, ast.Call)
            or node.args
            or any(kw.arg is None for kw in node.keywords)
            or self.qualify(node.func) != "builtins.dict"
        ):
            return node
        made: ast.Dict | None = node.__dict__.get("_promptcache_dict")
        if made is None:
            made = ast.copy_location(
                ast.Dict(
                    keys=[ast.copy_location(ast.Constant(kw.arg), kw) for kw in node.keywords],
                    values=[kw.value for kw in node.keywords],
                ),
                node,
            )
            node.__dict__["_promptcache_dict"] = made
        return made

    def deref(self, node: ast.expr) -> tuple[ast.expr, Frame]:
        """Follow names to the literal last assigned to them; returns (node, frame to eval in)."""
        frame = self.frame
        for _ in range(4):
            if isinstance(node, ast.Name):
                target = frame.defs.get(node.id)
                if target is None and node.id not in frame.env:
                    target = self.module_frame.defs.get(node.id)
                    if target is not None:
                        frame = self.module_frame
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == frame.self_name
                and frame.cls is not None
            ):
                target = frame.cls.attr_defs.get(node.attr)
                if target is not None:
                    # instance attributes are evaluated where they are read (their value is
                    # already in cls.attrs); structure comes from the assignment
                    return target, frame
            else:
                return node, frame
            if target is None:
                return node, frame
            node = target
        return node, frame

    def _value(self, node: ast.expr, frame: Frame) -> Value:
        if frame is self.frame:
            return self.eval(node)
        with self.in_frame(frame):
            return self.eval(node)

    def _enter(
        self, region: str, node: ast.expr, frame: Frame, label: str, held: bool = False
    ) -> Value:
        """Evaluate ``node`` in ``frame`` (where it was written) and record it in ``region``;
        ``held``: written once into a conversation the function holds (``held_once``)."""
        if frame is self.frame:
            value = self.eval(node)
            if held:
                value = map_facts(value, held_once)
            self.record(region, value, node, label)
            return value
        with self.in_frame(frame):
            value = self.eval(node)
            if held:
                value = map_facts(value, held_once)
            self.record(region, value, node, label)
        return value

    def _block(self, region: str, node: ast.AST, value: Value) -> Block:
        length = non_ascii = None
        if value.const is not None:
            length = len(value.const)
            non_ascii = sum(1 for ch in value.const if ord(ch) > 127)
        elif isinstance(node, ast.Dict):
            measured = literal_length(node)
            if measured is not None:
                length, non_ascii = measured
        block = Block(region, node, value, length, non_ascii=non_ascii or 0)
        if isinstance(node, ast.Dict):
            self._breakpoint(block, node, "cache_control")
        return block

    def _breakpoint(self, block: Block, holder: ast.Dict, key: str) -> None:
        value = dict_get(holder, key)
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            return  # no key, or ``"cache_control": None``: no breakpoint
        block.bp_node = dict_key_node(holder, key)
        if isinstance(value, ast.Dict):
            block.breakpoint = value
            block.ttl_node = dict_get(value, "ttl")
        else:
            block.breakpoint = ast.Dict(keys=[], values=[])

    def _structure(self, node: ast.expr, frame: Frame) -> ast.expr:
        """The dict literal a list element names (``tools=[LOOKUP_TOOL]``), for breakpoints."""
        if not isinstance(node, ast.Name):
            return node
        with self.in_frame(frame):
            target, _ = self.deref(node)
        return target if isinstance(target, ast.Dict) else node

    def _text_node(self, node: ast.expr) -> ast.expr:
        text = dict_get(node, "text")
        return text if text is not None else node

    # ------------------------------------------------------------------ regions

    def walk_region(
        self,
        kind: str,
        expr: ast.expr,
        sink: SinkCall | None,
        label: str,
        at: ast.expr | None = None,
    ) -> None:
        """Walk ``expr``, an argument of a request (or an entry of a request's body), into its
        region; entries recorded meanwhile enter the request at ``at``, or at ``expr``
        (``sink_arg``): a splatted dict's entry at the ``**kwargs`` that splats it."""
        handler = getattr(self, f"region_{kind}")
        outer, self.sink_arg = self.sink_arg, at if at is not None else expr
        try:
            handler(expr, sink, label)
        finally:
            self.sink_arg = outer

    def region_tools(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if isinstance(node, (ast.List, ast.Tuple)):
            blocks: list[Block] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    self._enter("tools", elt, frame, label)
                    if sink is not None:
                        sink.complete = False
                    continue
                if dict_get(elt, "cachePoint") is not None and blocks:
                    self._breakpoint(blocks[-1], elt, "cachePoint")  # type: ignore[arg-type]
                    continue
                value = self._enter("tools", elt, frame, label)
                blocks.append(self._block("tools", self._structure(elt, frame), value))
            if sink is not None:
                sink.blocks.extend(blocks)
            if node is not expr:  # later appends and edits to the named list
                self.record("tools", self.eval(expr), expr, label)
            return
        value = self.eval(expr)
        self.record("tools", value, expr, label)
        if sink is not None:
            sink.blocks.append(Block("tools", expr, value, None, opaque=True))
            sink.complete = False

    def region_system(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if (
            isinstance(node, ast.Name)
            and node.id in self.functions
            and node.id not in (self.frame.env)
        ):
            self.mark_builder(self.functions[node.id], label)
            return
        if isinstance(node, (ast.List, ast.Tuple)):
            # system blocks bound once and sent beside a conversation the function holds
            # (``conversations.held_companions``): written there once
            held = (
                node is not expr
                and isinstance(frame.func, (ast.FunctionDef, ast.AsyncFunctionDef))
                and id(node) in held_companions(frame.func)
            )
            blocks: list[Block] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    self._enter("system", elt, frame, label, held)
                    if sink is not None:
                        sink.complete = False
                    continue
                if dict_get(elt, "cachePoint") is not None and blocks:
                    self._breakpoint(blocks[-1], elt, "cachePoint")  # type: ignore[arg-type]
                    continue
                text = self._text_node(elt)
                value = self._enter("system", text, frame, label, held)
                block = self._block("system", self._structure(elt, frame), value)
                blocks.append(block)
            if sink is not None:
                sink.blocks.extend(blocks)
            if node is not expr:  # later appends and edits to the named list
                self.record("system", self.eval(expr), expr, label)
            return
        if frame is not self.frame:
            value = self._enter("system", node, frame, label)
        else:
            value = self.eval(expr)
            where = node if isinstance(node, (ast.JoinedStr, ast.BinOp, ast.Call)) else expr
            self.record("system", value, where, label)
        if sink is not None:
            sink.blocks.append(self._block("system", node, value))

    def region_text(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        self.region_system(expr, sink, label)

    def region_messages(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if sink is not None and (self.recording or self.frame.summary is not None):
            self._note_turn_context(expr, node, frame, sink)
        if sink is not None and self.recording:
            self._note_turn_count(expr, node, frame, sink)
        elements: list[ast.expr] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._value(node.left, frame)
            # a history rendered by a call (``render(history) + [question]``) is rebuilt per
            # request, as a splatted call is; a stored history (``self.history + [...]``)
            # holds what was written into it once, frozen there
            if isinstance(node.left, ast.Call):
                self.record("messages", self._rendered(node.left, left, frame), node.left, label)
            if sink is not None:
                sink.complete = False
                sink.blocks.append(Block("messages", node.left, CLEAN, None, opaque=True))
            right, frame = (node.right, frame)
            if isinstance(right, (ast.List, ast.Tuple)):
                elements = list(right.elts)
            else:
                value = self._value(right, frame)
                # a rendered history after the literal (``[system] + render(history)``) is
                # prefix where the list is appended to before the sink (the newest message)
                if (
                    isinstance(right, ast.Call)
                    and node is not expr
                    and frame is self.frame
                    and self._grown(expr, node, sink)
                ):
                    self.record("messages", self._rendered(right, value, frame), right, label)
                return
        elif isinstance(node, (ast.List, ast.Tuple)):
            elements = list(node.elts)
        else:
            self.eval(expr)
            # a history rendered by a call into a list that is appended to before the request
            # (``messages = render(history); messages.append(question)``): what the call
            # returned is prefix (the name holds the appended newest message too)
            if (
                isinstance(node, (ast.Call, *_COMPREHENSIONS))
                and node is not expr
                and frame is self.frame
                and self._grown(expr, node, sink)
            ):
                if isinstance(node, ast.Call):
                    rendered = self._rendered(node, self._value(node, frame), frame)
                else:  # ``messages = [... for m in history]``, then the newest appended
                    iters = [gen.iter for gen in node.generators]
                    rendered = self._restamped(iters, self._value(node, frame), frame)
                self.record("messages", rendered, node, label)
            if sink is not None:
                sink.complete = False
                sink.blocks.append(Block("messages", expr, CLEAN, None, opaque=True))
            return
        # a named list appended to after its literal (``messages.append(question)``): the
        # newest message is the appended one, so every element of the literal is prefix
        grown = node is not expr and frame is self.frame and self._grown(expr, node, sink)
        # a conversation this function starts and resends in a loop: its messages were
        # written once (``conversations.held_conversations``)
        held = frame.func is not None and id(node) in held_conversations(frame.func)
        if grown and sink is not None:
            self._record_earlier_turns(expr, node, sink, label)
        for index, written in enumerate(elements):
            tail = index == len(elements) - 1 and not grown
            elt = self.keyword_dict(written)
            if isinstance(elt, ast.Starred) or not isinstance(elt, ast.Dict):
                value = self._value(elt, frame)
                if held:
                    value = map_facts(value, held_once)
                if sink is not None:
                    sink.complete = False
                    sink.blocks.append(Block("messages", elt, CLEAN, None, opaque=True))
                # a splatted stored history (``*history``) holds what was written into it once,
                # frozen there; a splatted call (``*render(history)``) is rebuilt per request
                fresh = not isinstance(elt, ast.Starred) or isinstance(elt.value, ast.Call)
                # a splatted comprehension over the history (``*[... for m in history]``, or
                # a name bound to one) is rebuilt per request too, from the frozen history
                comp = _comprehension(elt.value, frame) if isinstance(elt, ast.Starred) else None
                if not tail and (grown or fresh):
                    if isinstance(elt, ast.Starred) and isinstance(elt.value, ast.Call):
                        value = self._rendered(elt.value, value, frame)
                    self.record("messages", value, elt, label)
                elif not tail and comp is not None:
                    iters = [gen.iter for gen in comp.generators]
                    self.record("messages", self._restamped(iters, value, frame), elt, label)
                continue
            role = dict_get(elt, "role")
            role_name = role.value if isinstance(role, ast.Constant) else None
            region = "system" if role_name in ("system", "developer") else "messages"
            content = dict_get(elt, "content")
            for key, item in zip(elt.keys, elt.values, strict=True):
                if item is not content and item is not role:
                    self._value(item, frame)
                    if key is None and sink is not None:
                        sink.complete = False
            if content is None:
                continue
            pieces = content.elts if isinstance(content, (ast.List, ast.Tuple)) else [content]
            previous: Block | None = None
            for piece in pieces:
                if isinstance(piece, ast.Dict) and dict_get(piece, "cachePoint") is not None:
                    if previous is not None:
                        self._breakpoint(previous, piece, "cachePoint")
                    continue
                text = self._text_node(piece) if isinstance(piece, ast.Dict) else piece
                value = self._value(text, frame)
                if held:
                    value = map_facts(value, held_once)
                if not tail or region == "system":
                    self.record(region, value, text, label)
                if sink is not None:
                    block = self._block("messages", piece, value)
                    block.tail = tail
                    if block.length is None and not isinstance(piece, ast.Dict):
                        sink.complete = sink.complete and value.const is not None
                    sink.blocks.append(block)
                    previous = block

    def _note_turn_context(
        self, expr: ast.expr, node: ast.expr, frame: Frame, sink: SinkCall
    ) -> None:
        """Note on ``sink`` each system message ahead of a stored history whose content holds
        what the newest user message holds (``SinkCall.turn_context``): a list written in
        place or bound to a name (``[system, *history, user]``, ``[system] + history +
        [user]``, or a literal then added to in order before the sink: ``_added_parts``), its
        last element a user message, a history between that is a parameter or a field of
        ``self`` which the function appends to (the turn written back, read again next
        turn), and a parameter of the function, proven (no call the analysis cannot see on
        the way but a search's, ``retrieved``), in both. A history that is a parameter the
        function does not append to is noted in its summary instead (``turn_histories``):
        a caller that passes the history its client sent with the request reports it."""
        func = self.frame.func
        if func is None or frame is not self.frame or self.frame.once:
            return
        parts = _list_parts(node)
        if node is not expr and self._grown(expr, node, sink):
            if parts is None:
                return
            # a list bound to a literal, then added to in order before the request
            # (``messages = [system]; for m in history: messages.append(m); ...``)
            parts = _added_parts(func, expr, node, parts, sink.node)
        if parts is None or len(parts) < 2:
            return
        newest, stored = parts[-1]
        newest_message = self._literal_message(newest)
        if stored or _message_role(newest_message) != "user":
            return
        params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
        # the newest message's text is a parameter, whole (``"content": question``): the
        # turn's input, not a setting of the session written into it
        text = dict_get(newest_message, "content") if newest_message is not None else None
        if not isinstance(text, ast.Name) or text.id not in params:
            return
        own = (id(func),)
        held = {
            (f.param, f.detail)
            for f in self._value(text, frame).facts
            if f.kind is Kind.PARAM and f.fix == own and f.proven and f.detail == text.id
        }
        if not held:
            return
        # the system text: a keyword of the call (``system=``, ``instructions=``), ahead of
        # every message, or a system message of the list, ahead of what follows it
        candidates = [(kw.value, 0) for kw in sink.node.keywords if kw.arg in _SYSTEM_KEYWORDS]
        for index, (part, stored) in enumerate(parts[:-1]):
            message = None if stored else self._literal_message(part)
            if _message_role(message) in ("system", "developer"):
                content = dict_get(message, "content") if message is not None else None
                if content is not None:
                    candidates.append((content, index + 1))
        for content, start in candidates:
            history = grown = handed = None
            for later, later_stored in parts[start:-1]:
                base = _history_base(later)
                if later_stored and _stored_history(base, params, self.frame.self_name):
                    grown = _grows_in(func, base)
                    if grown is not None:
                        history = later
                        break
                    if handed is None and isinstance(base, ast.Name):
                        handed = later
            if history is None and handed is None:
                continue
            shared = sorted(
                (
                    f
                    for f in self._value(content, frame).facts
                    if f.kind is Kind.PARAM
                    and f.fix == own
                    and (
                        (f.proven and (f.param, f.detail) in held)
                        or (retrieved(f) and _entry_of_input(f, held))
                    )
                ),
                key=lambda f: (not f.proven, f.rank),
            )
            if not shared:
                continue
            if history is not None and grown is not None:
                if self.recording:
                    sink.turn_context.append(
                        TurnContext(content, history, newest, grown, shared[0])
                    )
            elif handed is not None:
                self._note_handed_history(content, handed, newest, shared[0])

    def _note_handed_history(
        self, content: ast.expr, history: ast.expr, newest: ast.expr, fact: Fact
    ) -> None:
        """Note in the function's summary (``Summary.turn_histories``) system text made from
        the turn's input ahead of a history the function is given and does not append to."""
        summary = self.frame.summary
        base = _history_base(history)
        if summary is None or not isinstance(base, ast.Name) or base.id not in summary.params:
            return
        index = summary.params.index(base.id)
        steps = tuple(s for s in fact.via if s[0].startswith(ASSUMED))
        noted = HandedHistory(
            index,
            _short_text(content),
            content.lineno,
            content.col_offset,
            "",
            _short_text(history),
            newest.lineno,
            fact.detail.split("[", 1)[0].split(".", 1)[0],
            steps,
        )
        if noted not in summary.turn_histories:
            summary.turn_histories.append(noted)

    def note_handed_turns(
        self,
        summary: Summary,
        arg_values: dict[int, tuple[Value, ast.expr | None]],
        node: ast.Call,
    ) -> None:
        """At a call of a function that puts text made from the turn's input ahead of a
        history it is given (``Summary.turn_histories``), note the call
        (``handed_turns``) where that history is the one the request's client sent: a field
        of a parameter of a web route's handler (``@router.post(...)``, ``@app.route``), or
        its messages copied in order (``[{"role": m.role, "content": m.content} for m in
        data.history]``). The client keeps the conversation and sends it back whole with
        each question, so each request's history is the last one's and its new turn. The
        turn's input must be what the request carried too (``data.question``, a parameter of
        the handler): a route that asks a fixed question of that history (``answer("Sum it
        up", data.history)``) searches for the same text each time."""
        func = self.frame.func
        if func is None or not _route_handler(func):
            return
        params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
        for noted in summary.turn_histories:
            where = arg_values.get(noted.param, (CLEAN, None))[1]
            asked = (
                arg_values.get(summary.params.index(noted.name), (CLEAN, None))[1]
                if noted.name in summary.params
                else None
            )
            if where is None or asked is None:
                continue
            given, frame = self.deref(where)
            if frame is not self.frame or not _client_history(given, params):
                continue
            question, frame = self.deref(asked)
            if frame is self.frame and _request_input(question, params):
                self.handed_turns.append(HandedTurn(node, where, noted, summary.name))

    def _note_turn_count(
        self, expr: ast.expr, node: ast.expr, frame: Frame, sink: SinkCall
    ) -> None:
        """Note on ``sink`` each system text ahead of a history that the loop around the
        request appends to, holding a count that loop changes on every pass
        (``SinkCall.turn_counts``): ``f"{remaining} calls left"`` with ``remaining -= 1``, or
        ``len(history)``, in ``system=``/``instructions=`` or a system message of the list,
        before ``*history`` (or ``messages=history``) appended to in that loop."""
        func = self.frame.func
        if func is None or frame is not self.frame or self.frame.once or not self.frame.loops:
            return
        loop = self.frame.loops[-1]
        parts: list[tuple[ast.expr, bool]] | None
        if isinstance(expr, ast.Name) and _appended_in(loop, expr.id, every=False) is not None:
            parts = [(expr, True)]
        else:
            parts = _list_parts(node)
        if not parts:
            return
        candidates = [(kw.value, 0) for kw in sink.node.keywords if kw.arg in _SYSTEM_KEYWORDS]
        for index, (part, stored) in enumerate(parts):
            message = None if stored else self._literal_message(part)
            if _message_role(message) in ("system", "developer"):
                content = dict_get(message, "content") if message is not None else None
                if content is not None:
                    candidates.append((content, index + 1))
        for content, start in candidates:
            history = grown = None
            for later, later_stored in parts[start:]:
                if later_stored and isinstance(later, ast.Name):
                    grown = _appended_in(loop, later.id, every=False)
                    if grown is not None:
                        history = later
                        break
            if history is None or grown is None:
                continue
            text = content
            if isinstance(content, ast.Name):
                text = _bound_each_pass(func, loop, content.id) or content
            found = _turn_count(func, loop, text)
            if found is not None:
                count, changed = found
                sink.turn_counts.append(TurnCount(content, count, changed, history, grown))

    def _literal_message(self, node: ast.expr) -> ast.Dict | None:
        """The dict literal of a message: ``node`` itself, or the literal a local name was
        last bound to."""
        if isinstance(node, ast.Name):
            bound = self.frame.defs.get(node.id)
            node = bound if bound is not None else node
        return node if isinstance(node, ast.Dict) else None

    def region_bedrock_tools(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        tools = dict_get(node, "tools")
        if isinstance(node, ast.Dict) and tools is not None:
            for item in node.values:
                if item is not tools:
                    self._value(item, frame)
            if frame is self.frame:
                self.region_tools(tools, sink, label)
            else:
                with self.in_frame(frame):
                    self.region_tools(tools, sink, label)
            held = expr if node is not expr else getattr(node, "_promptcache_held", None)
            if held is not None:
                # the dict last assigned to the name (or to a splatted dict's key) is one
                # path's; what the name holds here joins every path's (``config = {"tools":
                # tools}`` in one branch, ``{"tools": DEFAULT}`` in the other), and later edits
                # to its list
                self.record("tools", self.eval(_key_node(held, "tools")), expr, label)
            return
        self.region_tools(expr, sink, label)

    def region_json_body(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if (
            isinstance(node, ast.Call)
            and self.qualify(node.func) == "json.dumps"
            and node.args
            and frame is self.frame
        ):
            node, frame = self.deref(node.args[0])
        if not isinstance(node, ast.Dict) or frame is not self.frame:
            self.eval(expr)
            if sink is not None:
                sink.complete = False
            return
        regions = {"system": "system", "messages": "messages", "tools": "tools"}
        for key, item in zip(node.keys, node.values, strict=True):
            name = key.value if isinstance(key, ast.Constant) else None
            if isinstance(name, str) and name in regions:
                self.walk_region(regions[name], item, sink, f"{label} {name}")
            else:
                self.eval(item)

    def region_gemini_config(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if isinstance(node, ast.Dict) and frame is self.frame:
            regions = {
                "system_instruction": "system",
                "tools": "tools",
                "contents": "cache_contents",
            }
            for key, item in zip(node.keys, node.values, strict=True):
                name = key.value if isinstance(key, ast.Constant) else None
                if isinstance(name, str) and name in regions:
                    self.walk_region(regions[name], item, sink, f"{label} {name}")
                else:
                    self.eval(item)
            return
        self.eval(expr)

    def region_cache_contents(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        self.record("messages", self.eval(expr), expr, label)

    def region_lc_messages(self, expr: ast.expr, sink: SinkCall | None, label: str) -> None:
        node, frame = self.deref(expr)
        if not isinstance(node, (ast.List, ast.Tuple)) or frame is not self.frame:
            self.eval(expr)
            return
        for index, elt in enumerate(node.elts):
            tail = index == len(node.elts) - 1
            if isinstance(elt, ast.Tuple) and len(elt.elts) == 2:
                role, text = elt.elts
                value = self.eval(text)
                if isinstance(role, ast.Constant) and role.value == "system":
                    self.record("system", value, text, label)
                elif not tail:
                    self.record("messages", value, text, label)
            else:
                self.eval(elt)


def tail_system_turns(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[int]:
    """The ids of the value nodes (its content) of each system or developer message that
    ``func`` appends last to a list of messages it made: a local name bound earlier (in the
    same block or one around it) to something other than an empty list (``messages =
    build(history)``, ``[system, *history]``), appended to where nothing that can run after
    the append (the rest of its block and of each block around it, a loop around it whole
    unless the name is bound inside that loop) adds to that name, or reads it other than
    whole as a call's argument or a dict display's value (``generate(messages)``). Such a
    message (a per-request hint, ``[Event: ...]``) is the newest of its request, after all
    that a cache holds, not the system prompt at its head. One appended to an empty list,
    followed by more (``messages.extend(history)``, ``messages.append(user)``), or where the
    list is read in part or spliced (``[*messages, user]``, ``messages + rest``) is not one.
    Found once per tree (kept on the node)."""
    known: frozenset[int] | None = func.__dict__.get("_tail_turns")
    if known is None:
        out: set[int] = set()
        parents: dict[int, ast.AST] = {}
        for node in ast.walk(func):
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
        _tail_turns(func.body, [], parents, out)
        known = func.__dict__["_tail_turns"] = frozenset(out)
    return known


def _tail_turns(
    body: list[ast.stmt],
    path: list[tuple[list[ast.stmt], int]],
    parents: dict[int, ast.AST],
    out: set[int],
) -> None:
    for index, stmt in enumerate(body):
        here = [*path, (body, index)]
        found = _appended(stmt)
        if found is not None and found[0].isidentifier():
            key, elements = found
            contents = [
                node
                for elt in elements
                for parts in [_message_parts(elt)]
                if parts is not None and parts[0] in ("system", "developer")
                for node in parts[1]
            ]
            if contents and _appended_last(key, here, parents):
                out.update(id(node) for node in contents)
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                _tail_turns(block, here, parents, out)
        for handler in getattr(stmt, "handlers", ()):
            _tail_turns(handler.body, here, parents, out)
        for case in getattr(stmt, "cases", ()):
            _tail_turns(case.body, here, parents, out)


def _empty_list(node: ast.expr) -> bool:
    return (isinstance(node, (ast.List, ast.Tuple)) and not node.elts) or (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "list"
        and not node.args
    )


def _appended_last(
    key: str, path: list[tuple[list[ast.stmt], int]], parents: dict[int, ast.AST]
) -> bool:
    """Whether the append at the end of ``path`` is the last thing added to the local list
    ``key`` (``tail_system_turns``)."""
    bound_at = -1
    turn_before = False
    for level in range(len(path) - 1, -1, -1):
        block, index = path[level]
        for stmt in reversed(block[:index]):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == key
            ):
                if _empty_list(stmt.value) and not turn_before:
                    return False
                bound_at = level
                break
            turn_before = turn_before or _turns_added(stmt, key)
        if bound_at >= 0:
            break
    if bound_at < 0:
        return False
    after: list[ast.stmt] = []
    for level, (block, index) in enumerate(path):
        after.extend(block[index + 1 :])
        if level < len(path) - 1 and level >= bound_at:
            loop = block[index]
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
                after.extend(loop.body)
    for stmt in after:
        for node in ast.walk(stmt):
            if isinstance(node, ast.stmt):
                found = _appended(node)
                if found is not None and found[0] == key:
                    return False
            if isinstance(node, ast.Name) and node.id == key and isinstance(node.ctx, ast.Load):
                parent = parents.get(id(node))
                whole = (isinstance(parent, ast.Call) and node in parent.args) or (
                    isinstance(parent, ast.keyword)
                    or (isinstance(parent, ast.Dict) and node in parent.values)
                )
                if not whole and not _read_in_place(node, parents, after):
                    return False
    return True


def _turns_added(stmt: ast.stmt, key: str) -> bool:
    """Whether ``stmt`` adds the conversation's turns to the local list ``key``:
    ``key.extend(history)`` or ``key += history`` of anything but a literal list, or
    ``key.append({"role": "user", ...})``; a system message appended after it, last, follows
    the newest user turn (``tail_system_turns``)."""
    target: ast.expr
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
        target, added, method = stmt.target, stmt.value, "extend"
    elif (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in ("append", "extend")
        and len(stmt.value.args) == 1
    ):
        target, added, method = stmt.value.func.value, stmt.value.args[0], stmt.value.func.attr
    else:
        return False
    if not (isinstance(target, ast.Name) and target.id == key):
        return False
    if method == "extend":
        return not isinstance(added, (ast.List, ast.Tuple, ast.Constant))
    parts = _message_parts(added)
    return parts is not None and parts[0] == "user"


def _read_in_place(node: ast.Name, parents: dict[int, ast.AST], after: list[ast.stmt]) -> bool:
    """Whether the list named by ``node``, read after a message appended last to it
    (``_appended_last``), keeps that message last and sends nothing more after it: one element
    read at a constant index (``messages[-1].get("role")``), a truth test (``if messages and
    ...``, ``not messages``), an insert at a constant index or at a name bound only to constant
    numbers (``messages.insert(0, summary)``: the head), or a comprehension that maps each
    message, in order, into a call's argument (``", ".join(... for m in messages)``) or into a
    name nothing after adds to, or a loop over every message in order (no ``break``)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Subscript) and parent.value is node:
        index = parent.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
            index = index.operand
        return isinstance(index, ast.Constant) and type(index.value) is int
    child: ast.AST = node
    while isinstance(parent, (ast.BoolOp, ast.UnaryOp)) and (
        not isinstance(parent, ast.UnaryOp) or isinstance(parent.op, ast.Not)
    ):
        child, parent = parent, parents.get(id(parent))
    if isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is child:
        return True
    if child is not node:
        return False
    if isinstance(parent, ast.Attribute) and parent.attr == "insert":
        call = parents.get(id(parent))
        return (
            isinstance(call, ast.Call)
            and call.func is parent
            and len(call.args) == 2
            and _head_index(call.args[0], parents)
        )
    if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is node:
        return not parent.orelse and not any(
            isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(parent)
        )
    if isinstance(parent, ast.comprehension) and parent.iter is node and not parent.ifs:
        comp = parents.get(id(parent))
        if not isinstance(comp, (ast.ListComp, ast.GeneratorExp)) or len(comp.generators) != 1:
            return False
        holder = parents.get(id(comp))
        if isinstance(holder, ast.Call) and comp in holder.args:
            return True
        if (
            isinstance(holder, ast.Assign)
            and len(holder.targets) == 1
            and isinstance(holder.targets[0], ast.Name)
        ):
            copy = holder.targets[0].id
            return not any(
                _turns_added(s, copy)
                or (
                    isinstance(s, ast.Expr)
                    and isinstance(s.value, ast.Call)
                    and isinstance(s.value.func, ast.Attribute)
                    and isinstance(s.value.func.value, ast.Name)
                    and s.value.func.value.id == copy
                    and s.value.func.attr in ("append", "extend", "insert")
                )
                or (_appended(s) or ("",))[0] == copy
                for stmt in after
                for s in ast.walk(stmt)
                if isinstance(s, ast.stmt)
            )
    return False


def _head_index(index: ast.expr, parents: dict[int, ast.AST]) -> bool:
    """Whether an insert's ``index`` is a constant number, or a name that every assignment in
    its function binds to a constant number or adds one to (``insert_idx = 0``, ``insert_idx
    += 1``): a place near the head, ahead of the history and the newest turn."""
    if isinstance(index, ast.Constant):
        return type(index.value) is int and index.value >= 0
    if not isinstance(index, ast.Name):
        return False
    func: ast.AST | None = index
    while func is not None and not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        func = parents.get(id(func))
    if func is None:
        return False
    bound = False
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == index.id for t in node.targets
        ):
            if not (isinstance(node.value, ast.Constant) and type(node.value.value) is int):
                return False
            bound = True
        elif (
            isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr))
            and isinstance(node.target, ast.Name)
            and node.target.id == index.id
        ):
            if not (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int
            ):
                return False
        elif isinstance(node, (ast.For, ast.comprehension)) and any(
            isinstance(t, ast.Name) and t.id == index.id for t in ast.walk(node.target)
        ):
            return False
    return bound
