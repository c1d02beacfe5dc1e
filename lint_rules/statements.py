"""Statement execution for the taint engine (mixed into ``taint.Analyzer``).

Assignments bind values to names, tuples, ``self.<attr>`` and subscripts; loops push the facts
of an unordered iteration onto whatever the body appends to; an ``if`` on request data marks
values that differ between its branches as VARIES; ``return`` feeds the function's summary.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from . import sinks
from .calls import Unresolved, order_of, split_grain, unproven, with_grain
from .conversations import held_companions, held_conversations
from .facts import (
    ANY_KEY,
    CHOSEN_BY_IF,
    CLEAN,
    KEYED_KINDS,
    MESSAGE_ROLES,
    SELF,
    Fact,
    Kind,
    Shape,
    Value,
    branches_only,
    canonical,
    concat,
    field_keyed,
    held_once,
    join,
    joined_servers,
    keyed,
    keyed_conditions,
    made_within,
    map_facts,
    narrowed,
    other_branch,
    replace,
    sampled,
)
from .frames import (
    INIT_METHODS,
    ClassInfo,
    EngineState,
    ExternalClass,
    Frame,
    Summary,
    element_fields,
    fields_known,
    held_inside,
    keys_kept,
    merge,
    positions_known,
    with_every_field,
)
from .nodes import tested_subject
from .toolnames import combine

#: dict keys that put a cache breakpoint on a block (Anthropic, Bedrock)
BREAKPOINT_KEYS = frozenset({"cache_control", "cachePoint"})
#: fact kinds a summary's ``stores`` keep (loop-variable bookkeeping is local to a body)
STORED_KINDS = frozenset(Kind) - {Kind.LOOP}
#: calls that hand back a new object holding a shallow or deep copy of their argument
_COPIES = frozenset({"copy.copy", "copy.deepcopy", "builtins.dict", "builtins.list"})


#: library calls that declare a class's field without holding an object of their own
#: (``session: Any = Field(default=None)``, ``_client = PrivateAttr(default=None)``)
FIELD_DECLARATIONS = frozenset(
    {
        "pydantic.Field",
        "pydantic.PrivateAttr",
        "pydantic.fields.Field",
        "pydantic.fields.PrivateAttr",
        "dataclasses.field",
    }
)


def holds_no_object(value: Value) -> bool:
    """True for what a field holds before an object is stored there, or after it is let go:
    ``None`` (``True``/``False``) or a library's field declaration, carrying no fact but the
    parameter it is read from (``self._client`` read in a method)."""
    if value.items is not None or value.elts is not None:
        return False
    if any(f.kind is not Kind.PARAM for f in value.facts):
        return False
    if value.shape is Shape.UNKNOWN and value.ref == "literal":
        return True
    return isinstance(value.ref, Unresolved) and value.ref.qual in FIELD_DECLARATIONS


def _enumerated(stmt: ast.For | ast.AsyncFor) -> ast.expr | None:
    """The list of ``for i, x in enumerate(items)`` (``items``), else None."""
    call = stmt.iter
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "enumerate"
        and len(call.args) == 1
        and isinstance(call.args[0], (ast.Name, ast.Attribute))
        and not call.keywords
        and isinstance(stmt.target, ast.Tuple)
        and len(stmt.target.elts) == 2
    ):
        return call.args[0]
    return None


def _pairs_positions(iterable: ast.expr) -> bool:
    """True for ``enumerate(...)`` and ``zip(...)``: each element may carry a position in
    the iteration order beside the item."""
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in ("enumerate", "zip")
    )


def _binds(loop: ast.For | ast.AsyncFor, holder: ast.expr) -> bool:
    """True when ``loop`` (its target or body) binds ``holder``'s name or the field it is
    (``tools = []`` in the body, ``self.tools = []``), found once per loop (kept on the
    node): what it holds then lasts one turn."""
    bound: frozenset[str] | None = loop.__dict__.get("_bound_texts")
    if bound is None:
        nodes = [node for part in (loop.target, *loop.body) for node in ast.walk(part)]
        # ``tools += more`` extends what ``tools`` holds, it does not start it again
        extended = {id(node.target) for node in nodes if isinstance(node, ast.AugAssign)}
        bound = loop.__dict__["_bound_texts"] = frozenset(
            ast.unparse(node)
            for node in nodes
            if isinstance(node, (ast.Name, ast.Attribute))
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and id(node) not in extended
        )
    while isinstance(holder, ast.Subscript):
        holder = holder.value
    while True:
        if ast.unparse(holder) in bound:
            return True
        if not isinstance(holder, ast.Attribute):
            return False
        holder = holder.value


def _into_self(holder: ast.expr, self_name: str | None) -> bool:
    """True when ``holder`` is a field of ``self`` or an item of one (``self.ids``,
    ``self.ids[k]``)."""
    while isinstance(holder, ast.Subscript):
        holder = holder.value
    return (
        isinstance(holder, ast.Attribute)
        and isinstance(holder.value, ast.Name)
        and holder.value.id == self_name
    )


def _names(expr: ast.expr) -> set[str]:
    """The names an expression reads."""
    return {node.id for node in ast.walk(expr) if isinstance(node, ast.Name)}


def _list_held(value: Value, made: ast.expr | None) -> bool:
    """True when a name holds a list: of list shape, or made as ``[None] * n``."""
    if value.shape is Shape.LIST:
        return True
    return (
        isinstance(made, ast.BinOp)
        and isinstance(made.op, ast.Mult)
        and (isinstance(made.left, ast.List) or isinstance(made.right, ast.List))
    )


#: at most this many text returns of one function are kept (``Summary.text_returns``)
_TEXT_RETURNS = 4


def _text_return(node: ast.expr) -> bool:
    """An f-string or a ``+`` of text literals and f-strings, with no call in it."""
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ast.Add) or not any(
            isinstance(side, (ast.JoinedStr, ast.Constant)) for side in (node.left, node.right)
        ):
            return False
    elif not isinstance(node, ast.JoinedStr):
        return False
    return not any(isinstance(sub, (ast.Call, ast.Await, ast.NamedExpr)) for sub in ast.walk(node))


def _added_text(stmt: ast.AugAssign, held: ast.expr | None, old: Value) -> ast.BinOp | None:
    """``held + stmt.value`` for ``name += f"..."`` (or a text literal) where ``name`` was
    last bound to text: an f-string, a text literal, a ``+`` of them or a name of constant
    text (``old``: its value); None otherwise. Made once per statement and ``held`` (kept on
    the node), at the statement's place."""
    text = (ast.JoinedStr, ast.Constant)
    if not (
        isinstance(stmt.op, ast.Add)
        and isinstance(stmt.value, text)
        and (isinstance(stmt.value, ast.JoinedStr) or isinstance(stmt.value.value, str))
        and (
            isinstance(held, (ast.JoinedStr, ast.BinOp))
            or (isinstance(held, ast.Constant) and isinstance(held.value, str))
            or (isinstance(held, (ast.Name, ast.Attribute)) and old.const is not None)
        )
    ):
        return None
    assert held is not None
    made: dict[int, ast.BinOp] = stmt.__dict__.setdefault("_promptcache_added", {})
    found = made.get(id(held))
    if found is None:
        found = made[id(held)] = ast.copy_location(ast.BinOp(held, ast.Add(), stmt.value), stmt)
    return found


def _as_extend(stmt: ast.AugAssign, defs: dict[str, ast.expr]) -> ast.Call | None:
    """``name.extend(value)`` for ``name += value`` where ``name`` was last bound to a list
    display or a list comprehension (``defs``: the frame's last bindings): a list extended in
    place, the same object, not a new binding. None for any other augmented assignment. The
    call is made once per statement (kept on the node), at the statement's place."""
    target = stmt.target
    if not (
        isinstance(stmt.op, ast.Add)
        and isinstance(target, ast.Name)
        and isinstance(defs.get(target.id), (ast.List, ast.ListComp))
    ):
        return None
    made: ast.Call | None = stmt.__dict__.get("_promptcache_extend")
    if made is None:
        receiver = ast.copy_location(ast.Name(target.id, ast.Load()), target)
        func = ast.copy_location(ast.Attribute(receiver, "extend", ast.Load()), target)
        made = ast.copy_location(ast.Call(func, [stmt.value], []), stmt)
        stmt.__dict__["_promptcache_extend"] = made
    return made


def _key_copy(stmt: ast.For | ast.AsyncFor) -> tuple[str, str, list[ast.expr]] | None:
    """``("d", "out", tests)`` for a loop ``for k, v in d.items():`` whose body only copies
    each entry, ``out[k] = v``, maybe under filters that call nothing (``if v is not None:``,
    or ``if v is None: continue`` before the copy); ``tests`` are those filters. None for any
    other loop."""
    it = stmt.iter
    target = stmt.target
    if not (
        isinstance(it, ast.Call)
        and not it.args
        and not it.keywords
        and isinstance(it.func, ast.Attribute)
        and it.func.attr == "items"
        and isinstance(it.func.value, ast.Name)
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and all(isinstance(n, ast.Name) for n in target.elts)
        and not stmt.orelse
    ):
        return None
    key, value = (n.id for n in target.elts if isinstance(n, ast.Name))
    source = it.func.value.id
    if key == value or source in (key, value):
        return None
    outs: set[str] = set()
    tests: list[ast.expr] = []

    def copies(body: list[ast.stmt]) -> bool:
        for sub in body:
            if isinstance(sub, ast.If) and not sub.orelse:
                if any(isinstance(n, (ast.Call, ast.NamedExpr)) for n in ast.walk(sub.test)):
                    return False
                tests.append(sub.test)
                if [type(s) for s in sub.body] == [ast.Continue]:
                    continue
                if not copies(sub.body):
                    return False
            elif (
                isinstance(sub, ast.Assign)
                and len(sub.targets) == 1
                and isinstance(sub.targets[0], ast.Subscript)
                and isinstance(sub.targets[0].value, ast.Name)
                and isinstance(sub.targets[0].slice, ast.Name)
                and sub.targets[0].slice.id == key
                and isinstance(sub.value, ast.Name)
                and sub.value.id == value
            ):
                outs.add(sub.targets[0].value.id)
            else:
                return False
        return True

    if not copies(stmt.body) or len(outs) != 1:
        return None
    out = outs.pop()
    if out in (key, value, source):
        return None
    return source, out, tests


def _keyed_dict(value: Value) -> bool:
    """Whether ``value`` is a plain dict whose keys the analysis knows (``{"model": m, ...}``,
    ``Value.items``), not an instance of a project class (whose fields ``ClassInfo`` keeps)."""
    return (
        value.items is not None
        and value.shape is Shape.DICT
        and not isinstance(value.ref, (ClassInfo, ExternalClass))
    )


def _with_key(old: Value, key: str, added: Value) -> tuple[tuple[str, Value], ...]:
    """The items of the keyed dict ``old`` once ``added`` is stored under ``key``."""
    return tuple({**dict(old.items or ()), key: added}.items())


def _stored_key(stored: ast.expr, name: str) -> str | None:
    """``"k"`` for a store ``name["k"] = ...`` into the name itself, else None."""
    if (
        isinstance(stored, ast.Subscript)
        and isinstance(stored.value, ast.Name)
        and stored.value.id == name
        and isinstance(stored.slice, ast.Constant)
        and isinstance(stored.slice.value, str)
    ):
        return stored.slice.value
    return None


def _stores_what_it_tests(stmt: ast.If) -> bool:
    """True for ``if value: config["key"] = value`` (the test ``value``, ``value is not
    None`` or ``not value``; no ``else``; a body of stores of that name under constant string
    keys): what the dict then holds is a function of ``value`` alone, whose facts the store
    carries, so the condition chooses nothing of its own (the dict's other keys, such as its
    tools, are not chosen by it)."""
    test = tested_subject(stmt.test)
    if not isinstance(test, ast.Name) or stmt.orelse:
        return False
    return all(
        isinstance(sub, ast.Assign)
        and len(sub.targets) == 1
        and isinstance(sub.targets[0], ast.Subscript)
        and isinstance(sub.targets[0].value, ast.Name)
        and isinstance(sub.targets[0].slice, ast.Constant)
        and isinstance(sub.targets[0].slice.value, str)
        and isinstance(sub.value, ast.Name)
        and sub.value.id == test.id
        for sub in stmt.body
    )


def stored_elem(old: Value, stored: ast.expr, added: Value) -> Value | None:
    """``Value.elem`` of the list ``old`` once ``added`` is stored at ``stored``: with
    ``msgs[i]["key"] = v`` (one element's entry of a constant key) the elements' ``key`` may
    hold ``added`` too; any other store leaves its elements unknown (None)."""
    elem = old.elem
    if (
        elem is None
        or elem.items is None
        or old.shape is not Shape.LIST
        or not isinstance(stored, ast.Subscript)
        or not isinstance(stored.value, ast.Subscript)
        or not isinstance(stored.value.value, ast.Name)
        or not isinstance(stored.slice, ast.Constant)
        or not isinstance(stored.slice.value, str)
    ):
        return None
    key = stored.slice.value
    items = dict(elem.items)
    items[key] = merge(items[key], added) if key in items else added
    return replace(
        elem,
        facts=elem.facts | added.facts,
        items=tuple(sorted(items.items())),
    )


#: operators folded by ``constant_truth`` (no power: ``9 ** 9 ** 9`` would not end)
_FOLDED_BINOPS: dict[type, Callable[[Any, Any], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_FOLDED_COMPARES: dict[type, Callable[[Any, Any], object]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_UNKNOWN = object()


def _literal_value(node: ast.expr, fixed: Mapping[str, object] = {}) -> object:
    """The value of an expression made only of literals (numbers, booleans, ``None``,
    strings), names of ``fixed`` (name -> the literal it always holds) and arithmetic,
    comparisons, ``not`` and ``and``/``or`` of them; ``_UNKNOWN`` for anything else (another
    name, a call, an operator not folded here). Arithmetic is folded on numbers only."""
    if isinstance(node, ast.Name):
        return fixed.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Constant):
        literal = node.value
        if literal is None or isinstance(literal, (bool, int, float, str)):
            return literal
        return _UNKNOWN
    if isinstance(node, ast.UnaryOp):
        operand = _literal_value(node.operand, fixed)
        if operand is _UNKNOWN:
            return _UNKNOWN
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(operand, (int, float)) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -operand if isinstance(node.op, ast.USub) else +operand
        return _UNKNOWN
    if isinstance(node, ast.BinOp):
        fold = _FOLDED_BINOPS.get(type(node.op))
        left, right = _literal_value(node.left, fixed), _literal_value(node.right, fixed)
        if fold is None or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)
        ):
            return _UNKNOWN
        try:
            return fold(left, right)
        except (ArithmeticError, ValueError):
            return _UNKNOWN
    if isinstance(node, ast.Compare):
        left = _literal_value(node.left, fixed)
        result = True
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            fold = _FOLDED_COMPARES.get(type(op))
            right = _literal_value(comparator, fixed)
            if fold is None or left is _UNKNOWN or right is _UNKNOWN:
                return _UNKNOWN
            try:
                result = result and bool(fold(left, right))
            except TypeError:
                return _UNKNOWN
            left = right
        return result
    if isinstance(node, ast.BoolOp):
        values = [_literal_value(v, fixed) for v in node.values]
        if any(v is _UNKNOWN for v in values):
            return _UNKNOWN
        out = values[0]
        for value in values[1:]:
            if isinstance(node.op, ast.And) and not out:
                break
            if isinstance(node.op, ast.Or) and out:
                break
            out = value
        return out
    return _UNKNOWN


def constant_truth(
    test: ast.expr,
    func: ast.FunctionDef | ast.AsyncFunctionDef | None = None,
) -> bool | None:
    """Whether a condition made only of literals holds (``0 % 2`` never, ``1 < 2`` always),
    or of the local names of ``func`` bound once to a literal (``precise = False``, then
    ``if precise:``): the branch it rules out can never run. ``None`` when the condition
    reads anything else."""
    value = _literal_value(test, fixed_locals(func) if func is not None else {})
    return None if value is _UNKNOWN else bool(value)


def fixed_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Mapping[str, object]:
    """The local names of ``func`` that always hold one literal: bound exactly once in its
    body, by ``name = <literal>`` (``precise = False``), and by nothing else (no parameter,
    loop target, ``with``/``except``/``import`` name, augmented assignment, ``del``,
    ``global``/``nonlocal`` there or ``nonlocal`` in a function nested in it). A read then
    gets that literal or fails. Found once per tree (kept on the node; callers must not
    change the mapping)."""
    known: dict[str, object] | None = func.__dict__.get("_fixed_locals")
    if known is None:
        known = func.__dict__["_fixed_locals"] = _find_fixed_locals(func)
    return known


#: the node types ``_find_fixed_locals`` looks at; any other node only has its children visited
_BINDING_NODES = frozenset(
    {
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.Lambda,
        ast.ClassDef,
        ast.Global,
        ast.Nonlocal,
        ast.Name,
        ast.Assign,
        ast.alias,
        ast.ExceptHandler,
        ast.MatchAs,
        ast.MatchStar,
        ast.MatchMapping,
        ast.AugAssign,
    }
)


def _push_children(node: ast.AST, todo: list[ast.AST]) -> None:
    """Append ``node``'s children to ``todo`` in ``ast.iter_child_nodes``' order, less the
    ``ctx`` of a name, attribute, subscript or display (an ``ast.Load``/``Store``/``Del``:
    no child, no binding)."""
    node_type = ast.AST
    for name in node._fields:
        if name == "ctx":
            continue
        value = getattr(node, name, None)
        if isinstance(value, node_type):
            todo.append(value)
        elif isinstance(value, list):
            todo.extend([item for item in value if isinstance(item, node_type)])


def _nested_shared(node: ast.AST) -> set[str]:
    """The names of every ``global`` and ``nonlocal`` statement in ``node``."""
    out: set[str] = set()
    todo: list[ast.AST] = [node]
    while todo:
        sub = todo.pop()
        cls = sub.__class__
        if cls is ast.Global or cls is ast.Nonlocal:
            out.update(sub.names)  # type: ignore[attr-defined]
        elif cls is not ast.Name and cls is not ast.Constant:
            _push_children(sub, todo)
    return out


def _find_fixed_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object]:
    bindings: dict[str, int] = {}
    literal: dict[str, object] = {}
    shared: set[str] = set()
    args = func.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            shared.add(arg.arg)
    todo: list[ast.AST] = list(func.body)
    special = _BINDING_NODES
    while todo:
        node = todo.pop()
        cls = node.__class__
        if cls not in special:
            _push_children(node, todo)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            if not isinstance(node, ast.Lambda):
                bindings[node.name] = bindings.get(node.name, 0) + 2
            # a nested function may rebind one of ours through ``nonlocal``
            shared.update(_nested_shared(node))
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            shared.update(node.names)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bindings[node.id] = bindings.get(node.id, 0) + 1
            continue  # its only child is its ``ctx``
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            value = _literal_value(node.value)
            if isinstance(target, ast.Name) and value is not _UNKNOWN:
                literal[target.id] = value
        else:
            # other bindings: ``import x as name``, ``except E as name``, ``case name``,
            # ``name += 1`` (its target is counted as well)
            name = None
            if isinstance(node, ast.alias):
                name = (node.asname or node.name).split(".")[0]
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                name = node.name
            elif isinstance(node, ast.MatchMapping):
                name = node.rest
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                name = node.target.id
            if name:
                bindings[name] = bindings.get(name, 0) + 2
        _push_children(node, todo)
    return {
        name: value
        for name, value in literal.items()
        if bindings.get(name) == 1 and name not in shared
    }


def _body_nodes(body: list[ast.stmt]) -> list[tuple[ast.AST, bool]]:
    """The nodes of a loop's ``body`` (not those of the functions and classes it defines),
    each with whether it runs only under a condition: inside an ``if``, or after an ``if``
    of the body that skips the rest (``if entry.task != task: continue``)."""
    out: list[tuple[ast.AST, bool]] = []
    todo: list[tuple[ast.AST, bool]] = []
    guarded = False
    for stmt in body:
        todo.append((stmt, guarded))
        if isinstance(stmt, ast.If) and _skips(stmt.body):
            guarded = True
    while todo:
        node, under = todo.pop()
        out.append((node, under))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.If):
            todo.append((node.test, under))
            todo.extend((sub, True) for sub in [*node.body, *node.orelse])
        else:
            todo.extend((sub, under) for sub in ast.iter_child_nodes(node))
    return out


def _skips(body: list[ast.stmt]) -> bool:
    """True when ``body`` ends by leaving the loop's turn (``continue``, ``break``, ...)."""
    return bool(body) and isinstance(body[-1], (ast.Continue, ast.Break, ast.Return, ast.Raise))


def _target_names(target: ast.expr) -> set[str]:
    """The names an assignment target binds (``best_score, best = ...``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for elt in target.elts for name in _target_names(elt)}
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def loop_names(stmt: ast.For | ast.AsyncFor) -> tuple[set[str], set[str], set[int]]:
    """The names a loop's body picks an element into, those it gathers into, and the ids of
    the ``return`` statements that pick one. Picked: bound only under a condition by plain
    assignments whose value reads neither the name itself nor the iterable's names (``best =
    item``, ``best_score, best = score, item``). Gathered: every other name the body binds or
    changes (``text += item``, ``text = text + item``, ``out.append(item)``, ``out[i] =
    item``, ``obj.field = item``, ``last = item`` on every turn), which keeps the iteration's
    order. A ``return`` under a condition picks; one on the first turn returns the first
    element, whose place is the order's. Found once per loop (kept on the node: trees are
    kept for later analyses of the file, and a loop runs again in each summary that holds
    it; callers must not change the sets)."""
    known: tuple[set[str], set[str], set[int]] | None = stmt.__dict__.get("_loop_names")
    if known is None:
        known = stmt.__dict__["_loop_names"] = _find_loop_names(stmt)
    return known


def _find_loop_names(stmt: ast.For | ast.AsyncFor) -> tuple[set[str], set[str], set[int]]:
    iterated = _names(stmt.iter)
    picked: set[str] = set()
    gathered: set[str] = set()
    returns: set[int] = set()
    for node, under in _body_nodes(stmt.body):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            read = _names(node.value)
            for target in targets:
                bound = _target_names(target)
                if not under or read & (bound | iterated):
                    gathered |= bound
                else:
                    picked |= bound
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
            gathered |= _target_names(node.target)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if isinstance(node.func.value, ast.Name):  # a method called on it: ``out.append``
                gathered.add(node.func.value.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.value, ast.Name):
            if not isinstance(node.ctx, ast.Load):  # a store into it: ``out[i] = item``
                gathered.add(node.value.id)
        elif isinstance(node, ast.NamedExpr):
            gathered.add(node.target.id)
        elif isinstance(node, ast.Return) and under:
            returns.add(id(node))
    return picked - gathered, gathered, returns


def picked_from(facts: frozenset[Fact], iterated: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` of one element picked from a collection built from parameters (their facts
    in ``iterated``, whole or of their order): the contents of those parameters, not their
    order (granularity "sorted", as a sorted parameter's), whatever field of the element is
    read (``entries.content``); the order decides only between equal candidates, which the
    analysis cannot show exist. Facts of a parameter's order alone go."""
    params = {(f.param, f.fix, f.path) for f in iterated if f.kind is Kind.PARAM}
    out: set[Fact] = set()
    for f in facts:
        if f.kind is not Kind.PARAM or (f.param, f.fix, f.path) not in params:
            out.add(f)
        elif f.granularity == "":
            out.add(replace(f, granularity="sorted"))
        elif f.granularity != "order":
            out.add(f)
    return frozenset(out)


def _exits(body: list[ast.stmt]) -> bool:
    """True when running ``body`` always ends in a ``return``, ``raise``, ``continue`` or
    ``break`` at its own level: the rest of the block holding the statement it belongs to
    is not reached from it."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _leaves(body: list[ast.stmt]) -> bool:
    """True when running ``body`` always ends in a ``return`` or ``raise`` at its own level
    (the code after the statement holding it is not reached from it)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def merge_field(old: Value, new: Value) -> Value:
    """What a field of ``self`` holds after one more store into it. An instance of a project
    class stored where the field otherwise holds ``None`` (a class-level default, a
    ``close()`` that lets it go) keeps its class and fields: its methods resolve, and a
    method the analysis cannot see (one of a library base class) returns nothing of its
    fields, as for any instance of a project class. Any other pair is joined (``merge``)."""
    if holds_no_object(old) and (
        holds_no_object(new) or isinstance(new.ref, (ClassInfo, ExternalClass))
    ):
        return new.with_facts(old.facts | new.facts) if old.facts else new
    if holds_no_object(new) and isinstance(old.ref, (ClassInfo, ExternalClass)):
        return old.with_facts(old.facts | new.facts) if new.facts else old
    return merge(old, new)


def none_fields(info: ClassInfo) -> frozenset[str]:
    """The attributes that a method of ``info`` other than an ``__init__``-like one sets to
    ``None`` (``anything.x = None``), found once per class (cached on ``info``, and on its
    ``ClassDef`` node: a class's methods are the ``def`` statements of its body, so the parsed
    tree that each analysis of the file shares (``parse.parse_kept``) is walked once)."""
    if info.none_fields is None:
        known: frozenset[str] | None = info.node.__dict__.get("_none_fields")
        if known is not None:
            info.none_fields = known
            return known
        found: set[str] = set()
        for name, method in info.methods.items():
            if name in INIT_METHODS:
                continue
            for sub in ast.walk(method):
                if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    value = sub.value
                    if not (isinstance(value, ast.Constant) and value.value is None):
                        continue
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    found.update(
                        target.attr
                        for target in targets
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    )
        info.none_fields = info.node.__dict__["_none_fields"] = frozenset(found)
    return info.none_fields


#: statement type -> (the analyzer class, its ``stmt_<NodeType>`` method or None), for
#: ``exec_stmt``
_STMT_HANDLERS: dict[type, tuple[type, Callable[..., None] | None]] = {}


class StatementsMixin(EngineState):
    """``exec_block()`` and one ``stmt_<NodeType>`` method per statement type."""

    def exec_block(self, body: list[ast.stmt]) -> None:
        frame = self.frame
        depth = len(frame.branches)
        skips = self.role_skips
        mark = len(skips)
        for stmt in body:
            self.exec_stmt(stmt)
        # a condition an ``if`` that returns left for the rest of this block ends with it
        del frame.branches[depth:]
        if len(skips) > mark:
            # and so does a message's role an ``if`` that skips the others left
            # (``past_failed_role_tests``): the next turn of the loop, and the code after it,
            # see every message again
            for name, whole, narrow in skips[mark:]:
                if frame.env.get(name) is narrow:
                    frame.env[name] = whole
            del skips[mark:]

    @property
    def role_skips(self) -> list[tuple[str, Value, Value]]:
        """(name, its value before, its value after) of each message narrowed to a role for
        the rest of a block being run (``past_failed_role_tests``), innermost last."""
        found: list[tuple[str, Value, Value]] | None = self.__dict__.get("_role_skips")
        if found is None:
            found = self.__dict__["_role_skips"] = []
        return found

    def exec_stmt(self, stmt: ast.stmt) -> None:
        # the ``stmt_<NodeType>`` method of this class, found once per statement type
        found = _STMT_HANDLERS.get(stmt.__class__)
        if found is None or found[0] is not self.__class__:
            found = _STMT_HANDLERS[stmt.__class__] = (
                self.__class__,
                getattr(self.__class__, f"stmt_{type(stmt).__name__}", None),
            )
        handler = found[1]
        if handler is not None:
            handler(self, stmt)

    def stmt_Expr(self, stmt: ast.Expr) -> None:
        self.eval(stmt.value)

    def stmt_Delete(self, stmt: ast.Delete) -> None:
        # ``del items[0]``: which element is at which index is no longer known
        for target in stmt.targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                old = self.frame.env.get(target.value.id)
                if old is not None and old.elts is not None and old.shape is Shape.LIST:
                    self.frame.env[target.value.id] = replace(old, elts=None)

    def stmt_Assign(self, stmt: ast.Assign) -> None:
        value = self.eval(stmt.value)
        func = self.frame.func
        for target in stmt.targets:
            self.note_breakpoint(target, stmt.value)
            if (
                func is not None
                and isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self.frame.self_name
                and any(s is stmt for s in func.body)
            ):
                # run on every call, after what the function stored there before: the
                # field now holds this value alone (``self.tools = sorted(self.tools)``)
                self.forget_store(target.attr)
            self.assign(target, value, stmt.value)
            self.field_read_back(target, value)
            self.head_system_store(target, value, stmt.value)

    def head_system_store(self, target: ast.expr, value: Value, node: ast.expr) -> None:
        """``msgs[0]["content"] = text`` (or ``msgs[0].content = text``) under a test that
        the message there is a system one (``if msgs[0].get("role") == "system":``, kept in
        ``Frame.narrowed``): the head message of the list, of a constant system (or developer)
        role, now holds ``text`` as its content, as a ``{"role": "system", "content": text}``
        display would (``record_message_content``'s evidence, the constant role, here the
        test's). Only the first message, the head of the list: a system message found
        elsewhere may be a per-request note after the history."""
        if not self.frame.narrowed:
            return
        if isinstance(target, ast.Subscript):
            if not (isinstance(target.slice, ast.Constant) and target.slice.value == "content"):
                return
        elif not (isinstance(target, ast.Attribute) and target.attr == "content"):
            return
        message = target.value
        if not (
            isinstance(message, ast.Subscript)
            and isinstance(message.slice, ast.Constant)
            and type(message.slice.value) is int
            and message.slice.value == 0
        ):
            return
        role = self.frame.narrowed.get(ast.dump(message))
        if role is None or not set(role.split(",")) <= {"system", "developer"}:
            return
        label = f'{{"role": "{role}"}} message, {ast.unparse(target)[:60]} = ...'
        self.record("system", value, node, label)

    def forget_store(self, attr: str) -> None:
        """The summary forgets what the function stored into ``self.<attr>`` so far."""
        summary = self.frame.summary
        if summary is None or attr not in summary.attr_stores:
            return
        old = summary.attr_stores.pop(attr)
        summary.attr_objects.pop(attr, None)
        kept: frozenset[Fact] = frozenset()
        for facts in summary.attr_stores.values():
            kept |= facts
        if SELF in summary.stores:
            summary.stores[SELF] = summary.stores[SELF] - (old - kept)

    def note_breakpoint(self, target: ast.expr, value: ast.expr) -> None:
        """``x[...]["cache_control"] = ...`` or ``x[...] = [{..., "cache_control": ...}]``
        where ``x`` holds (part of) a parameter: the summary notes that the function puts a
        breakpoint on that argument's contents."""
        summary = self.frame.summary
        if summary is None or not isinstance(target, ast.Subscript):
            return
        sets = isinstance(target.slice, ast.Constant) and target.slice.value in BREAKPOINT_KEYS
        sets = sets or any(
            isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value in BREAKPOINT_KEYS for k in node.keys)
            for node in ast.walk(value)
        )
        if not sets:
            return
        holder: ast.expr = target
        while isinstance(holder, (ast.Subscript, ast.Attribute)):
            holder = holder.value
        if not isinstance(holder, ast.Name):
            return
        key = id(self.frame.func)
        params = {
            f.param
            for f in self.lookup(holder.id).facts
            if f.kind is Kind.PARAM and f.fix == (key,) and f.param >= 0
        }
        if params:
            summary.marks = summary.marks | params

    def stmt_AnnAssign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is not None:
            value = self.eval(stmt.value)
            if value.ref is None and isinstance(stmt.target, (ast.Name, ast.Attribute)):
                # a value of no known class, annotated with a project class
                # (``self.service: ChatService = self.injector.get(kind)``): an instance of it
                cls = self.annotated_class(stmt.annotation)
                if isinstance(cls, (ClassInfo, ExternalClass)):
                    value = replace(value, ref=cls)
            self.assign(stmt.target, value, stmt.value)
            self.field_read_back(stmt.target, value)

    def stmt_AugAssign(self, stmt: ast.AugAssign) -> None:
        extend = _as_extend(stmt, self.frame.defs)
        if extend is not None:
            # ``messages += [...]`` on a list this function made: the same list, extended in
            # place, as ``messages.extend([...])`` (its literal stays known to the regions)
            self.eval(extend)
            return
        value = self.eval(stmt.value)
        old = self.eval(stmt.target) if not isinstance(stmt.target, ast.Subscript) else CLEAN
        new = concat(old, value) if isinstance(stmt.op, ast.Add) else join(old, value)
        if old.shape in (Shape.LIST, Shape.SET, Shape.DICT):
            name_key = combine(old.name_key, value.name_key)
            new = Value(new.facts, old.shape, elem_str=old.elem_str, name_key=name_key)
        new = self.joined(self.with_mutation_facts(new), stmt.target)
        if isinstance(stmt.target, ast.Name):
            self.frame.env[stmt.target.id] = new
            # text added to text (``system += f"..."``): the name holds both, in order; not
            # in a loop, whose passes add one text each (over a constant list: the same)
            added = (
                None
                if self.frame.loops
                else _added_text(stmt, self.frame.defs.get(stmt.target.id), old)
            )
            if added is not None:
                self.frame.defs[stmt.target.id] = added
            else:
                self.frame.defs.pop(stmt.target.id, None)
        else:
            self.assign(stmt.target, new, None)
            self.field_read_back(stmt.target, value)

    def field_read_back(self, target: ast.expr, value: Value) -> None:
        """``agent.system_prompt += now`` in a function given ``agent: Agent``: a value stored
        into a field of a parameter, an object of a project class (not our own ``self``),
        whose own method reads that field into a prefix region (``Summary.attr_sinks``:
        ``Agent.loop`` sends ``self.system_prompt`` as the system prompt of each request), is
        in that region of every request that method sends from this object afterwards;
        recorded here, at the store. Only what this statement stores counts (not what the
        field held before, nor a parameter of ours in it: what a caller passes is that
        caller's to report); an object built here is left to the calls made on it."""
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
            return
        name = target.value.id
        if name == self.frame.self_name or name not in self.frame.params:
            return
        stored = self.with_mutation_facts(value).without(Kind.PARAM)
        if not stored.facts:
            return
        cls = self.lookup(name).ref
        if isinstance(cls, ExternalClass):
            methods = [cls.methods[name] for name in sorted(cls.methods)]
        elif isinstance(cls, ClassInfo):
            methods = [self.summary(cls.methods[name]) for name in sorted(cls.methods)]
        else:
            return
        for summary in methods:
            for key, targets in sorted(summary.attr_sinks.items()):
                attr, grain = split_grain(key)
                if attr != target.attr:
                    continue
                held = with_grain(stored.facts, grain)
                for region, label, unseen in targets:
                    sent = frozenset(unproven(f, unseen) for f in held) if unseen else held
                    self.record(region, Value(sent), target, f"{summary.name}() -> {label}")

    def with_mutation_facts(self, value: Value) -> Value:
        """Add the facts of enclosing unordered loops and per-request conditions."""
        if not self.frame.mutation_facts:
            return value
        facts = value.facts
        for extra in self.frame.mutation_facts:
            facts = facts | extra
        return value.with_facts(facts)

    def fresh_each_turn(self, name: str, store: ast.expr) -> list[frozenset[Fact]]:
        """The order facts (``Frame.loop_orders`` entries) of the enclosing loops that bind
        ``name`` afresh on every turn before ``store`` (a field or item store into it: ``mine.x
        = ...``, ``info["db"] = ...``): ``mine = copy.deepcopy(settings)``, ``mine =
        Settings()`` (a class, by its capitalised name) or a container literal, a statement of
        a block in the loop's body that a later statement of that block holds the store in.
        Each turn's object then holds that turn's element, as a name rebound in the body does,
        and its keys come in the order of the statements that store them, not the loop's; an
        object bound before the loop, by any other call (which may hand back a shared one) or
        after the store stays the loop's."""
        frame = self.frame
        made = frame.defs.get(name)
        if made is None or not frame.loop_orders or not self._new_object(made):
            return []
        freed: list[frozenset[Fact]] = []
        for loop, order in frame.loop_orders:
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) and _bound_before(
                loop.body, made, store
            ):
                freed.append(order)
        return freed

    def _new_object(self, expr: ast.expr) -> bool:
        """True when ``expr`` makes a new object: a copy (``copy.copy``, ``copy.deepcopy``,
        ``dict(m)``, ``list(parts)``, ``m.copy()``), a call of a capitalised name (a class) or
        a dict, list or set display."""
        if isinstance(expr, (ast.Dict, ast.List, ast.Set)):
            return True
        if not isinstance(expr, ast.Call):
            return False
        if self.qualify(expr.func) in _COPIES:
            return True
        func = expr.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "copy"
            and not expr.args
            and not expr.keywords
        ):
            return True
        name = ""
        if isinstance(func, ast.Attribute):
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
        return name[:1].isupper() and not name.isupper()

    def assign(self, target: ast.expr, value: Value, expr: ast.expr | None) -> None:
        frame = self.frame
        if (
            expr is not None
            and frame.func is not None
            and (
                id(expr) in held_conversations(frame.func)
                or id(expr) in held_companions(frame.func)
            )
        ):
            # a conversation this function starts and resends for every request of a loop,
            # or a text bound once and sent beside it (``system=``): what its messages hold
            # is written there once (``conversations``)
            value = map_facts(value, held_once)
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
            frame.dict_keys.pop(target.id, None)
            frame.field_added.pop(target.id, None)
            if expr is not None:
                frame.defs[target.id] = expr
            else:
                frame.defs.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(expr, (ast.Tuple, ast.List)) and len(expr.elts) == len(target.elts):
                for sub_target, sub_expr in zip(target.elts, expr.elts, strict=True):
                    self.assign(sub_target, self.eval(sub_expr), sub_expr)
                return
            starred = any(isinstance(sub, ast.Starred) for sub in target.elts)
            if (
                value.elts is not None
                and not value.more
                and len(value.elts) == len(target.elts)
                and not starred
            ):
                # a tuple whose elements are known: each target gets its own element
                for sub, element in zip(target.elts, value.elts, strict=True):
                    self.assign(sub, element, None)
                return
            element = Value(value.facts) if value.facts else CLEAN
            for sub in target.elts:
                self.assign(sub.value if isinstance(sub, ast.Starred) else sub, element, None)
        elif isinstance(target, ast.Attribute):
            if (
                isinstance(target.value, ast.Name)
                and target.value.id == frame.self_name
                and frame.cls is not None
            ):
                old = frame.cls.attrs.get(target.attr)
                if self.object_state():
                    # a field set by ``__init__``, in a loop or from what one filled: the
                    # object's state, built once per object
                    value = value.pinned()
                kept = value.without(Kind.PARAM) if value.facts else value
                frame.cls.attrs[target.attr] = kept if old is None else merge_field(old, kept)
                if expr is not None and target.attr not in frame.cls.attr_defs:
                    frame.cls.attr_defs[target.attr] = expr
                self.note_store(target.value, value, target.attr)
                if value.facts - kept.facts:
                    # the parameters (or other fields of ours) stored there, which the class's
                    # field does not keep: a method of this object called later in this
                    # function reads them there (``self.tool = self._find(name)`` taking
                    # ``self.tools``, then ``self.invoke()`` binding ``self.tool``)
                    field_key = f"{target.value.id}.{target.attr}"
                    passed = Value(value.facts - kept.facts)
                    old_here = frame.env.get(field_key)
                    frame.env[field_key] = passed if old_here is None else merge(old_here, passed)
            elif isinstance(target.value, ast.Name):
                # an object made afresh on each turn of a loop before this store holds this
                # turn's value only, as a name rebound in the body does: no order of that loop
                freed = self.fresh_each_turn(target.value.id, target)
                around = frame.mutation_facts
                frame.mutation_facts = [m for m in around if not any(m is f for f in freed)]
                try:
                    self.store_field(target, value)
                finally:
                    frame.mutation_facts = around
        elif isinstance(target, ast.Subscript):
            # d["k"] = v / lst[i] = v: the container now holds v
            base = target.value
            if isinstance(base, ast.Name) and isinstance(target.slice, ast.Constant):
                key = target.slice.value
                if isinstance(key, str) and (base.id in frame.defs or base.id in frame.dict_keys):
                    frame.dict_keys.setdefault(base.id, {})[key] = target
            if not value.facts:
                if isinstance(base, ast.Name):
                    # a value of no fact under a constant key of a dict of known keys replaces
                    # what that key held
                    old = frame.env.get(base.id)
                    key = _stored_key(target, base.id)
                    if key and old is not None and _keyed_dict(old):
                        frame.env[base.id] = replace(old, items=_with_key(old, key, value))
                return
            path = constant_keys(target)
            if path:
                # a time or id stored under constant keys is that entry's, not its siblings'
                value = value.with_facts(keyed(value.facts, path))
                self.note_state_store(target, value)
            elif path := entry_keys(target):
                # under a constant key of an entry at a computed key (``entities[eid]["hp"] =
                # roll``): that key's in whichever entry holds it, not its siblings'
                value = value.with_facts(keyed(value.facts, path))
            freed = self.positional_loops(target)
            if isinstance(base, ast.Name):
                # a dict made afresh on each turn (``info = {...}; info["db"] = ...``) holds
                # that turn's values under keys in the body's statement order, not the loop's
                freed += [
                    order
                    for order in self.fresh_each_turn(base.id, target)
                    if not any(order is f for f in freed)
                ]
            around = frame.mutation_facts
            if isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                # an `if` around a store of one constant key chose that key's value: reading
                # another constant key does not take its fact (see ``other_keys_dropped``)
                key = target.slice.value
                frame.mutation_facts = [
                    m if any(m is f for f in freed) else keyed_conditions(m, key) for m in around
                ]
            if not freed:
                try:
                    self.mutate(base, value, target)
                finally:
                    frame.mutation_facts = around
                return
            # the item's place is its task's, not the loop's turn: the list keeps no order
            # of those loops (per-request conditions and other loops still apply)
            unfreed = [m for m in frame.mutation_facts if not any(m is f for f in freed)]
            frame.mutation_facts = unfreed
            try:
                self.mutate(base, value, target)
            finally:
                frame.mutation_facts = around
        elif isinstance(target, ast.Starred):
            self.assign(target.value, value, None)

    def note_state_store(self, target: ast.Subscript, value: Value) -> None:
        """``callback_context.state["clock"] = now`` (or through a local bound to
        ``callback_context.state``), a store under a constant key into the ``state`` field of
        a parameter: noted in the summary (``Summary.state_stores``)."""
        frame = self.frame
        summary = frame.summary
        if summary is None or not value.facts:
            return
        holder: ast.expr = target
        while isinstance(holder, ast.Subscript):
            holder = holder.value
        if isinstance(holder, ast.Name):
            bound = frame.defs.get(holder.id)
            holder = bound if isinstance(bound, ast.Attribute) else holder
        if not (
            isinstance(holder, ast.Attribute)
            and holder.attr == "state"
            and isinstance(holder.value, ast.Name)
            and holder.value.id in frame.params
            and holder.value.id != frame.self_name
        ):
            return
        if frame.func is not None and _under_state_test(frame.func, target):
            # ``if "started" not in callback_context.state:``: written once, on the first run
            # of the session, and the same on every later request
            return
        index = frame.params[holder.value.id]
        stored = self.with_mutation_facts(value).facts
        summary.state_stores[index] = summary.state_stores.get(index, frozenset()) | stored

    def store_field(self, target: ast.Attribute, value: Value) -> None:
        """``obj.attr = value`` for a name ``obj`` that is not our own ``self``: a field of
        another object (``ctx.started = time.time()``) holds it, read back by
        ``ctx.started``. A parameter's other fields do not (nor do its callers' objects); a
        local object of unknown type still carries it whole."""
        frame = self.frame
        assert isinstance(target.value, ast.Name)
        if target.value.id not in frame.params:
            held = self.lookup(target.value.id).facts
            # a time or an id is marked as that field's (``field_keyed``): a read of another
            # field of the object, here or in a function it is handed to
            # (``scope.accepted_messages`` beside ``scope.run_id = uuid4().hex``), leaves it
            # out, while the object read whole keeps it
            self.mutate(target.value, value.with_facts(field_keyed(value.facts, target.attr)))
            added = self.lookup(target.value.id).facts - held
            if added:
                old_added = frame.field_added.get(target.value.id, frozenset())
                frame.field_added[target.value.id] = old_added | added
            held_obj = self.lookup(target.value.id)
            if held_obj.items is not None and isinstance(held_obj.ref, (ClassInfo, ExternalClass)):
                # an object of known fields: that field now holds it too
                fields = dict(held_obj.items)
                stored = self.with_mutation_facts(value)
                was = fields.get(target.attr)
                fields[target.attr] = stored if was is None else merge(was, stored)
                frame.env[target.value.id] = replace(held_obj, items=tuple(sorted(fields.items())))
        elif target.value.id != frame.self_name:
            # a time or an id stored into a field of a parameter (``member.since = now``):
            # the caller's object holds it in that field (``Summary.stores``, marked as that
            # field's, so a read of another field leaves it out)
            made = frozenset(
                f for f in self.with_mutation_facts(value).facts if f.kind in KEYED_KINDS
            )
            if made:
                self.note_store(target.value, Value(field_keyed(made, target.attr)))
        field_key = f"{target.value.id}.{target.attr}"
        old = frame.env.get(field_key)
        frame.env[field_key] = self.with_mutation_facts(value if old is None else merge(old, value))

    def positional_loops(self, target: ast.Subscript) -> list[frozenset[Fact]]:
        """The order facts (``Frame.loop_orders`` entries) of the enclosing loops whose order a
        store ``name[index] = ...`` does not follow: ``name`` holds a list (sized beforehand:
        an item stored by index stays at that index) and ``index`` comes from the loop's
        element, ``for future in as_completed(futures): out[futures[future]] = ...``,
        ``i = futures[future]; out[i] = ...`` or ``index, answer = future.result(); out[index]
        = answer``. Not freed: a dict (it keeps insertion order, here the loop's), a container
        of unknown kind, an index a counter or a call gives (``out[i] = ...; i += 1``,
        ``out[next(slots)]``), a loop over ``enumerate``/``zip`` or with a tuple target (a
        position may come with the element)."""
        frame = self.frame
        base = target.value
        if not frame.loop_orders or not isinstance(base, ast.Name):
            return []
        if not _list_held(self.lookup(base.id), frame.defs.get(base.id)):
            return []
        index = target.slice
        names = _names(index)
        if not names or any(isinstance(node, ast.Call) for node in ast.walk(index)):
            return []
        freed: list[frozenset[Fact]] = []
        for loop, order in frame.loop_orders:
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            if not isinstance(loop.target, ast.Name) or _pairs_positions(loop.iter):
                continue
            # a name counted up in the body before the store carries the loop's order
            unstable = {f for f in order if f.kind in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE)}
            if any(self.lookup(name).facts & unstable for name in names):
                continue
            changed = {
                node.id
                for stmt in loop.body
                for node in ast.walk(stmt)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
            }
            element = (loop.target.lineno, loop.target.col_offset)
            if self._from_element(names, element, changed, 0):
                freed.append(order)
        return freed

    def _from_element(
        self, names: set[str], element: tuple[int, int], changed: set[str], depth: int
    ) -> bool:
        """True when ``names`` (of an index) give the same value for the same element on any
        turn of the loop whose target is at ``element`` and one of them comes from it: each
        holds the element's loop fact (``index`` of ``index, answer = future.result()``), is
        set before the loop (the same on every turn) or is set in the body (``changed``) from
        such names without a call (``i = futures[future]``; not ``i = i + 1`` nor ``i = 0``)."""
        frame = self.frame
        reached = False
        for name in names:
            if any(
                f.kind is Kind.LOOP and (f.line, f.col) == element for f in self.lookup(name).facts
            ):
                reached = True
                continue
            if name not in changed:
                continue
            made = frame.defs.get(name)
            if made is None or depth >= 3 or any(isinstance(n, ast.Call) for n in ast.walk(made)):
                return False
            if not self._from_element(_names(made), element, changed, depth + 1):
                return False
            reached = True
        return reached

    def joined(self, value: Value, holder: ast.expr) -> Value:
        """``value`` as stored into ``holder`` here: a tool list of one MCP server
        (``ONE_SERVER``) made inside the body of an enclosing ``for`` loop that does not
        bind ``holder`` (a list, dict or registry that outlives each turn: ``for server in
        servers: tools.extend(await load(server))``, ``registry.register(tool)``) is joined
        there with the other servers' lists, so its fact becomes one of several servers'
        (``joined_servers``). A list rebuilt on each turn, a ``while`` loop (pages of one
        server's list) or a loop over the one list's own tools joins nothing."""
        loops = [
            loop
            for loop in self.frame.loops
            if isinstance(loop, (ast.For, ast.AsyncFor)) and not _binds(loop, holder)
        ]
        if not loops:
            return value

        def inside(fact: Fact) -> bool:
            for loop in loops:
                first = loop.body[0]
                end = (loop.end_lineno or loop.lineno, loop.end_col_offset or 0)
                header = loop.iter.end_lineno or loop.lineno
                lines = first.lineno if first.lineno > header else header + 1
                if made_within(fact, (first.lineno, first.col_offset), end, lines):
                    return True
            return False

        changed = False

        def join_facts(facts: frozenset[Fact]) -> frozenset[Fact]:
            nonlocal changed
            out = joined_servers(facts, inside)
            changed = changed or out is not facts
            return out

        new = map_facts(value, join_facts)
        return new if changed else value

    def object_state(self) -> bool:
        """``Frame.object_state``, unless a ``for`` loop around the store sends a request on
        each pass (``sends``): ``for q in questions: self.system = f"{now}"; self.ask(q)`` stores
        a new time before each request, as the same loop in a method run per request does."""
        frame = self.frame
        return frame.object_state and not any(self.sends(loop) for loop in frame.loops)

    def sends(self, body: ast.AST, depth: int = 0) -> bool:
        """Whether ``body`` (a loop, a function) calls a request (a sink that sends messages),
        itself or through a method of ``self``'s class or a function of the module that does
        (two calls deep); nested functions and classes are not read. Kept on the node."""
        known: dict[int, bool] = body.__dict__.setdefault("_promptcache_sends", {})
        if depth in known:
            return known[depth]
        known[depth] = False  # a method that calls itself
        frame = self.frame
        found = False
        stack: list[ast.AST] = list(ast.iter_child_nodes(body))
        while stack and not found:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            stack.extend(ast.iter_child_nodes(node))
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            spec = sinks.match(node, sinks.call_chain(func), self.qualify(func), self.extra_sinks)
            if spec is not None:
                # a request (one that sends messages), not a prompt object or an agent's
                # configuration built there
                found = bool(spec.messages_kw)
            elif depth < 2:
                callee: ast.AST | None = None
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == frame.self_name
                    and frame.cls is not None
                ):
                    callee = frame.cls.find_method(func.attr)
                elif isinstance(func, ast.Name) and func.id not in frame.env:
                    callee = self.functions.get(func.id)
                found = callee is not None and self.sends(callee, depth + 1)
        known[depth] = found
        return found

    def mutate(self, holder: ast.expr, added: Value, target: ast.expr | None = None) -> None:
        """``holder`` (a name, ``self``, ``self.x`` or ``self.x[k]``) now also holds ``added``:
        its value gains the facts (and the loop and condition facts around this statement),
        and the function's summary notes a store into a parameter or the receiver.
        ``target``: the item stored into, when the store is ``holder[k] = added``."""
        if not added.facts and not self.frame.mutation_facts:
            return
        frame = self.frame
        added = self.joined(self.with_mutation_facts(added), holder)
        if frame.once:  # stored where code runs once: computed once
            added = added.pinned()
        elif self.object_state() and _into_self(holder, frame.self_name):
            # a field filled in a loop of ``__init__``: built once per object
            added = added.pinned()
        stored = target if target is not None else holder
        while isinstance(holder, ast.Subscript):
            holder = holder.value
        if isinstance(holder, ast.Attribute) and isinstance(holder.value, ast.Name):
            if holder.value.id == frame.self_name and frame.cls is not None:
                old = frame.cls.attrs.get(holder.attr, CLEAN)
                kept = old.shape if old.shape is not Shape.UNKNOWN else Shape.LIST
                # a dict of known constant keys added whole (``self.history.append({"role":
                # "user", "content": text, "created_at": now()})``): each time or id it holds
                # stays its key's (``keys_kept``), so a read of another key of an element
                # (``item.get("content")``) leaves it out, as for a local list's elements
                whole = added.without(Kind.PARAM)
                new = keys_kept(whole) if target is None else whole.facts
                frame.cls.attrs[holder.attr] = Value(
                    old.facts | new,
                    kept,
                    None,
                    old.elem_str,
                    old.name_key,
                    old.ref,
                )
                # the summary notes the same facts, keyed alike, so a caller's field holds
                # what this method's own store put there, not a second copy of each fact
                noted = added.with_facts(keys_kept(added)) if target is None else added
                self.note_store(holder.value, noted, holder.attr)
            return
        if isinstance(holder, ast.Name):
            old = self.lookup(holder.id)
            # an instance of a project class keeps its fields (the call that stored into it
            # updates them); a dict of known keys given a value under a constant key
            # (``kwargs["api_key"] = key``) keeps its other keys and now holds that value under
            # this one; any other container's item values are no longer known
            fields = old.items if isinstance(old.ref, (ClassInfo, ExternalClass)) else None
            key = _stored_key(stored, holder.id)
            if fields is None and key and _keyed_dict(old):
                fields = _with_key(old, key, added)
            frame.env[holder.id] = Value(
                # a dict of known keys given a value under a computed key (``default[key] =
                # loaded[key]``): its keys are no longer known, but a time or an id it held
                # under a constant key stays that key's (``keys_kept``)
                (old.facts if fields is not None else keys_kept(old)) | added.facts,
                old.shape,
                None,
                old.elem_str,
                old.name_key,
                old.ref,
                items=fields,
                elem=stored_elem(old, stored, added),
            )
            self.note_store(holder, added)

    def note_store(self, holder: ast.Name, added: Value, attr: str = "") -> None:
        """Record in the summary that ``added`` is stored into a parameter or the receiver
        (``attr``: into that attribute of the receiver, ``self.<attr>``)."""
        frame = self.frame
        summary = frame.summary
        if summary is None or not added.facts:
            return
        if holder.id == frame.self_name:
            index = SELF
        elif holder.id in frame.params:
            index = frame.params[holder.id]
        else:
            inner = self.container_of(holder.id)
            if inner is not None:
                # stored into an entry of the container: under that entry's keys there
                path = self.alias_keys(holder.id)
                if path:
                    added = added.with_facts(keyed(added.facts, path))
            if isinstance(inner, ast.Name) and inner.id != holder.id:
                self.note_store(inner, added, attr)
            elif (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id == frame.self_name
            ):
                self.note_store(inner.value, added, inner.attr)
            return
        # (the receiver stored into itself says nothing new)
        facts = frozenset(
            f
            for f in added.facts
            if f.kind in STORED_KINDS and not (f.kind is Kind.PARAM and f.param == SELF)
        )
        if facts:
            # (each set is kept canonical: facts it holds already leave it as it is)
            known = summary.stores.get(index, frozenset())
            if not facts <= known:
                summary.stores[index] = canonical(known | facts)
            if index == SELF and attr:
                self._note_object(summary, attr, added, facts)
                old = summary.attr_stores.get(attr, frozenset())
                if not facts <= old or attr not in summary.attr_stores:
                    summary.attr_stores[attr] = canonical(old | facts)

    @staticmethod
    def _note_object(summary: Summary, attr: str, added: Value, facts: frozenset[Fact]) -> None:
        """``summary.attr_objects[attr]`` gains ``added`` (``facts``: what the store keeps of
        it) when it is an instance of a project class whose fields are known: its class and
        each field's facts (those of the object outside its fields go to every field; a field
        it does not name holds nothing, as in ``_attribute_of``); a dict of known keys
        likewise keeps each key's facts (``self.parameters = {"properties": ...}``). Anything
        else, or an instance of another class, leaves the attribute's fields unknown (None)."""
        first = attr not in summary.attr_stores
        known = summary.attr_objects.get(attr)
        if not first and known is None:
            return
        keyed = _keyed_dict(added)
        if added.items is None or not (keyed or isinstance(added.ref, (ClassInfo, ExternalClass))):
            summary.attr_objects[attr] = None
            return
        parts = {name: value.facts & facts for name, value in added.items}
        inside = frozenset().union(*parts.values())
        whole = facts - inside
        stored = Value(
            facts,
            added.shape if keyed else Shape.UNKNOWN,
            ref=added.ref,
            items=tuple((name, Value(canonical(part | whole))) for name, part in parts.items()),
        )
        if first:
            summary.attr_objects[attr] = stored
            return
        assert known is not None
        joined = merge(known, stored)
        summary.attr_objects[attr] = joined if joined.items is not None else None

    def alias_keys(self, name: str, depth: int = 0) -> tuple[str, ...]:
        """The constant string keys, outermost first, of the entry of a container the local
        ``name`` is bound to (``container_of``): ``("recipient",)`` for ``recipient =
        context.setdefault("recipient", {})``; ``()`` where one of them is not a constant
        string (the entry's place is then not known)."""
        key, base = _entry_of(self.frame.defs.get(name))
        if not isinstance(key, str):
            return ()
        frame = self.frame
        if (
            isinstance(base, ast.Name)
            and base.id not in frame.params
            and base.id != frame.self_name
        ):
            if depth >= 3 or base.id == name:
                return ()
            outer = self.alias_keys(base.id, depth + 1)
            return (*outer, key) if outer else ()
        return (key,)

    def container_of(self, name: str, depth: int = 0) -> ast.expr | None:
        """The parameter (a name) or field of the receiver (``self.data``) whose entry the
        local ``name`` is bound to, so a store into ``name`` is a store into it:
        ``recipient = context.setdefault("recipient", {})``, ``context["recipient"]`` or
        ``context.get("recipient")`` (a nested container is shared, not copied), also through
        such locals in turn; None for any other binding."""
        base = _entry_of(self.frame.defs.get(name))[1]
        frame = self.frame
        if isinstance(base, ast.Name):
            if base.id in frame.params or base.id == frame.self_name:
                return base
            if depth < 3 and base.id != name:
                return self.container_of(base.id, depth + 1)
        elif (
            isinstance(base, ast.Attribute)
            and isinstance(base.value, ast.Name)
            and base.value.id == frame.self_name
        ):
            return base
        return None

    def stmt_FunctionDef(self, stmt: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.frame is self.module_frame:
            return  # module-level functions are summarised on demand
        frame = self.frame
        params = {a.arg for a in (*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs)}
        shares_self = frame.self_name is not None and frame.self_name not in params
        # a function nested in a method reads and fills the method's own object
        self.closures[stmt] = Frame(
            dict(frame.env),
            dict(frame.defs),
            cls=frame.cls if shares_self else None,
            self_name=frame.self_name if shares_self else None,
        )
        self.enclosing[stmt] = frame
        self.method_class.pop(stmt, None)
        self.frame.env[stmt.name] = Value(shape=Shape.FUNC, ref=stmt)
        self.summary(stmt)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, stmt: ast.ClassDef) -> None:
        info = self.classes.get(stmt.name)
        if info is None or info.node is not stmt or self.frame is not self.module_frame:
            return
        saved = self.frame
        self.frame = Frame({}, {}, None, info, None, pinned=True)
        try:
            for sub in stmt.body:
                if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    value_node = sub.value
                    if value_node is None:
                        continue
                    value = self.eval(value_node)
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            info.attrs[target.id] = value
                            info.attr_defs[target.id] = value_node
        finally:
            self.frame = saved

    def stmt_Return(self, stmt: ast.Return) -> None:
        if stmt.value is None or self.frame.summary is None:
            return
        value = self.eval(stmt.value)
        if self.frame.loop_orders:
            value = self.picked_return(stmt, value)
        summary = self.frame.summary
        summary.returns.append((stmt.value, value))
        if value.facts and _text_return(stmt.value) and len(summary.text_returns) < _TEXT_RETURNS:
            # its pieces, for a caller that sends it as system text (PC010); evaluated again
            # only where no call is in it
            summary.text_returns.append(tuple(self.flatten(stmt.value, known=value)))
        if self.frame.branches:
            # run only where the caller's argument takes these branches (``branch_marked``)
            self.frame.return_branches[len(summary.returns) - 1] = tuple(self.frame.branches)
        if summary.builder and self.frame.func is not None:
            self.record("system", value, stmt.value, f"{self.frame.func.name}() return")

    def _loop(self, stmt: ast.stmt, body: list[ast.stmt], extra: frozenset[Fact]) -> None:
        frame = self.frame
        frame.loops.append(stmt)
        if extra:
            frame.mutation_facts.append(extra)
            frame.loop_orders.append((stmt, extra))
        try:
            self.exec_block(body)
        finally:
            frame.loops.pop()
            if extra:
                frame.mutation_facts.pop()
                frame.loop_orders.pop()

    def stmt_For(self, stmt: ast.For | ast.AsyncFor) -> None:
        iterable = self.eval(stmt.iter)
        unordered = self.iteration_fact(iterable, stmt.iter)
        element = self.element_of(iterable)
        target = stmt.target
        counted = _enumerated(stmt)
        if counted is not None:
            # ``for i, m in enumerate(messages)``: ``i`` is a position, holding nothing of
            # the elements; ``m`` an element (of known fields when the list's are known)
            assert isinstance(target, ast.Tuple)
            listed = self.eval(counted)
            known = element_fields(listed)
            index = Value(shape=Shape.NUM)
            if not self.frame.pinned:
                index = Value(
                    frozenset({self.fact(Kind.LOOP, target.elts[0], "loop variable")}), Shape.NUM
                )
            self.assign(target.elts[0], index, None)
            target = target.elts[1]
            element = known if known is not None else self.element_of(listed)
        if not self.frame.pinned:
            loop = self.fact(Kind.LOOP, stmt.target, "loop variable")
            if fields_known(element) or positions_known(element):
                # an element of known fields or a tuple of known elements (``Value.elem``):
                # each field and each element is per iteration
                element = with_every_field(element, frozenset({loop}))
            else:
                element = Value(
                    element.facts | {loop},
                    element.shape,
                    element.const,
                    element.elem_str,
                    element.name_key,
                )
        self.assign(target, element, None)
        files = self._sorted_walk_files(stmt) if unordered is not None else None
        if files is not None:
            # ``os.walk`` whose body sorts the folders it is about to enter (``dirnames.sort()``)
            # walks in a fixed order; each folder's file names are still in filesystem order
            unordered = None
            if isinstance(files, ast.Name):
                listed = Value(element.facts, Shape.UNORDERED_LIST, elem_str=True, ref=iterable.ref)
                self.assign(files, listed, None)
        # what the body appends follows the iterable's order (a parameter's too), not an
        # order held inside its elements' fields or positions (a set listed in one field of
        # each step)
        order = {f for f in iterable.facts if f.kind in (Kind.TOOLS_UNSTABLE, Kind.UNORDERED)}
        if order and element_fields(iterable) is not None:
            assert iterable.elem is not None
            order -= held_inside(iterable.elem)
        order.update(f for f in order_of(iterable.facts) if f.kind is Kind.PARAM)
        order.update(sampled(iterable.facts))
        if unordered is not None:
            order.add(unordered)
        copy = _key_copy(stmt)
        source = self.frame.env.get(copy[0]) if copy is not None else None
        start = self.frame.env.get(copy[1]) if copy is not None else None
        self._loop(stmt, stmt.body, frozenset(order))
        self.pick_after(stmt, iterable, frozenset(order))
        if copy is not None and source is not None and start is not None:
            self.copied_keys(stmt, copy, source, start)
        self.exec_block(stmt.orelse)

    stmt_AsyncFor = stmt_For

    def copied_keys(
        self,
        stmt: ast.For | ast.AsyncFor,
        copy: tuple[str, str, list[ast.expr]],
        source: Value,
        start: Value,
    ) -> None:
        """After ``for k, v in d.items(): out[k] = v`` (``_key_copy``) into an ``out`` that was
        an empty dict, ``out`` holds some of ``d``'s keys, each with the value ``d`` held there:
        a dict of ``d``'s known keys (``Value.items``), as ``d`` is, so a read of one key takes
        what was under that key rather than every key's facts. Only when ``d``'s keys are
        known and each filter reads nothing per request but the key and value."""
        _source_name, out, tests = copy
        if not (_keyed_dict(source) and start.items == () and start.shape is Shape.DICT):
            return
        target = stmt.target
        assert isinstance(target, ast.Tuple)
        own = frozenset(n.id for n in target.elts if isinstance(n, ast.Name))
        if any(self.runtime_test(test, self.eval(test), own) for test in tests):
            return
        self.frame.env[out] = Value(source.facts, Shape.DICT, items=source.items)

    def pick_after(
        self, stmt: ast.For | ast.AsyncFor, iterable: Value, order: frozenset[Fact]
    ) -> None:
        """After a loop over a parameter, a name its body picked one element into (``best =
        item`` under a condition, read after the loop) holds that element's contents, not
        the parameter's order; a name holding the loop's order gathered it and keeps it."""
        whole = frozenset(f for f in iterable.facts if f.kind is Kind.PARAM and f.granularity == "")
        if not whole:
            return
        env = self.frame.env
        for name in loop_names(stmt)[0]:
            value = env.get(name)
            if value is not None and value.facts and not value.facts & order:
                env[name] = value.with_facts(picked_from(value.facts, whole))

    def picked_return(self, stmt: ast.Return, value: Value) -> Value:
        """What ``return`` inside loops over parameters returns: one element picked (``for
        item in items: if ...: return item``) holds its contents without the parameters'
        order, unless it reads a name the loop gathers into or the iterable itself. So does
        one picked from a collection in an unstable order (files listed by ``os.listdir``
        into a field, ``for api in self.apis: if api["name"] == name: return api``): the
        element carries the order it was iterated in, but which one matches is decided by
        the test, the order only between equal candidates (as for a parameter's)."""
        assert stmt.value is not None
        read = _names(stmt.value)
        for loop, order in self.frame.loop_orders:
            if not isinstance(loop, (ast.For, ast.AsyncFor)):
                continue
            iterated = frozenset(
                f for f in value.facts & order if f.kind in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
            )
            if value.facts & (order - iterated):
                continue
            _picked, gathered, returns = loop_names(loop)
            if id(stmt) not in returns or read & (_names(loop.iter) | gathered):
                continue
            value = value.with_facts(picked_from(value.facts - iterated, order))
        return value

    def _sorted_walk_files(self, stmt: ast.For | ast.AsyncFor) -> ast.expr | None:
        """The file-name target of ``for root, dirs, files in os.walk(top):`` whose body sorts
        ``dirs`` in place at its top level (``dirs.sort()``, ``dirs[:] = sorted(dirs)``), so
        the walk enters folders in name order (top-down, the default: with ``topdown=False``
        the sort comes too late); None for any other loop."""
        call = stmt.iter
        target = stmt.target
        if not (
            isinstance(call, ast.Call)
            and self.qualify(call.func) == "os.walk"
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 3
            and isinstance(target.elts[1], ast.Name)
        ):
            return None
        for kw in call.keywords:
            if kw.arg == "topdown" and not (
                isinstance(kw.value, ast.Constant) and kw.value.value is True
            ):
                return None
        if len(call.args) > 1:
            return None
        dirs = target.elts[1].id
        for sub in stmt.body:
            if (
                isinstance(sub, ast.Expr)
                and isinstance(sub.value, ast.Call)
                and isinstance(sub.value.func, ast.Attribute)
                and sub.value.func.attr == "sort"
                and isinstance(sub.value.func.value, ast.Name)
                and sub.value.func.value.id == dirs
            ):
                return target.elts[2]
            if (
                isinstance(sub, ast.Assign)
                and len(sub.targets) == 1
                and isinstance(sub.targets[0], ast.Subscript)
                and isinstance(sub.targets[0].value, ast.Name)
                and sub.targets[0].value.id == dirs
                and isinstance(sub.targets[0].slice, ast.Slice)
                and isinstance(sub.value, ast.Call)
                and isinstance(sub.value.func, ast.Name)
                and sub.value.func.id == "sorted"
            ):
                return target.elts[2]
        return None

    def stmt_While(self, stmt: ast.While) -> None:
        self.eval(stmt.test)
        if constant_truth(stmt.test, self.frame.func) is not False:
            # ``while False:`` never runs its body
            self._loop(stmt, stmt.body, frozenset())
        self.exec_block(stmt.orelse)

    def stmt_If(self, stmt: ast.If) -> None:
        truth = constant_truth(stmt.test, self.frame.func)
        if truth is not None:
            # a condition of literals only: the other branch can never run
            self.eval(stmt.test)
            self.exec_block(stmt.body if truth else stmt.orelse)
            return
        tested = self.eval(stmt.test)
        frame = self.frame
        runtime = self.runtime_test(stmt.test, tested) and not _stores_what_it_tests(stmt)
        extra = (
            frozenset({self.fact(Kind.VARIES, stmt, f"{CHOSEN_BY_IF} {stmt.lineno}")})
            if runtime
            else frozenset()
        )
        before = dict(frame.env)
        if extra:
            frame.mutation_facts.append(extra)
        # ``if include_hour_min:`` (or ``if not ...``) on a parameter: the caller's argument
        # picks the branch (``Fact.when``)
        when = self.branch_param(stmt.test)
        depth = len(frame.branches)
        if when is not None:
            frame.branches.append(when)
        narrowed_dumps: list[str] = []
        # the names of the messages (and their roles) the test's failure requires
        failed = [
            (subject.id, role)
            for subject, role in self.failed_role_tests(stmt.test)
            if isinstance(subject, ast.Name) and subject.id in frame.env
        ]
        for subject, role in self.role_tests(stmt.test):
            # the body runs only for messages of that role
            if isinstance(subject, ast.Name):
                whole = self.lookup(subject.id)
                # the else branch, hence the code after the `if`, sees the whole value
                before[subject.id] = whole
                frame.env[subject.id] = narrowed(whole, role)
            else:
                key = ast.dump(subject)
                if key not in frame.narrowed:
                    frame.narrowed[key] = role
                    narrowed_dumps.append(key)
        try:
            if self.computed_once(stmt):
                # the body fills a field of the object on its first use only: it runs once
                # per object, like ``__init__``
                pinned, frame.pinned = frame.pinned, True
                try:
                    self.exec_block(stmt.body)
                finally:
                    frame.pinned = pinned
            else:
                self.exec_block(stmt.body)
            if when is not None:
                frame.branches[-1] = other_branch(when)
            for key in narrowed_dumps:
                frame.narrowed.pop(key, None)
            narrowed_dumps = []
            after_body = frame.env
            frame.env = dict(before)
            for name, role in failed:
                # ``if m["role"] != "system": ... else:``: the else runs only for that role
                frame.env[name] = narrowed(before[name], role)
            self.exec_block(stmt.orelse)
        finally:
            del frame.branches[depth:]
            if extra:
                frame.mutation_facts.pop()
            for key in narrowed_dumps:
                frame.narrowed.pop(key, None)
        after_else = frame.env
        if _leaves(stmt.body) != _leaves(stmt.orelse):
            # one branch returns or raises: the code after the `if` sees only the other's values
            # (``if not session_id: conv = {...}; ...; return`` beside ``conv = load(id)``)
            frame.env = after_else if _leaves(stmt.body) else after_body
            if when is not None:
                # and runs, to the end of this block, only where the other branch is taken
                frame.branches.append(other_branch(when) if _leaves(stmt.body) else when)
            self.past_failed_role_tests(stmt, failed)
            return
        merged = dict(after_else)
        for name, value in after_body.items():
            other = after_else.get(name)
            if other is value:
                continue
            if other is None:
                merged[name] = value
                continue
            if when is not None:
                # what one branch alone put there is that branch's (``Fact.when``)
                value, other = branches_only(value, other, when)
            joined = merge(value, other)
            if runtime and value.const != other.const:
                joined = joined.with_facts(joined.facts | extra)
            merged[name] = joined
        frame.env = merged
        self.past_failed_role_tests(stmt, failed)

    def past_failed_role_tests(self, stmt: ast.If, failed: list[tuple[str, str]]) -> None:
        """After ``if m["role"] != "system": ...; continue`` (``failed``: the names of the
        messages and the roles the test's failure requires, ``failed_role_tests``): where the
        body always leaves the block (``continue``, ``break``, ``return``, ``raise``) and the
        ``else`` does not, nor binds the message anew, the rest of the block sees only that
        role's messages (``exec_block`` gives the name its value back at the block's end)."""
        if not failed or not _exits(stmt.body) or _exits(stmt.orelse):
            return
        env = self.frame.env
        for name, role in failed:
            if not _rebinds(stmt.orelse, name) and name in env:
                whole = env[name]
                env[name] = narrowed(whole, role)
                self.role_skips.append((name, whole, env[name]))

    def computed_once(self, stmt: ast.If) -> bool:
        """True for a field filled on first use, ``if self.x is None: ... self.x = ...``
        (also ``if not self.x:``) with no ``else``, where no method of the class but an
        ``__init__``-like one sets ``x`` back to ``None``: the body runs once per object."""
        frame = self.frame
        if frame.cls is None or frame.self_name is None or stmt.orelse:
            return False
        test = stmt.test
        subject: ast.expr | None = None
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            subject = test.left
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            subject = test.operand
        if not (
            isinstance(subject, ast.Attribute)
            and isinstance(subject.value, ast.Name)
            and subject.value.id == frame.self_name
        ):
            return False
        attr = subject.attr

        def sets(node: ast.AST, none_only: bool) -> bool:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    value = sub.value
                    for target in targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and target.attr == attr
                            and isinstance(target.value, ast.Name)
                            and (
                                not none_only
                                or (isinstance(value, ast.Constant) and value.value is None)
                            )
                        ):
                            return True
            return False

        if not any(sets(s, False) for s in stmt.body):
            return False
        return attr not in none_fields(frame.cls)

    def role_tests(self, test: ast.expr) -> list[tuple[ast.expr, str]]:
        """The (message, role) pairs a condition requires: ``m.role == "system"``,
        ``m["role"] == "system"`` or ``m.get("role") == "system"``, alone or as a term of an
        ``and``, with a constant role of ``MESSAGE_ROLES``; or one of a few such roles,
        ``m["role"] in ("system", "developer")`` (a tuple, list or set of them), given as the
        roles joined by commas (``"developer,system"``, see ``facts.narrowed``). The role may
        be read into a local first (``role = m["role"]``, then ``role == "system"``). None
        where the function also sets a message's role to a value that may be one of them
        (``m.role = kind``): the role a message was built with is then no longer the role it
        has."""
        return self._role_terms(test, ast.And, negated=False)

    def failed_role_tests(self, test: ast.expr) -> list[tuple[ast.expr, str]]:
        """The (message, role) pairs a condition requires where it is false: ``m["role"] !=
        "system"``, ``m["role"] not in ("system", "developer")`` or ``not m["role"] ==
        "system"`` (the forms of ``role_tests``), alone or as a term of an ``or``: the
        ``else`` of ``if m["role"] != "system":``, and the code after it where its body ends
        in ``continue``, ``break``, ``return`` or ``raise``, see only that role's messages."""
        return self._role_terms(test, ast.Or, negated=True)

    def _role_terms(
        self, test: ast.expr, joiner: type[ast.boolop], negated: bool
    ) -> list[tuple[ast.expr, str]]:
        """``_role_term`` of ``test`` alone, or of each term of it joined by ``joiner``."""
        terms = [test]
        if isinstance(test, ast.BoolOp) and isinstance(test.op, joiner):
            terms = test.values
        return [found for term in terms if (found := self._role_term(term, negated)) is not None]

    def _role_term(self, term: ast.expr, negated: bool) -> tuple[ast.expr, str] | None:
        """(message, roles joined by commas) of one comparison of a message's role with
        constant roles (``role_tests``): with ``negated``, one that holds where the message's
        role is not one of them (``!=``, ``not in``, ``not (... == ...)``)."""
        if isinstance(term, ast.UnaryOp) and isinstance(term.op, ast.Not):
            term, negated = term.operand, not negated
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1):
            return None
        op = term.ops[0]
        equal, member = (ast.NotEq, ast.NotIn) if negated else (ast.Eq, ast.In)
        left, right = term.left, term.comparators[0]
        if isinstance(op, equal):
            if self.const_role(left) is not None:
                left, right = right, left
            role = self.const_role(right)
            if role is None:
                return None
            roles = [role]
        elif isinstance(op, member) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            roles = [r for e in right.elts if (r := self.const_role(e)) is not None]
            if not roles or len(roles) != len(right.elts):
                return None
        else:
            return None
        subject = self.role_subject(left)
        if subject is None or any(self._sets_role(r) for r in roles):
            return None
        return subject, ",".join(sorted(set(roles)))

    def const_role(self, node: ast.expr) -> str | None:
        """The constant message role of ``MESSAGE_ROLES`` that ``node`` is: a string constant,
        or a member of an ``Enum`` class of this module whose value is that string
        (``Role.SYSTEM``, ``Role.SYSTEM.value`` for ``class Role(str, Enum): SYSTEM =
        "system"``); None for anything else (an enum of another module included)."""
        if isinstance(node, ast.Constant):
            return (
                node.value if isinstance(node.value, str) and node.value in MESSAGE_ROLES else None
            )
        if isinstance(node, ast.Attribute) and node.attr == "value":
            node = node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return _enum_roles(self.tree).get((node.value.id, node.attr))
        return None

    def role_subject(self, node: ast.expr) -> ast.expr | None:
        """The message whose role ``node`` reads (``_role_subject``), also through a local
        bound to it (``role = m["role"]``, then ``role``), or None."""
        if isinstance(node, ast.Name):
            bound = self.frame.defs.get(node.id)
            subject = _role_subject(bound) if bound is not None else None
            return subject if isinstance(subject, ast.Name) else None
        return _role_subject(node)

    def _sets_role(self, role: str) -> bool:
        """True when the current function (or module body) assigns a message's role a value
        other than a constant distinct from ``role``."""
        scope: ast.AST = self.frame.func if self.frame.func is not None else self.tree
        # kept on the node, for each role (trees are kept for later analyses of the file)
        known: dict[str, bool] = scope.__dict__.setdefault("_sets_role", {})
        found = known.get(role)
        if found is None:
            found = known[role] = _sets_role(scope, role)
        return found

    def stmt_With(self, stmt: ast.With | ast.AsyncWith) -> None:
        for item in stmt.items:
            value = self.eval(item.context_expr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, value, None)
        self.exec_block(stmt.body)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, stmt: ast.Try) -> None:
        self.exec_block(stmt.body)
        for handler in stmt.handlers:
            self.exec_block(handler.body)
        self.exec_block(stmt.orelse)
        self.exec_block(stmt.finalbody)

    stmt_TryStar = stmt_Try

    def stmt_Match(self, stmt: ast.Match) -> None:
        self.eval(stmt.subject)
        # ``match m["role"]:`` (or a local bound to it): a case of constant roles runs only
        # for the messages of those roles, as the body of ``if m["role"] == "system":``
        subject = self.role_subject(stmt.subject)
        name = subject.id if isinstance(subject, ast.Name) else None
        for case in stmt.cases:
            roles = _case_roles(case, self.const_role)
            if (
                name is None
                or roles is None
                or name not in self.frame.env
                or any(self._sets_role(r) for r in roles)
            ):
                self.exec_block(case.body)
                continue
            whole = self.frame.env[name]
            self.frame.env[name] = narrowed(whole, ",".join(sorted(roles)))
            self.exec_block(case.body)
            if not _rebinds(case.body, name):
                self.frame.env[name] = whole

    def stmt_Import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if self.frame is not self.module_frame:
            self._collect([stmt])

    stmt_ImportFrom = stmt_Import


def _case_roles(
    case: ast.match_case, role_of: Callable[[ast.expr], str | None]
) -> frozenset[str] | None:
    """The constant roles of ``MESSAGE_ROLES`` a case of a ``match`` on a message's role
    takes (``case "system":``, ``case "system" | "developer":``, ``case Role.SYSTEM:`` of an
    enum of the module: ``role_of``), None for any other case (a capture, a wildcard, a
    guard)."""
    if case.guard is not None:
        return None
    options = case.pattern.patterns if isinstance(case.pattern, ast.MatchOr) else [case.pattern]
    roles = set()
    for option in options:
        role = role_of(option.value) if isinstance(option, ast.MatchValue) else None
        if role is None:
            return None
        roles.add(role)
    return frozenset(roles)


#: base classes whose subclasses' members compare by their value or are read by it
_ENUM_BASES = frozenset({"Enum", "StrEnum"})


def _enum_roles(tree: ast.Module) -> dict[tuple[str, str], str]:
    """(class, member) -> role, for each member of an ``Enum`` (or ``StrEnum``) class at
    the top of ``tree`` whose value is a role of ``MESSAGE_ROLES`` (``class Role(str, Enum):
    SYSTEM = "system"``). Kept on the tree."""
    known: dict[tuple[str, str], str] | None = tree.__dict__.get("_promptcache_enum_roles")
    if known is not None:
        return known
    known = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not any(
            (base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")) in _ENUM_BASES
            for base in node.bases
        ):
            continue
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant)
                and stmt.value.value in MESSAGE_ROLES
            ):
                known[(node.name, stmt.targets[0].id)] = str(stmt.value.value)
    tree.__dict__["_promptcache_enum_roles"] = known
    return known


def _rebinds(body: list[ast.stmt], name: str) -> bool:
    """True when ``body`` binds ``name`` anywhere in it (in a function defined there too)."""
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
        for node in ast.walk(ast.Module(body=body, type_ignores=[]))
    )


def _role_subject(node: ast.expr) -> ast.expr | None:
    """The message whose role ``node`` reads (``m`` of ``m.role``, ``m["role"]``,
    ``m.get("role")``), or None."""
    if isinstance(node, ast.Attribute) and node.attr == "role":
        return node.value
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == "role"
    ):
        return node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "role"
    ):
        return node.func.value
    return None


def _sets_role(scope: ast.AST, role: str) -> bool:
    """``StatementsMixin._sets_role`` for the function (or module) ``scope``."""
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                is_role = (isinstance(target, ast.Attribute) and target.attr == "role") or (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "role"
                )
                if is_role and not (
                    isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and value.value != role
                ):
                    return True
    return False


def constant_keys(target: ast.Subscript) -> tuple[str, ...]:
    """The constant string keys, outermost first, a store ``d["a"]["b"] = v`` writes under
    (``("a", "b")``); ``()`` where one of them is not a constant string."""
    path: list[str] = []
    node: ast.expr = target
    while isinstance(node, ast.Subscript):
        if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            return ()
        path.append(node.slice.value)
        node = node.value
    return tuple(reversed(path))


def entry_keys(target: ast.Subscript) -> tuple[str, ...]:
    """The keys, outermost first, a store ``d[k]["a"] = v`` writes under when its innermost
    key is a constant string and an outer one is computed: each computed key is ``ANY_KEY``
    (``(ANY_KEY, "a")``); ``()`` for any other store (a constant number among the keys, a
    computed innermost key)."""
    path: list[str] = []
    node: ast.expr = target
    while isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            path.append(key.value)
        elif isinstance(key, (ast.Constant, ast.Slice)) or not path:
            return ()
        else:
            path.append(ANY_KEY)
        node = node.value
    return tuple(reversed(path)) if ANY_KEY in path else ()


def _bound_before(body: list[ast.stmt], made: ast.expr, store: ast.expr) -> bool:
    """True when a block of ``body`` (itself or one nested in its statements, not in a
    function or class defined there) has a statement ``name = made`` followed, in the same
    block, by a statement that holds ``store``."""
    for stmt_index, stmt in enumerate(body):
        if isinstance(stmt, ast.Assign) and stmt.value is made:
            return any(
                node is store for later in body[stmt_index + 1 :] for node in ast.walk(later)
            )
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in _blocks(stmt):
            if _bound_before(block, made, store):
                return True
    return False


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested directly in ``stmt`` (bodies, else and finally blocks,
    handlers, match cases)."""
    blocks: list[list[ast.stmt]] = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            blocks.append(block)
    for handler in getattr(stmt, "handlers", ()):
        blocks.append(handler.body)
    for case in getattr(stmt, "cases", ()):
        blocks.append(case.body)
    return blocks


def _under_state_test(func: ast.AST, node: ast.expr) -> bool:
    """True when ``node`` is inside an ``if`` (or a conditional expression) of ``func`` whose
    test reads a ``state`` field (``if "started" not in ctx.state:``, ``if not
    state.get("started"):``) or a local bound to one."""
    spans: list[tuple[int, int]] | None = func.__dict__.get("_state_tests")
    if spans is None:
        bound = {
            target.id
            for stmt in ast.walk(func)
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Attribute)
            and stmt.value.attr == "state"
            for target in stmt.targets
            if isinstance(target, ast.Name)
        }
        spans = []
        for test in ast.walk(func):
            if not isinstance(test, (ast.If, ast.IfExp, ast.While)):
                continue
            if any(
                (isinstance(n, ast.Attribute) and n.attr == "state")
                or (isinstance(n, ast.Name) and n.id in bound)
                for n in ast.walk(test.test)
            ):
                spans.append((test.lineno, getattr(test, "end_lineno", test.lineno) or 0))
        func.__dict__["_state_tests"] = spans
    return any(start <= node.lineno <= end for start, end in spans)


def _entry_of(expr: ast.expr | None) -> tuple[object, ast.expr | None]:
    """The constant key and the container of an entry a local is bound to: ``("r", ctx)`` for
    ``ctx["r"]``, ``ctx.setdefault("r", {})`` or ``ctx.get("r")``; ``(None, None)`` for any
    other binding (a computed key, a call of something else)."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return expr.slice.value, expr.value
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("setdefault", "get")
        and expr.args
        and isinstance(expr.args[0], ast.Constant)
    ):
        return expr.args[0].value, expr.func.value
    return None, None
