"""What PC007 needs to count breakpoints statically (not a rule: the registry skips ``_`` modules).

- ``Scope``: int values of simple constant names (a single assignment in the function, a
  parameter's default, a module constant, ``Final`` included);
- ``iter_size``: how many elements a ``for`` iterable yields, when statically known;
- ``Module``: same-module functions that set ``cache_control`` on an argument, return a block
  that carries one, or return a single index/element, followed one or two calls deep.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from ..nodes import all_nodes

KEYS = ("cache_control", "cachePoint")
MAX_BREAKPOINTS = 4
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
#: how deep calls into same-module helpers are followed (loop -> helper -> helper)
_DEPTH = 2
#: methods that change a list's length in place
_RESIZERS = ("append", "extend", "insert", "__iadd__")


def own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes of a body, not descending into nested functions, lambdas or classes."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
        elif isinstance(node, (*_FUNCS, ast.ClassDef)):
            stack.extend(node.decorator_list)


# ----------------------------------------------------------------------------- constants


@dataclass
class Scope:
    """Names bound in one function (or the module): name -> the values bound to it.

    A value of None is a binding whose value is not a plain expression (a loop target, an
    import, ``+=``, ``global``); a name is constant only when it has exactly one binding.
    """

    names: dict[str, list[ast.expr | None]] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)

    def bind(self, name: str, value: ast.expr | None) -> None:
        self.names.setdefault(name, []).append(value)


def function_scope(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> Scope:
    scope = Scope()
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    scope.params = {a.arg for a in (*positional, *args.kwonlyargs)}
    for arg, default in zip(positional, defaults, strict=True):
        scope.bind(arg.arg, default)  # a parameter is taken at its default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        scope.bind(arg.arg, kw_default)
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            scope.bind(extra.arg, None)
    body: list[ast.stmt] = func.body if isinstance(func.body, list) else [ast.Return(func.body)]
    _bind_body(scope, body)
    return scope


class LazyScope(Scope):
    """``function_scope(func)``, computed when a name is first looked up in it (most
    functions of a module hold no loop whose length depends on their names)."""

    def __init__(self, func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._func = func
        self._scope: Scope | None = None

    @property
    def func(self) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda:
        """The function whose names this scope holds."""
        return self._func

    def _get(self) -> Scope:
        if self._scope is None:
            self._scope = function_scope(self._func)
        return self._scope

    @property
    def names(self) -> dict[str, list[ast.expr | None]]:  # type: ignore[override]
        return self._get().names

    @property
    def params(self) -> set[str]:  # type: ignore[override]
        return self._get().params


def module_scope(tree: ast.Module) -> Scope:
    scope = Scope()
    _bind_body(scope, tree.body)
    for node in all_nodes(tree):
        if isinstance(node, ast.Global):  # written from a function: not a constant
            for name in node.names:
                scope.bind(name, None)
    return scope


def _bind_body(scope: Scope, body: list[ast.stmt]) -> None:
    valued: set[int] = set()
    for node in own_nodes(body):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    scope.bind(target.id, node.value)
                    valued.add(id(target))
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
        ):
            scope.bind(node.target.id, node.value)
            valued.add(id(node.target))
    for node in own_nodes(body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            if id(node) not in valued:
                scope.bind(node.id, None)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                scope.bind(name, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                scope.bind((alias.asname or alias.name).split(".")[0], None)
        elif isinstance(
            node, (*_FUNCS, ast.ClassDef, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
        ):
            if node.name:  # def, class, except ... as name, case ... as name
                scope.bind(node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.bind(node.rest, None)


def const_int(node: ast.expr | None, chain: list[Scope], depth: int = 0) -> int | None:
    """The int value of ``node`` when it is a literal or a simple constant name, else None."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = const_int(node.operand, chain, depth + 1)
        if value is None:
            return None
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left = const_int(node.left, chain, depth + 1)
        right = const_int(node.right, chain, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        return left - right if isinstance(node.op, ast.Sub) else left * right
    if isinstance(node, ast.Name):
        for index, scope in enumerate(chain):
            values = scope.names.get(node.id)
            if values is not None:
                if len(values) != 1:
                    return None
                return const_int(values[0], chain[index:], depth + 1)
    return None


# ----------------------------------------------------------------------------- sizes


def slice_size(node: ast.Subscript, chain: list[Scope]) -> int | None:
    """At most how many elements ``node`` (a slice) takes, or None when not bounded."""
    sl = node.slice
    if not isinstance(sl, ast.Slice):
        return None
    step = 1 if sl.step is None else const_int(sl.step, chain)
    if step is None or step < 1:
        return None
    low = const_int(sl.lower, chain)
    up = const_int(sl.upper, chain)
    bounds: list[int] = []
    if low is not None and low < 0:
        bounds.append(-low)  # the last -low elements at most
    if up is not None and up >= 0:
        bounds.append(up - low if low is not None and low >= 0 else up)
    if low is not None and up is not None and (low < 0) == (up < 0):
        bounds.append(up - low)
    difference = _constant_difference(sl.lower, sl.upper, chain)
    if difference is not None:
        bounds.append(difference)  # [i:i + 4], [n - 4:n]
    if not bounds:
        return None
    size = max(0, min(bounds))
    return -(-size // step)


def _constant_difference(
    lower: ast.expr | None, upper: ast.expr | None, chain: list[Scope]
) -> int | None:
    if lower is None or upper is None:
        return None
    if isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add):
        if ast.dump(upper.left) == ast.dump(lower):
            return const_int(upper.right, chain)
        if ast.dump(upper.right) == ast.dump(lower):
            return const_int(upper.left, chain)
    if (
        isinstance(lower, ast.BinOp)
        and isinstance(lower.op, ast.Sub)
        and ast.dump(lower.left) == ast.dump(upper)
    ):
        return const_int(lower.right, chain)
    return None


def iter_size(
    node: ast.expr, chain: list[Scope], module: Module, cls: ast.ClassDef | None, depth: int = 0
) -> int | None:
    """At most how many elements iterating ``node`` yields, when statically known."""
    if depth > 8:
        return None
    depth += 1
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        own = slice_size(node, chain)
        inner = iter_size(node.value, chain, module, cls, depth)
        known = [n for n in (own, inner) if n is not None]
        return min(known) if known else None
    if isinstance(node, ast.NamedExpr):
        return iter_size(node.value, chain, module, cls, depth)
    if isinstance(node, ast.Name) and node.id in module.resized:
        for index, scope in enumerate(chain):  # picked = []; picked.append(i); if len(...
            if scope.names.get(node.id) is not None:
                if isinstance(scope, LazyScope) and not isinstance(scope.func, ast.Lambda):
                    return self_capped_size(node.id, scope.func, chain[index:], module, cls, depth)
                return None
        return None
    if isinstance(node, ast.Name):
        for index, scope in enumerate(chain):  # tail = messages[-2:]; for m in tail: ...
            values = scope.names.get(node.id)
            if values is not None:
                if len(values) != 1 or values[0] is None or node.id in scope.params:
                    return None  # a parameter's default says nothing of what callers pass
                return iter_size(values[0], chain[index:], module, cls, depth)
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return len(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # a[:2] + b[-2:]
        left = iter_size(node.left, chain, module, cls, depth)
        right = iter_size(node.right, chain, module, cls, depth)
        return None if left is None or right is None else left + right
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and not node.keywords:
        name = node.func.id
        if name == "range" and 1 <= len(node.args) <= 3:
            ints = [const_int(a, chain) for a in node.args]
            if any(v is None for v in ints) or ints[2:] == [0]:
                return None
            return len(range(*(v or 0 for v in ints)))
        if name in ("enumerate", "reversed", "list", "sorted", "tuple") and node.args:
            return iter_size(node.args[0], chain, module, cls, depth)
        if name == "zip" and node.args:
            sizes = [iter_size(a, chain, module, cls, depth) for a in node.args]
            known = [s for s in sizes if s is not None]
            return min(known) if known else None
    helper = module.helper(node, cls)
    if helper is not None and helper.returns_one:
        return 1
    return None


#: list methods that neither grow a list nor hand it to code that could
_LIST_READS = frozenset({"index", "count", "copy"})


def self_capped_size(
    name: str,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    chain: list[Scope],
    module: Module | None = None,
    cls: ast.ClassDef | None = None,
    depth: int = 0,
) -> int | None:
    """At most how many elements the local list ``name`` of ``func`` holds when the loop that
    fills it stops itself at a constant length: ``name`` is bound once, to ``[]`` (annotated
    or not), and grows
    only by one ``name.append(...)`` statement, which a ``len`` test of the list stops: ``if
    len(name) >= n: break`` (``== n``, ``> n - 1``; ``return`` too) after the append in its own
    block with no ``continue`` between, the same test before the statement holding the append
    in the loop's body, or ``while len(name) < n:`` (also in an ``and``) as the loop; or a
    ``for`` loop over something of known size (``for seg in ("static", "stable",
    "dynamic"):``, ``range(3)``; ``iter_size`` with ``module`` and ``cls``), which runs the
    append at most that many times. That
    loop must be the innermost around the append and the only one around it that is not also
    around the binding (an outer loop that entered it again would add one more each time).
    ``chain[0]`` is ``func``'s scope. Every other
    use of ``name`` only reads it (``len``, ``in``, iterating, an index, ``.index``/``.count``/
    ``.copy``); one passed to a call, returned, aliased or used in a nested function may grow
    elsewhere. None when any of that does not hold."""
    scope = chain[0]
    values = scope.names.get(name)
    if values is None or len(values) != 1 or name in scope.params:
        return None
    start = values[0]
    if not (isinstance(start, ast.List) and not start.elts):
        return None
    parents: dict[int, ast.AST] = {}
    for walked in ast.walk(func):
        for child in ast.iter_child_nodes(walked):
            parents[id(child)] = walked
    growth: list[ast.Expr] = []
    binding: ast.Assign | ast.AnnAssign | None = None
    for node in ast.walk(func):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        if _in_nested_scope(node, func, parents):
            return None
        parent = parents.get(id(node))
        if isinstance(node.ctx, ast.Store):
            if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is start:
                binding = parent
                continue
            return None
        use = _list_use(node, parent, parents)
        if use is None:
            return None
        if isinstance(use, ast.Expr):
            growth.append(use)
    if binding is None or len(growth) != 1:
        return None
    loop = _filling_loop(growth[0], binding, func, parents)
    if loop is None:
        return None
    passes: int | None = None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and module is not None:
        passes = iter_size(loop.iter, chain, module, cls, depth)
    stop = _append_cap(name, growth[0], loop, func, parents, chain)
    known = [n for n in (passes, stop) if n is not None]
    return min(known) if known else None


def _filling_loop(
    append: ast.Expr,
    binding: ast.AST,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    parents: dict[int, ast.AST],
) -> ast.For | ast.AsyncFor | ast.While | None:
    """The innermost loop around ``append`` when it is the only loop around it that is not
    also around ``binding``, else None."""
    loops: list[ast.For | ast.AsyncFor | ast.While] = []
    parent = parents.get(id(append))
    while parent is not None and parent is not func:
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)):
            loops.append(parent)
        parent = parents.get(id(parent))
    around_binding: set[int] = set()
    parent = parents.get(id(binding))
    while parent is not None and parent is not func:
        around_binding.add(id(parent))
        parent = parents.get(id(parent))
    if not loops or id(loops[0]) in around_binding:
        return None
    if any(id(loop) not in around_binding for loop in loops[1:]):
        return None
    return loops[0]


def _in_nested_scope(node: ast.AST, func: ast.AST, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    while parent is not None and parent is not func:
        if isinstance(parent, _SCOPES):
            return True
        parent = parents.get(id(parent))
    return False


def _list_use(
    node: ast.Name, parent: ast.AST | None, parents: dict[int, ast.AST]
) -> ast.AST | None:
    """What reading the list ``node`` does: the ``name.append(...)`` statement for a growth,
    the reading node for a read that cannot grow it, None for anything else."""
    if isinstance(parent, ast.Attribute) and parent.value is node:
        call = parents.get(id(parent))
        if not (isinstance(call, ast.Call) and call.func is parent):
            return None
        if parent.attr in _LIST_READS:
            return call
        statement = parents.get(id(call))
        if parent.attr == "append" and len(call.args) == 1 and isinstance(statement, ast.Expr):
            return statement
        return None
    if isinstance(parent, ast.Call) and _is_len(parent) and parent.args[0] is node:
        return parent
    if isinstance(parent, ast.Compare) and node in parent.comparators:
        op = parent.ops[parent.comparators.index(node)]
        return parent if isinstance(op, (ast.In, ast.NotIn)) else None
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
        return parent
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return parent if isinstance(parent.ctx, ast.Load) else None
    return None


def _is_len(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
    )


def _append_cap(
    name: str,
    append: ast.Expr,
    loop: ast.For | ast.AsyncFor | ast.While,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    parents: dict[int, ast.AST],
    chain: list[Scope],
) -> int | None:
    """``self_capped_size``'s ``len`` test cap on the one ``append`` statement in ``loop``
    (``_filling_loop``), or None."""
    trail: list[ast.AST] = [append]  # the append, then each node above it up to ``loop``
    parent = parents.get(id(append))
    while parent is not None and parent is not func and trail[-1] is not loop:
        trail.append(parent)
        parent = parents.get(id(parent))
    if isinstance(loop, ast.While):  # ``while len(name) < n and ...:``
        tests = loop.test.values if isinstance(loop.test, ast.BoolOp) else [loop.test]
        if isinstance(loop.test, ast.BoolOp) and not isinstance(loop.test.op, ast.And):
            return None
        sizes = [_stop_size(name, t, chain, stop_when=False) for t in tests]
        return min((s for s in sizes if s is not None), default=None)
    # the check after the append, in the append's own block
    block = next(
        (b for b in _stmt_blocks(parents.get(id(append))) if any(s is append for s in b)), []
    )
    after = block[next((i for i, s in enumerate(block) if s is append), len(block)) + 1 :]
    for stmt in after:
        size = _stop_check(name, stmt, chain)
        if size is not None:
            return size
        if _has_continue(stmt):
            break
    # the check before the statement of the loop's body that holds the append
    holder = trail[trail.index(loop) - 1]
    for stmt in loop.body:
        if stmt is holder:
            break
        size = _stop_check(name, stmt, chain)
        if size is not None:
            return size
    return None


def _stmt_blocks(node: ast.AST | None) -> Iterator[list[ast.stmt]]:
    for key in ("body", "orelse", "finalbody"):
        block = getattr(node, key, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(node, "handlers", None) or []:
        yield handler.body


def _has_continue(node: ast.AST) -> bool:
    if isinstance(node, ast.Continue):
        return True
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While, *_SCOPES)):
        return False
    return any(_has_continue(child) for child in ast.iter_child_nodes(node))


def _stop_check(name: str, stmt: ast.stmt, chain: list[Scope]) -> int | None:
    """n for ``if len(name) >= n: break`` (or ``return``), else None."""
    if not (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], (ast.Break, ast.Return))
    ):
        return None
    return _stop_size(name, stmt.test, chain, stop_when=True)


def _stop_size(name: str, test: ast.expr, chain: list[Scope], stop_when: bool) -> int | None:
    """The length at which ``test`` on ``len(name)`` stops the loop: true from it on
    (``len(name) >= n``, ``== n``, ``> n - 1``) when ``stop_when``, false from it on
    (``len(name) < n``, ``!= n``, ``<= n - 1``) when not. None for any other test, or n < 1."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    if _is_len(right) and not _is_len(left):
        left, right = right, left
        op = flipped.get(type(op), type(op))()
    if not (_is_len(left) and isinstance(left, ast.Call)):
        return None
    arg = left.args[0]
    if not (isinstance(arg, ast.Name) and arg.id == name):
        return None
    limit = const_int(right, chain)
    if limit is None:
        return None
    if stop_when:
        sizes = {ast.GtE: limit, ast.Eq: limit, ast.Gt: limit + 1}
    else:
        sizes = {ast.Lt: limit, ast.NotEq: limit, ast.LtE: limit + 1}
    size = sizes.get(type(op))
    return size if size is not None and size >= 1 else None


# ----------------------------------------------------------------------------- helpers


def is_copy(value: ast.expr, per_element: Collection[str] | None = None) -> bool:
    """True when ``value`` reads another block's breakpoint (``tool["cache_control"]``,
    ``tool.get("cache_control")``), or another object's (``item.cache_control``,
    ``getattr(item, "cache_control", None)``: what it already carries, one for one). An
    attribute of ``self`` or ``cls`` (``self.cache_control``) is the object's own setting,
    given to each block it is written into: not a copy. With ``per_element``, the names bound
    anew for each element where the value is read (a loop's or a comprehension's targets and
    the names its body binds; a helper's parameters): only an attribute of one of them is a
    copy, while one of an object bound once for all elements (``settings.cache_control`` of a
    parameter or a module's setting) gives each element the same marker."""
    if isinstance(value, ast.Subscript):
        return isinstance(value.slice, ast.Constant) and value.slice.value in KEYS
    if isinstance(value, ast.Attribute):
        return value.attr in KEYS and _copied_from(value.value, per_element)
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and value.args:
            first = value.args[0]
            return isinstance(first, ast.Constant) and first.value in KEYS
        if isinstance(func, ast.Name) and func.id == "getattr" and len(value.args) >= 2:
            key = value.args[1]
            return (
                isinstance(key, ast.Constant)
                and key.value in KEYS
                and _copied_from(value.args[0], per_element)
            )
        if len(value.args) == 1 and not value.keywords:  # dict(...), copy.deepcopy(...)
            return is_copy(value.args[0], per_element)
    return False


def _copied_from(holder: ast.expr, per_element: Collection[str] | None) -> bool:
    """Whether an attribute of ``holder`` is another object's own marker (``is_copy``)."""
    root = chain_root(holder)
    return root not in _OWN and (per_element is None or root in per_element)


def bound_names(*nodes: ast.AST) -> frozenset[str]:
    """The names ``nodes`` bind (targets, ``:=``, a loop's or comprehension's targets), not
    inside functions or classes defined there: what is bound anew for each element."""
    found: set[str] = set()
    stack: list[ast.AST] = [child for node in nodes for child in ast.iter_child_nodes(node)]
    while stack:
        sub = stack.pop()
        if isinstance(sub, _SCOPES):
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            found.add(sub.id)
        stack.extend(ast.iter_child_nodes(sub))
    return frozenset(found)


#: the names whose attributes are an object's own settings, not a copied block's marker
_OWN = frozenset({"self", "cls"})


def sets_none(value: ast.expr, per_element: Collection[str] | None = None) -> bool:
    """True when a breakpoint key or keyword given ``value`` adds no breakpoint: a copy of
    another block's (``is_copy``), ``None`` (``cache_control=None`` sets no breakpoint) or
    ``False`` (``message.cache(cache_control=False)`` clears one)."""
    if isinstance(value, ast.Constant):
        return value.value is None or value.value is False
    return is_copy(value, per_element)


def membership_guard(test: ast.expr, elements: Collection[str] = frozenset()) -> str | None:
    """ "in" for ``"cache_control" in block`` (the body only re-marks a marked block), "not in"
    for the negation (the else branch does), None otherwise. For a name in ``elements`` (what a
    loop binds to each element) a test that the element carries a marker is "in" as well:
    ``item.get("cache_control")``, ``item["cache_control"]``, ``item.cache_control``,
    ``getattr(item, "cache_control", None)``, alone, with ``is not None`` or as one operand of
    an ``and`` (the body copies the caller's marker onto the block it builds, one for one);
    ``not`` such a read, or ``... is None``, is "not in"."""
    if elements:
        read = _element_marker_test(test, elements)
        if read is not None:
            return read
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Constant)
        and test.left.value in KEYS
    ):
        if isinstance(test.ops[0], ast.In):
            return "in"
        if isinstance(test.ops[0], ast.NotIn):
            return "not in"
    return None


def _element_marker_test(test: ast.expr, elements: Collection[str]) -> str | None:
    """``membership_guard``'s reading of a test on a loop element's own marker."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        if any(_element_marker_test(v, elements) == "in" for v in test.values):
            return "in"
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return "not in" if _element_marker_test(test.operand, elements) == "in" else None
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and _element_marker_read(test.left, elements)
    ):
        return "in" if isinstance(test.ops[0], ast.IsNot) else "not in"
    return "in" if _element_marker_read(test, elements) else None


def _element_marker_read(node: ast.expr, elements: Collection[str]) -> bool:
    """True for a read of the marker of a name in ``elements`` (or of a part of it):
    ``item.get("cache_control")``, ``item["cache_control"]``, ``item.cache_control``,
    ``getattr(item, "cache_control", None)``."""
    owner: ast.expr | None = None
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and node.slice.value in KEYS:
            owner = node.value
    elif isinstance(node, ast.Attribute):
        if node.attr in KEYS:
            owner = node.value
    elif isinstance(node, ast.Call) and node.args:
        first = node.args[0]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get":
            if isinstance(first, ast.Constant) and first.value in KEYS:
                owner = func.value
        elif isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            key = node.args[1]
            if isinstance(key, ast.Constant) and key.value in KEYS:
                owner = first
    return owner is not None and chain_root(owner) in elements


def chain_root(node: ast.expr) -> str | None:
    """``block`` for ``block``, ``block["content"][-1]``, ``block.content[0]``."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


@dataclass
class Helper:
    """A same-module function and what calling it does to breakpoints.

    ``marks``: the parameters (positional index, name) on which it sets a breakpoint;
    ``returns_mark``: it returns a block dict with a breakpoint; ``returns_one``: it returns a
    single index or element (an int, a subscript, a name bound to an int), never a collection;
    ``flag``: the parameter that decides whether the block it returns is marked
    (``if cache: block["cache_control"] = ...; return block``), "" if none; ``passes``: the
    parameter every marked block it returns takes its marker from (``return {"cachePoint":
    point}``, ``point`` bound only as the parameter), "" if none.
    """

    node: ast.FunctionDef | ast.AsyncFunctionDef
    params: list[str]
    marks: set[str] = field(default_factory=set)
    returns_mark: bool = False
    returns_one: bool = False
    flag: str = ""
    passes: str = ""

    def argument(self, call: ast.Call, param: str) -> ast.expr | None:
        """What ``call`` gives the parameter ``param``: the argument at its position or the
        keyword of its name (the keyword when both); None when it gives none, or a ``*args``
        stands there."""
        given: ast.expr | None = None
        if param in self.params and self.params.index(param) < len(call.args):
            given = call.args[self.params.index(param)]
        for keyword in call.keywords:
            if keyword.arg == param:
                given = keyword.value
        return None if isinstance(given, ast.Starred) else given

    def copies(self, call: ast.Call) -> bool:
        """True when ``call`` gives ``passes`` a copy of another block's marker or ``None``
        (``sets_none``): the block it returns carries that marker, one for one, no new one."""
        if not self.passes:
            return False
        given = self.argument(call, self.passes)
        return given is not None and sets_none(given)

    def flag_set(self, call: ast.Call, compared: Collection[str] = frozenset()) -> bool:
        """True when ``call`` may set the helper's ``flag`` on every call: a literal ``True``,
        or a flag read from data (``use_cache``, ``message.cache``). Not: a literal false
        value, the default, or an expression with a comparison (``use_cache and i ==
        len(parts) - 1``) or a name bound to one (``compared``: ``is_last = i == ...``),
        which is an index guard."""
        if not self.flag:
            return False
        given = self.argument(call, self.flag)
        if given is None:
            return False
        if isinstance(given, ast.Constant):
            return given.value is True
        return not any(
            (isinstance(n, ast.Compare) and not picks_many(n))
            or (isinstance(n, ast.Name) and n.id in compared)
            for n in ast.walk(given)
        )

    def marked_arg(self, call: ast.Call) -> ast.expr | None:
        """The argument of ``call`` that this helper sets a breakpoint on, if any."""
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return None
            if index < len(self.params) and self.params[index] in self.marks:
                return arg
        for keyword in call.keywords:
            if keyword.arg in self.marks:
                return keyword.value
        return None


class Module:
    """Same-module functions (module level, and methods for ``self.name(...)``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.functions = {n.name: n for n in tree.body if isinstance(n, _FUNCS)}
        self.methods: dict[int, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.owner: dict[int, ast.ClassDef] = {}
        #: names whose length may change after binding (``tail.append(...)``, ``tail[:] = ...``)
        self.resized: set[str] = set()
        #: names bound to a comparison (``is_last = i == len(parts) - 1``): an index guard
        #: when passed as a helper's flag
        self.compared: set[str] = set()
        for node in all_nodes(tree):  # one walk of the tree for all three tables
            if isinstance(node, ast.ClassDef):
                self.methods[id(node)] = {n.name: n for n in node.body if isinstance(n, _FUNCS)}
                for n in node.body:
                    if isinstance(n, _FUNCS):
                        self.owner[id(n)] = node
            elif isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and node.attr in _RESIZERS:
                    self.resized.add(node.value.id)
            elif isinstance(node, ast.Subscript):
                if (
                    isinstance(node.value, ast.Name)
                    and not isinstance(node.ctx, ast.Load)
                    and isinstance(node.slice, ast.Slice)
                ):
                    self.resized.add(node.value.id)
            elif isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Compare) and not picks_many(n) for n in ast.walk(node.value)
            ):
                self.compared.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self._memo: dict[tuple[int, int], Helper] = {}
        self._busy: set[int] = set()

    def helper(self, call: ast.Call, cls: ast.ClassDef | None, depth: int = 1) -> Helper | None:
        func = call.func
        target: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        method = False
        if isinstance(func, ast.Name):
            target = self.functions.get(func.id)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
            and cls is not None
        ):
            target = self.methods.get(id(cls), {}).get(func.attr)
            method = target is not None and not any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in target.decorator_list
            )
        if target is None or depth > _DEPTH or id(target) in self._busy:
            return None
        key = (id(target), depth)
        if key not in self._memo:
            self._busy.add(id(target))
            try:
                self._memo[key] = self._summarise(target, method, depth)
            finally:
                self._busy.discard(id(target))
        return self._memo[key]

    def _summarise(
        self, func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool, depth: int
    ) -> Helper:
        names = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        helper = Helper(func, names[1:] if method else names)
        scope = function_scope(func)
        params = set(helper.params) | {a.arg for a in func.args.kwonlyargs}
        cls = self.owner.get(id(func))
        # a marked block stored into a parameter (``entry["content"] = [{..., "cache_control":
        # ...}]``) marks that parameter
        stored_into: dict[int, ast.expr] = {}
        for stmt in own_nodes(func.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                for inner in ast.walk(stmt.value):
                    if isinstance(inner, ast.Dict):
                        stored_into[id(inner)] = stmt.targets[0]
        # a helper's parameters and the names it binds are its own on each call
        per_element = bound_names(func) | params
        for node, _via in marks_in(func.body, set(), self, cls, depth + 1, per_element=per_element):
            target: ast.AST | None = stored_into.get(id(node), node)
            if isinstance(node, ast.Call):
                callee = self.helper(node, cls, depth + 1)
                target = callee.marked_arg(node) if callee is not None else None
            if isinstance(target, ast.Subscript) and isinstance(target.ctx, ast.Store):
                target = target.value
            if isinstance(target, ast.expr):
                root = chain_root(target)
                if root in params and len(scope.names.get(root, [])) == 1:
                    helper.marks.add(root)
        returns = [n for n in own_nodes(func.body) if isinstance(n, ast.Return)]
        generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(func.body))
        # a block returned under ``if "cachePoint" in block:`` passes on a breakpoint its
        # argument already carried (a converter's re-emit): it adds none
        passed: set[str | None] = set()  # where each marked block returned takes its marker
        for ret in _unguarded_returns(func.body):
            value = ret.value
            if isinstance(value, ast.Dict) and (key := dict_mark(value, per_element)) is not None:
                helper.returns_mark = True
                mark = value.values[value.keys.index(key)]
                passed.add(mark.id if isinstance(mark, ast.Name) else None)
            elif isinstance(value, ast.Call):
                callee = self.helper(value, cls, depth + 1)
                if callee is not None and callee.returns_mark:
                    helper.returns_mark = True
                    passed.add(None)
        only = next(iter(passed)) if len(passed) == 1 else None
        if only in params and len(scope.names.get(only, [])) == 1:
            helper.passes = only
        returned = {r.value.id for r in returns if isinstance(r.value, ast.Name)}
        for stmt in own_nodes(func.body):
            if not isinstance(stmt, ast.If) or stmt.orelse:
                continue
            flag = _flag_tested(stmt.test, sorted(params), scope)
            # the body itself marks the returned block: ``block["cache_control"] = ...``
            marks_returned = any(
                isinstance(sub, ast.Assign)
                and any(
                    isinstance(t, ast.Subscript)
                    and isinstance(t.slice, ast.Constant)
                    and t.slice.value in KEYS
                    and chain_root(t.value) in returned
                    for t in sub.targets
                )
                for sub in stmt.body
            )
            if flag and marks_returned:
                helper.flag = flag
        valued = [r.value for r in returns if r.value is not None]
        helper.returns_one = (
            not generator and bool(valued) and all(_single(v, scope, func) for v in valued)
        )
        return helper


def _unguarded_returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    """The ``return`` statements of ``body`` (not of nested functions) that are not in the body
    of ``if "cache_control" in b`` nor in the else branch of its negation, as ``marks_in``
    skips those branches."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            yield stmt
        elif isinstance(stmt, ast.If):
            member = membership_guard(stmt.test)
            if member != "in":
                yield from _unguarded_returns(stmt.body)
            if member != "not in":
                yield from _unguarded_returns(stmt.orelse)
        elif not isinstance(stmt, _SCOPES):
            for child in (*_blocks(stmt), *_loop_blocks(stmt)):
                yield from _unguarded_returns(child)


def _loop_blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        yield stmt.body
        yield stmt.orelse


def _flag_tested(test: ast.expr, params: list[str], scope: Scope) -> str:
    """The parameter an ``if`` tests as a flag: ``if cache:``, ``if cache is not None:``,
    ``if use_cache and ...:``, or through a local bound once to a call on it (``marker =
    _cache_control(use_cache)``; ``if marker is not None:``); "" for any other test (a type
    test such as ``isinstance(content, TextContent)`` is not a flag)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next((f for f in (_flag_tested(v, params, scope) for v in test.values) if f), "")
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
        and isinstance(test.comparators[0], ast.Constant)
    ):
        test = test.left
    if not isinstance(test, ast.Name):
        return ""
    if test.id in params:
        return test.id
    bound = scope.names.get(test.id, [])
    if len(bound) == 1 and isinstance(bound[0], ast.Call):
        given = [a.id for a in bound[0].args if isinstance(a, ast.Name) and a.id in params]
        return given[0] if len(given) == 1 else ""
    return ""


def _single(value: ast.expr, scope: Scope, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when ``value`` is one index or element, not a collection."""
    if isinstance(value, ast.Constant):
        return value.value is None or type(value.value) is int
    if isinstance(value, ast.Subscript):
        return not isinstance(value.slice, ast.Slice)
    if isinstance(value, (ast.UnaryOp, ast.BinOp)):
        return const_int(value, [scope]) is not None
    if isinstance(value, ast.Name):
        return _int_name(value.id, scope, func)
    return False


def _int_name(
    name: str,
    scope: Scope,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    seen: frozenset[str] = frozenset(),
) -> bool:
    """True when every binding of ``name`` in ``func`` gives it an int (``i = 0``,
    ``for i in range(...)``, ``for i, _ in enumerate(...)``, ``i = len(...)``, ``i = j``)."""
    seen = seen | {name}

    def intlike(value: ast.expr) -> bool:
        if isinstance(value, ast.Name) and value.id not in seen:
            return _int_name(value.id, scope, func, seen)
        return _intlike(value)

    ints: set[int] = set()  # the Name nodes bound to an int
    for node in own_nodes(func.body):
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call):
            it = node.iter
            if isinstance(it.func, ast.Name) and it.func.id == "range":
                ints.add(id(node.target))
            elif (
                isinstance(it.func, ast.Name)
                and it.func.id == "enumerate"
                and isinstance(node.target, ast.Tuple)
                and node.target.elts
            ):
                ints.add(id(node.target.elts[0]))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            mine = [t for t in targets if isinstance(t, ast.Name) and t.id == name]
            if mine and intlike(node.value):
                ints.update(id(t) for t in mine)
    stores = [
        n
        for n in own_nodes(func.body)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
    ]
    if name in scope.params or len(stores) != len(scope.names.get(name, [])):
        return False  # a parameter, or bound by something other than a plain name store
    return bool(stores) and all(id(store) in ints for store in stores)


def _intlike(value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return type(value.value) is int
    if isinstance(value, ast.UnaryOp):
        return _intlike(value.operand)
    if isinstance(value, ast.BinOp):
        return _intlike(value.left) and _intlike(value.right)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id == "len"
    return False


# ----------------------------------------------------------------------------- marks


def dict_mark(node: ast.Dict, per_element: Collection[str] | None = None) -> ast.expr | None:
    """The ``"cache_control": ...`` key of a block dict that adds a breakpoint (not a copy,
    not ``None``; ``per_element`` as for ``is_copy``)."""
    for key, value in zip(node.keys, node.values, strict=True):
        if (
            isinstance(key, ast.Constant)
            and key.value in KEYS
            and not sets_none(value, per_element)
        ):
            return key
    return None


def expr_marks(
    node: ast.AST,
    compared: Collection[str] = frozenset(),
    per_element: Collection[str] | None = None,
) -> Iterator[ast.AST]:
    """Breakpoints an expression adds: block dicts and ``cache_control=`` keywords, not
    copies nor ``None``, and not inside ``x if "cache_control" in b else y`` (re-marks a
    marked block). A ``cache_control=`` keyword or ``"cache_control":`` key whose value is set
    only under an index guard (``is_last``, a name in ``compared``, or a comparison:
    ``{"cache_control": MARK if i == len(parts) - 1 else None}``) marks one element, not each:
    see ``index_guarded``."""
    if isinstance(node, ast.IfExp):
        guard = membership_guard(node.test)
        if guard != "in":
            yield from expr_marks(node.body, compared, per_element)
        if guard != "not in":
            yield from expr_marks(node.orelse, compared, per_element)
        return
    if isinstance(node, ast.Dict):
        key = dict_mark(node, per_element)
        if key is not None and not index_guarded(node.values[node.keys.index(key)], compared):
            yield node
            return
    if (
        isinstance(node, ast.keyword)
        and node.arg in KEYS
        and not sets_none(node.value, per_element)
    ):
        if not index_guarded(node.value, compared):
            yield node
        return
    if isinstance(node, _SCOPES):
        return
    for child in ast.iter_child_nodes(node):
        yield from expr_marks(child, compared, per_element)


def _is_index_test(node: ast.expr, compared: Collection[str]) -> bool:
    """``i == len(parts) - 1``, or a name bound to a comparison (``is_last``); not a
    comparison that lets more than 4 indexes through (``picks_many``: ``i < 10``)."""
    if isinstance(node, ast.Compare):
        return not picks_many(node)
    return isinstance(node, ast.Name) and node.id in compared


#: the least constant bound of ``x < N`` (``x <= N``: one less) that lets more than 4 indexes
#: through whether they count from 0 or from 1 (``enumerate(blocks, 1)``)
_MANY_BELOW = MAX_BREAKPOINTS + 2


def picks_many(test: ast.expr) -> bool:
    """True for a comparison of a value below a constant that lets more than 4 indexes
    through: ``i < 10`` (or ``10 > i``) picks the first 10 elements, ``i <= 4`` at least the 4
    from 1 to 4 and the 0 of a count from 0 (``i < 5`` is not taken: from 1, 4 indexes). A
    breakpoint given under such a test marks that many blocks, not one."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    op, bound = test.ops[0], None
    if isinstance(op, (ast.Lt, ast.LtE)):
        bound = test.comparators[0]
    elif isinstance(op, (ast.Gt, ast.GtE)):
        bound = test.left
    if not (isinstance(bound, ast.Constant) and type(bound.value) is int):
        return False
    inclusive = isinstance(op, (ast.LtE, ast.GtE))
    return bound.value + inclusive >= _MANY_BELOW


def index_guarded(value: ast.expr, compared: Collection[str]) -> bool:
    """True when a breakpoint value is given only under an index test, so a loop marks one
    element: ``{...} if is_last else None`` (or ``else False``, which sets none either), or a
    helper called with ``flag and is_last`` (or with ``is_last``) that gives a breakpoint only
    when its flag is true (issue shape 3)."""
    if isinstance(value, ast.IfExp):
        none_branch = any(
            isinstance(b, ast.Constant) and (b.value is None or b.value is False)
            for b in (value.body, value.orelse)
        )
        return none_branch and _is_index_test(value.test, compared)
    if isinstance(value, ast.Call):
        for arg in [*value.args, *(kw.value for kw in value.keywords)]:
            if _is_index_test(arg, compared):
                return True
            if (
                isinstance(arg, ast.BoolOp)
                and isinstance(arg.op, ast.And)
                and any(_is_index_test(v, compared) for v in arg.values)
            ):
                return True
    return False


def marks_in(
    body: list[ast.stmt],
    index_names: set[str],
    module: Module,
    cls: ast.ClassDef | None,
    depth: int = 1,
    guard: Callable[[ast.expr, set[str]], bool] | None = None,
    capped: Collection[int] = frozenset(),
    elements: Collection[str] = frozenset(),
    per_element: Collection[str] | None = None,
) -> Iterator[tuple[ast.AST, str]]:
    """Each breakpoint ``body`` adds when it runs once, as (node, how: "set here", or what
    the same-module helper called there does).

    Not counted: statements under an ``if`` on an index in ``index_names``, on ``len(...)`` or
    on ``-1`` (they mark one element); the body of ``if "cache_control" in b`` (re-marks a
    marked block; also one on the marker of a name in ``elements``, such as ``if
    item.get("cache_control"):`` for a loop's ``item``); the body (not the else branch) of an
    ``if`` whose test's ``id`` is in
    ``capped`` (a counter caps how often it runs); assignments that copy another block's
    breakpoint or give it ``None``; nested loops and functions (counted on their own).
    ``guard(test, index_names)`` decides the index tests. ``per_element``: as for
    ``is_copy``.
    """
    for stmt in body:
        if isinstance(stmt, ast.If):
            member = membership_guard(stmt.test, elements)
            if guard is not None and member is None and guard(stmt.test, index_names):
                continue
            # a capped test (``capped``) runs its body a bounded number of times: only its
            # else branch counts
            if member != "in" and not (member is None and id(stmt.test) in capped):
                yield from marks_in(
                    stmt.body, index_names, module, cls, depth, guard, capped, elements, per_element
                )
            if member != "not in":
                yield from marks_in(
                    stmt.orelse,
                    index_names,
                    module,
                    cls,
                    depth,
                    guard,
                    capped,
                    elements,
                    per_element,
                )
            continue
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, *_SCOPES)):
            continue
        for child_body in _blocks(stmt):
            yield from marks_in(
                child_body, index_names, module, cls, depth, guard, capped, elements, per_element
            )
        yield from _stmt_marks(stmt, module, cls, depth, per_element)


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        yield stmt.body
    elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        yield stmt.body  # type: ignore[attr-defined]
        for handler in stmt.handlers:  # type: ignore[attr-defined]
            yield handler.body
        yield stmt.orelse  # type: ignore[attr-defined]
        yield stmt.finalbody  # type: ignore[attr-defined]
    elif isinstance(stmt, ast.Match):
        for case in stmt.cases:
            yield case.body


def _stmt_marks(
    stmt: ast.stmt,
    module: Module,
    cls: ast.ClassDef | None,
    depth: int,
    per_element: Collection[str] | None = None,
) -> Iterator[tuple[ast.AST, str]]:
    """Breakpoints of one simple statement (its nested blocks are walked by ``marks_in``)."""
    if isinstance(stmt, (ast.With, ast.AsyncWith, ast.Try, ast.Match)) or (
        type(stmt).__name__ == "TryStar"
    ):
        return
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        copy = stmt.value is not None and sets_none(stmt.value, per_element)
        for target in targets:
            for node in ast.walk(target):
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.slice, ast.Constant)
                    and node.slice.value in KEYS
                    and not copy
                ):
                    yield node, "set here"
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and depth <= _DEPTH:
            helper = module.helper(node, cls, depth)
            if helper is None:
                continue
            name = ast.unparse(node.func)
            if helper.marked_arg(node) is not None:
                yield node, f"{name}() sets it"
            elif (
                (helper.returns_mark and not helper.copies(node))
                or helper.flag_set(node, module.compared)
            ) and not (isinstance(stmt, ast.Expr) and stmt.value is node):
                yield node, f"{name}() returns a marked block"  # that is stored
    yield from ((n, "set here") for n in expr_marks(stmt, module.compared, per_element))


def value_marks(
    value: ast.expr,
    module: Module,
    cls: ast.ClassDef | None,
    per_element: Collection[str] | None = None,
) -> Iterator[tuple[ast.AST, str]]:
    """Breakpoints of an expression whose value is kept (a comprehension's element)."""
    return _stmt_marks(ast.Return(value=value), module, cls, 1, per_element)
