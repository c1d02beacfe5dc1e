"""More than 4 cache breakpoints, or breakpoints added in an unbounded loop.

Severity: error
Fix: none

## What it does
Counts `cache_control` blocks (and Bedrock `cachePoint` blocks) in one request, the top-level
automatic `cache_control` included, and reports a fifth. Also reports a `for` loop or a
comprehension that adds a breakpoint per element: over a collection of unbounded length (all
messages, all tools), or over a constant slice or `range` of more than 4 elements
(`messages[-5:]` places 5). A breakpoint is added by a `["cache_control"] = ...` assignment, a
block dict or keyword with that key, or a call to a same-module function (or a `self.` method)
that sets one on its argument or returns a block that carries one (also one that marks the
block it returns under `if cache:`, when the call passes a literal `cache=True`), followed two
calls deep.

## Why is this bad?
Anthropic and Bedrock accept at most 4 breakpoints per request; a fifth is an HTTP 400 ("A
maximum of 4 blocks with cache_control may be provided. Found 5."). A loop that marks every
message works in a short test and fails once the conversation grows.

## Known problems
Sizes are known for literal and constant slices (`[-n:]`, `[:n]`, `[-5:-1]`, `[i:i + 4]`,
`[-8::2]`), `range(...)`, list and tuple literals, `+` of those, and a name bound once to one of
them. A slice bound is read from a literal or a simple constant name: a single assignment in
the function, a module constant (`Final` included), or a parameter taken at its default
(`limit=4` is bounded even if a caller passes 10); a name assigned twice is not constant. A
list bound once to `[]` (`chosen: list[int] = []` too) and filled by one `append` in a loop
that stops itself at a constant length holds at most that many (`if len(picked) >= 4: break`
after the append with no `continue` between, the same test before it, or `while len(picked) <
4:`), or in a `for` loop over something of known size (`for seg in ("static", "stable",
"dynamic"):` appends at most 3), unless the list is
handed to a call, returned, aliased or appended to elsewhere, or an outer loop enters the
filling loop again. A loop over a same-module function that returns one index or element (an
int, a subscript such as `messages[-1]["content"]`, a name bound only to ints) counts as one
element, so the blocks of that element are not counted.

Not counted as a breakpoint: copying another block's marker (`tool["cache_control"]`,
`.get("cache_control")`) or another object's (`item.cache_control`, `getattr(item,
"cache_control", None)`: what that object carries, one for one, such as the HTTP header of
stored file metadata; not an attribute of `self` or `cls`, the object's own setting given to
every block, nor one of an object bound once for all the elements rather than by the loop, the
comprehension or a helper's call, such as a settings parameter or a module's settings object,
`settings.cache_control`), `None` as the marker (`cache_control=None`, `"cache_control": None`:
no breakpoint is set) and anything under `if "cache_control" in block` (it mirrors a marker
already there), or, in a loop, under a test that the loop's element carries a marker (`for item
in message.content:` then `if item.get("cache_control"):`, also `item["cache_control"]`,
`item.cache_control` and `... is not None`): the block built for it copies the caller's marker,
one for one, as a message converter does. A test of anything else (`if
options.get("cache_control"):`, a setting) still counts a mark per element, and so does `if not
item.get("cache_control"):` (it marks each element that has none).

A copy reached through a name or a helper is a copy as well: a name every binding of which is
in the loop and is such a copy or `None` (`cc = msg.extra.get("cache_control")`, `if cc :=
part.get("cache_control"):`), and a same-module helper that returns the marker it is given
wrapped (`return {"cachePoint": point}`) called with such a copy
(`cache_point(msg.meta.get("cachePoint"))`). `False` is no marker either, as `None` is
(`message.cache(cache_control=False)` clears one).

Not reported: loops with a `break` or a `return` (write, then stop: one breakpoint), marks
only under a test on the index, on `len(...)` or on `-1` (a helper's
`cache=use_cache and i == len(parts) - 1` included, and a name the loop binds to such a test,
`is_last = i == len(messages) - 1`, or to an `and` holding one, `cache = use_cache and i ==
last`; also a block given a name that the loop resets to `None` for each element and binds to
the marker only under such a test, `cc = None` then `if i == last: cc = MARK`, or binds to
`MARK if i == last else None`, or gives the block `MARK if is_last else None` or
`... else False`; but not a test of a value below a constant that lets more than 4 indexes
through, counted from 0 or from 1: `MARK if i < 10 else None` or `if i <= 6:` marks the first
10 or 7 blocks, while `i < 3` marks at most 3), marks under a counter that caps them (`if
marked < 3:` whose branch marks and then runs `marked += 1`, or that is followed in its own
block by `marked += 1` with no `continue` that can skip it, as in `if count < 2:` marking, else
removing an old marker, then `count += 1` for each user message; the counter a local set once
before the loop to a constant and otherwise only increased; the limit a constant giving at most
4, or a name or field the analysis cannot know; or `if remaining:` / `if remaining > 0:` whose
branch runs `remaining -= 1`, counting down from a constant giving at most 4, by truthiness only
when the steps reach 0 exactly; the counter's test may be one operand of an `and`, as in `if
remaining and message["role"] == "user":`, and the step may sit beside the mark in an inner `if`
of the branch, as in `if used < 2:` then `if message["role"] == "user":` marking and counting;
the else branch is not capped; a loop whose body starts with `if count >= 3: continue` or `if
not remaining: continue` and then marks and counts as such a branch does is capped the same
way), a turn loop that calls the API (it marks only the newest message), comprehensions with an
`if` or with both bounded and unbounded generators, helpers three calls deep or in other
modules, and breakpoints from several loops or statements that only together exceed 4 (a capped
loop's marks and one made before it included).

A loop that marks an element only under a test that its role is `"system"` or `"developer"`
(`if msg.get("role") == "system":`, `msg["role"]`, `msg.role`, a name the loop binds once to
one of those; `== "system"` or `in ("system", "developer")`, alone or in an `and`, an `elif`
too, not the else branch) marks the system messages of the list, and a request holds one: its
marks are not counted, unless the module makes system messages that may pile up in a list. A
system message (a dict whose `"role"` is `"system"`, `Role.SYSTEM` or `SYSTEM_ROLE`, a call
given such a `role=`, a `...SystemMessage(...)`, and a dict whose role is a name, `{"role":
role}`, where the module passes `"system"` to a call or as a default) is held once at the head
of a list display that is returned, passed, or bound to a name or field not read in it
(`messages = [{"role": "system", ...}, *history, user]`, rebuilt each turn, or `[system] +
history`), when added outside any loop to a list the same function builds afresh, when made
under the marking test itself (a converter's copy), and when bound to a local name or a field,
or returned by a same-module function, every read or call of which holds it once. Placed
anywhere else (appended to a list the function did not build, `history + [note]`, `[*history,
note]`, `history = [system, *history]`, made in a comprehension or in a loop other than at the
head of a list display, handed to another call) it counts as many, and the loop is reported. A
history that another module fills with system messages is not seen. `role == "user"`, `!=
"system"`, an `or` with another test, a test through `continue` (`if role != "system":
continue`) and a marker on every element still count a mark per element.

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
from ._breakpoint_count import (
    KEYS,
    MAX_BREAKPOINTS,
    LazyScope,
    Module,
    Scope,
    bound_names,
    const_int,
    dict_mark,
    index_guarded,
    iter_size,
    marks_in,
    module_scope,
    own_nodes,
    picks_many,
    sets_none,
    value_marks,
)
from ._shared import BREAKPOINT_APIS

_LOOPS = (ast.For, ast.AsyncFor)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    # one finding per marked place: a comprehension inside a loop reports it as the innermost
    # loop that repeats it (loops come outermost first)
    by_place: dict[tuple[int, int], Diagnostic] = {}
    for diagnostic in _check(ctx):
        if diagnostic.message.startswith("one cache breakpoint per element"):
            by_place[(diagnostic.location.line, diagnostic.location.col)] = diagnostic
        else:
            yield diagnostic
    yield from by_place.values()


def _check(ctx: ModuleContext) -> Iterator[Diagnostic]:
    for sink in ctx.sinks:
        if sink.api not in BREAKPOINT_APIS:
            continue
        marks = [b.bp_node for b in sink.blocks if b.bp_node is not None]
        auto = sink.params.get("cache_control")
        if auto is not None and not (isinstance(auto[0], ast.Constant) and auto[0].value is None):
            marks.append(auto[0])  # ``cache_control=None`` sets none
        if len(marks) > MAX_BREAKPOINTS:
            yield ctx.diagnostic(
                "PC007",
                f"{len(marks)} cache breakpoints in one {sink.label} request; the API accepts "
                "at most 4 and answers HTTP 400",
                marks[MAX_BREAKPOINTS],
                Severity.ERROR,
            )
    if "cache_control" not in ctx.source and "cachePoint" not in ctx.source:
        return
    # the loops' findings depend only on the module's text and where its sinks are: a file
    # analysed again in the same process (a later fixpoint round) reuses them
    key = (ctx.path, ctx.source, tuple(sorted(_place(s.node) for s in ctx.sinks)))
    found = _LOOP_MEMO.pop(key, None)
    if found is None:
        found = list(_loop_findings(ctx))
    _LOOP_MEMO[key] = found
    while len(_LOOP_MEMO) > _LOOP_MEMO_SIZE:
        del _LOOP_MEMO[next(iter(_LOOP_MEMO))]
    yield from found


#: loop findings of the modules analysed last in this process (least recently used first)
_LOOP_MEMO: dict[tuple[str, str, tuple[tuple[int, int, int, int], ...]], list[Diagnostic]] = {}
_LOOP_MEMO_SIZE = 32


def _place(node: ast.AST) -> tuple[int, int, int, int]:
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        getattr(node, "end_lineno", None) or 0,
        getattr(node, "end_col_offset", None) or 0,
    )


def _loop_findings(ctx: ModuleContext) -> Iterator[Diagnostic]:
    """Breakpoints set once per element of a loop or comprehension of unbounded length."""
    module = Module(ctx.tree)
    sink_nodes = {id(s.node) for s in ctx.sinks}
    many_system: bool | None = None
    for node, chain, cls in _walk(ctx.tree, [module_scope(ctx.tree)], None):
        if isinstance(node, _COMPS):
            yield from _check_comprehension(ctx, node, chain, cls, module)
            continue
        size = iter_size(node.iter, chain, module, cls)
        if size is not None and size <= MAX_BREAKPOINTS:
            continue
        if size is None and not _whole_collection(node.iter, module, cls):
            continue  # the result of a call we cannot see: no evidence it is long
        if any(isinstance(n, (ast.Break, ast.Return)) for n in _own_nodes(node.body)):
            continue  # stops at the first marked block (write, then break or return)
        capped = _counter_caps(node, chain, module, cls)
        if _continue_capped(node, chain, module, cls):
            continue  # ``if count >= 3: continue`` before the marks: at most 3 per call
        index_names = _index_names(node)
        index_names |= _index_tests(node, index_names)
        elements = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        if many_system is None:
            many_system = _repeats_system_messages(ctx.tree)
        if not many_system:
            # ``if msg.get("role") == "system":`` marks the one system message a request holds
            capped |= _system_role_tests(node, elements)
        marks = marks_in(
            node.body,
            index_names,
            module,
            cls,
            guard=_guard,
            capped=capped,
            elements=elements,
            per_element=bound_names(node),
        )
        quiet = _quiet_names(node, index_names, capped, module.compared)
        copied = _copied_names(node, chain[0])
        found = next(
            (
                m
                for m in marks
                if not _quiet_mark(m[0], quiet | copied)
                and not _copied_store(m[0], node, copied)
                and not _one_object(m[0], node)
            ),
            None,
        )
        if found is None:
            continue
        if any(id(n) in sink_nodes for n in ast.walk(node)):
            continue  # a turn loop that calls the API: marks the newest message only
        mark, how = found
        yield ctx.diagnostic("PC007", _message(size, node.iter, how), mark, Severity.ERROR)


_WRAPPERS = frozenset({"enumerate", "reversed", "list", "sorted", "tuple", "zip", "iter"})


def _whole_collection(node: ast.expr, module: Module, cls: ast.ClassDef | None) -> bool:
    """Evidence that iterating ``node`` visits a whole collection of any length: a name or
    attribute (``messages``, ``self.tools``), an open slice, ``d.values()``, one of those
    wrapped in ``enumerate``/``reversed``/..., or a same-module helper's result. The result
    of a function the linter cannot see (another module, a library) is not evidence."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return True
    if isinstance(node, ast.NamedExpr):
        return _whole_collection(node.value, module, cls)
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id in _WRAPPERS and node.args:
        return _whole_collection(node.args[0], module, cls)
    if isinstance(func, ast.Attribute) and func.attr in ("values", "items", "keys"):
        return True
    return module.helper(node, cls) is not None


def _message(size: int | None, iterable: ast.expr | None, how: str) -> str:
    what = f"`{_short(iterable)}`" if iterable is not None else "this comprehension"
    if size is None:
        return (
            f"one cache breakpoint per element of {what} ({how}), whose length is not known "
            "statically; past 4 the API answers HTTP 400: mark only the last blocks (e.g. "
            "messages[-2:])"
        )
    return (
        f"{size} cache breakpoints, one per element of {what} ({how}); a request accepts at "
        "most 4 and answers HTTP 400 to a fifth"
    )


def _check_comprehension(
    ctx: ModuleContext,
    comp: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
    chain: list[Scope],
    cls: ast.ClassDef | None,
    module: Module,
) -> Iterator[Diagnostic]:
    if any(gen.ifs for gen in comp.generators):
        return
    sizes = [iter_size(gen.iter, chain, module, cls) for gen in comp.generators]
    known = [s for s in sizes if s is not None]
    if known and len(known) < len(sizes):
        return  # partly bounded: how many is not known statically
    total = 1
    for size in known:
        total *= size
    if known and total <= MAX_BREAKPOINTS:
        return
    if not known and not all(_whole_collection(g.iter, module, cls) for g in comp.generators):
        return
    elts = [comp.key, comp.value] if isinstance(comp, ast.DictComp) else [comp.elt]
    per_element = bound_names(comp)
    found = next((m for elt in elts for m in value_marks(elt, module, cls, per_element)), None)
    if found is None:
        return
    mark, how = found
    iterable = comp.generators[0].iter if len(comp.generators) == 1 else None
    yield ctx.diagnostic(
        "PC007", _message(total if known else None, iterable, how), mark, Severity.ERROR
    )


def _walk(
    node: ast.AST, chain: list[Scope], cls: ast.ClassDef | None
) -> Iterator[tuple[ast.For | ast.AsyncFor | ast.ListComp, list[Scope], ast.ClassDef | None]]:
    """Loops and comprehensions with the scopes visible there (innermost first) and the
    class whose methods ``self.name(...)`` calls."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, [LazyScope(child), *chain], cls)
            continue
        if isinstance(child, ast.ClassDef):
            yield from _walk(child, chain, child)
            continue
        if isinstance(child, (*_LOOPS, *_COMPS)):
            yield child, chain, cls  # type: ignore[misc]
        yield from _walk(child, chain, cls)


def _short(node: ast.expr) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


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


def _counter_caps(
    loop: ast.For | ast.AsyncFor, chain: list[Scope], module: Module, cls: ast.ClassDef | None
) -> set[int]:
    """The ``id`` of each ``if`` test in ``loop`` whose body (not its else branch) a counter
    caps at 4 breakpoints in all. A rising counter: ``if count < limit:`` whose body marks and
    then adds a positive constant to ``count`` (``count += 1``), or is followed in its own
    block by that step (``_step_after``); ``limit`` is a constant (a
    parameter at its default) or a value the analysis cannot know (no evidence that it passes
    4). A falling counter: ``if remaining:`` or ``if remaining > limit:`` whose body takes a
    positive constant from it (``remaining -= 1``); ``limit`` is a constant, and a counter
    tested by truthiness must reach 0 exactly (each start a multiple of the step: 3 less 2 at a
    time gives -1, still true). The counter is a local of the enclosing function bound only
    outside the loop to a constant int >= 0 and otherwise only moved the same way by constants.
    The body then runs at most ``limit - start`` (``start - limit``) times per call. Marks made
    elsewhere in the function are not added (several statements that only together pass 4 are
    not reported)."""
    func = chain[0].func if chain and isinstance(chain[0], LazyScope) else None
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    in_loop = {id(n) for n in ast.walk(loop)}
    caps: set[int] = set()
    for block in _stmt_lists(loop):
        for index, stmt in enumerate(block):
            if not isinstance(stmt, ast.If):
                continue
            for counter, rising, bound, inclusive in _counter_tests(stmt.test):
                body = stmt.body
                after = _step_after(stmt, block[index + 1 :], counter, rising)
                if after is not None:  # ``if count < 2: mark`` then ``count += 1`` below it
                    body = [*body, after]
                if _caps(
                    counter, rising, bound, inclusive, body, func, in_loop, chain, module, cls
                ):
                    caps.add(id(stmt.test))
    return caps


def _stmt_lists(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of statements inside ``node`` (its body, else branches, handlers, cases),
    not descending into nested functions or classes."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
            for stmt in block:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    yield from _stmt_lists(stmt)
    for handler in getattr(node, "handlers", None) or []:
        yield from _stmt_lists(handler)
    for case in getattr(node, "cases", None) or []:
        yield from _stmt_lists(case)


def _step_after(
    test_if: ast.If, following: list[ast.stmt], counter: str, rising: bool
) -> ast.stmt | None:
    """The step of ``counter`` that runs after every pass through ``test_if``: the first
    statement of ``following`` (the statements after the ``if`` in its own block) that moves
    the counter as ``_step`` reads it (``count += 1`` for a rising counter), when no
    ``continue`` of the enclosing loop in the ``if`` or in the statements before the step can
    skip it. A ``break`` or ``return`` leaves the loop and only lowers the count. None
    otherwise."""
    move = ast.Add if rising else ast.Sub
    skipped: list[ast.stmt] = [test_if]
    for stmt in following:
        if _step(stmt, counter, move) is not None:
            if any(_continues(s) for s in skipped):
                return None
            return stmt
        skipped.append(stmt)
    return None


def _continues(node: ast.AST) -> bool:
    """True when ``node`` holds a ``continue`` of the loop around it (not of a loop nested in
    it, nor in a nested function)."""
    if isinstance(node, ast.Continue):
        return True
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return any(_continues(s) for s in node.orelse)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return False
    return any(_continues(child) for child in ast.iter_child_nodes(node))


def _caps(
    counter: str,
    rising: bool,
    bound: ast.expr | None,
    inclusive: bool,
    body: list[ast.stmt],
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    in_loop: set[int],
    chain: list[Scope],
    module: Module,
    cls: ast.ClassDef | None,
) -> bool:
    """True when ``body``, run only while the counter test (``_counter_tests``) holds, sets at
    most 4 breakpoints per call: each of its marks is stepped (``_stepped``) and the counter's
    starts and limit allow few enough runs (see ``_counter_caps``)."""
    move = ast.Add if rising else ast.Sub
    step = _stepped(body, counter, move, module, cls)
    if step is None or step < 1:
        return False
    starts = _counter_starts(func, counter, in_loop, move)
    if not starts:
        return False
    if bound is None:  # ``if remaining:`` stops only at 0 exactly
        if any(start % step for start in starts):
            return False
        runs = max(starts) // step
    else:
        limit = const_int(bound, chain)
        if limit is None:
            return rising and _named_limit(bound, counter)
        if inclusive:  # count <= limit: count < limit + 1; the same falling
            limit += 1 if rising else -1
        span = limit - min(starts) if rising else max(starts) - limit
        runs = max(0, -(-span // step))
    marks = sum(1 for _ in marks_in(body, set(), module, cls))
    return runs * marks <= MAX_BREAKPOINTS


def _stepped(
    body: list[ast.stmt],
    counter: str,
    move: type[ast.Add] | type[ast.Sub],
    module: Module,
    cls: ast.ClassDef | None,
) -> int | None:
    """The step by which ``body`` moves ``counter`` each time it marks: a step among its own
    statements (``marked += 1``) covers every mark in it, nested ones included; without one,
    each ``if`` branch in it that marks must have its own (``if used < 2:`` whose inner ``if
    message["role"] == "user":`` marks and counts), and no other statement of it may mark.
    None when a mark is not stepped (or nothing marks)."""
    direct = next((n for n in (_step(s, counter, move) for s in body) if n is not None), None)
    if direct is not None:
        return direct
    steps: list[int] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            for branch in (stmt.body, stmt.orelse):
                if next(marks_in(branch, set(), module, cls), None) is None:
                    continue
                step = _stepped(branch, counter, move, module, cls)
                if step is None:
                    return None
                steps.append(step)
        elif next(marks_in([stmt], set(), module, cls), None) is not None:
            return None
    return min(steps) if steps else None


def _continue_capped(
    loop: ast.For | ast.AsyncFor, chain: list[Scope], module: Module, cls: ast.ClassDef | None
) -> bool:
    """True for a loop whose body starts by skipping the rest once a counter is spent (``if
    count >= 3: continue``, ``if not remaining: continue``) and then marks and steps it as
    ``_counter_caps`` asks of a capping ``if`` (``count += 1`` beside each mark): the rest of
    the body marks at most 4 blocks per call. Nothing before the guard may mark."""
    func = chain[0].func if chain and isinstance(chain[0], LazyScope) else None
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    in_loop = {id(n) for n in ast.walk(loop)}
    for index, stmt in enumerate(loop.body):
        if next(marks_in([stmt], set(), module, cls), None) is not None:
            return False  # a mark before any guard
        if not (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Continue)
        ):
            continue
        rest = loop.body[index + 1 :]
        for counter, rising, bound, inclusive in _spent_tests(stmt.test):
            if _caps(counter, rising, bound, inclusive, rest, func, in_loop, chain, module, cls):
                return True
    return False


def _spent_tests(test: ast.expr) -> Iterator[tuple[str, bool, ast.expr | None, bool]]:
    """The counter tests (as ``_counter_tests`` gives them) whose negation ``test`` is: a
    rising ``count >= limit`` (``count > limit``) is spent where ``count < limit`` (``<=``)
    fails; ``not remaining``, ``remaining == 0`` and ``remaining <= 0`` where a falling
    ``remaining`` (tested by truthiness) is 0."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.Name):
            yield test.operand.id, False, None, False
        return
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Lt, ast.LtE)):  # limit < count: count > limit
        left, right = right, left
        op = ast.Gt() if isinstance(op, ast.Lt) else ast.GtE()
    if isinstance(op, (ast.GtE, ast.Gt)) and isinstance(left, ast.Name):
        yield left.id, True, right, isinstance(op, ast.Gt)
    if (
        isinstance(op, (ast.Eq, ast.LtE))
        and isinstance(left, ast.Name)
        and isinstance(right, ast.Constant)
        and right.value == 0
    ):
        yield left.id, False, None, False


def _index_tests(loop: ast.For | ast.AsyncFor, index_names: set[str]) -> set[str]:
    """Names the loop binds to a test of its index (``is_last = i == len(messages) - 1``):
    an ``if is_last:`` marks one element, as ``if i == len(messages) - 1:`` does. Only a
    comparison that ``_guard`` takes for an index test, alone or as one operand of an ``and``
    (``should_cache = add_cache and i == last``: true only where the index test is); each name
    bound once in the loop."""
    found: set[str] = set()
    bound: dict[str, int] = {}
    for node in _own_nodes(loop.body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound[node.id] = bound.get(node.id, 0) + 1
    for node in _own_nodes(loop.body):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _index_compare(node.value, index_names)
        ):
            found.add(node.targets[0].id)
    return {n for n in found if bound.get(n) == 1}


def _index_compare(value: ast.expr, index_names: set[str]) -> bool:
    """True for an index test ``_guard`` takes (``i == last``), or an ``and`` with one such
    comparison among its operands (an ``or`` may hold where the index test fails)."""
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
        return any(_index_compare(operand, index_names) for operand in value.values)
    return isinstance(value, ast.Compare) and _guard(value, index_names)


def _counter_tests(test: ast.expr) -> Iterator[tuple[str, bool, ast.expr | None, bool]]:
    """The counters an ``if`` test may cap by: (counter, rising, limit, inclusive) for
    ``count < limit`` / ``count <= limit`` (rising, either side written first),
    ``remaining > limit`` / ``remaining >= limit`` (falling) and ``remaining`` alone (falling,
    limit None: tested by truthiness), alone or as one operand of an ``and`` (``if remaining
    and message["role"] == "user":``: the branch still runs only while the counter allows).
    The branch's own step decides which applies."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for operand in test.values:
            yield from _counter_tests(operand)
        return
    if isinstance(test, ast.Name):
        yield test.id, False, None, False
        return
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return
    op, low, high = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):  # high > low: low < high
        low, high = high, low
        op = ast.Lt() if isinstance(op, ast.Gt) else ast.LtE()
    if not isinstance(op, (ast.Lt, ast.LtE)):
        return
    inclusive = isinstance(op, ast.LtE)
    if isinstance(low, ast.Name):
        yield low.id, True, high, inclusive
    if isinstance(high, ast.Name):
        yield high.id, False, low, inclusive


def _step(stmt: ast.stmt, counter: str, move: type[ast.Add] | type[ast.Sub]) -> int | None:
    """The constant ``stmt`` moves ``counter`` by in the direction ``move``: ``counter += k``
    or ``counter = counter + k`` (``k + counter`` too) for ``ast.Add``, ``counter -= k`` or
    ``counter = counter - k`` for ``ast.Sub``; None for any other statement."""
    if isinstance(stmt, ast.AugAssign):
        if isinstance(stmt.op, move) and isinstance(stmt.target, ast.Name):
            return const_int(stmt.value, []) if stmt.target.id == counter else None
        return None
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id == counter
        and isinstance(stmt.value, ast.BinOp)
        and isinstance(stmt.value.op, move)
    ):
        return None
    left, right = stmt.value.left, stmt.value.right
    if isinstance(left, ast.Name) and left.id == counter:
        return const_int(right, [])
    if move is ast.Add and isinstance(right, ast.Name) and right.id == counter:
        return const_int(left, [])
    return None


def _named_limit(node: ast.expr, counter: str) -> bool:
    """True for a limit the analysis cannot know that is a name or a field of one
    (``max_marks``, ``self.max_breakpoints``), not the counter itself; a call or an expression
    (``len(messages)``) may grow with the loop."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id != counter


def _counter_starts(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    counter: str,
    in_loop: set[int],
    move: type[ast.Add] | type[ast.Sub],
) -> list[int] | None:
    """The values ``counter`` starts from when every binding of it in ``func`` is
    ``counter = <int >= 0>`` outside the loop or a step ``counter += <int >= 1>`` (``-=`` for a
    falling counter, ``move`` ``ast.Sub``; also written ``counter = counter - 1``); None
    otherwise (a parameter, a reset inside the loop, ``global``/``nonlocal``, any other
    store)."""
    args = func.args
    if counter in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
        return None
    if any(
        isinstance(n, (ast.Global, ast.Nonlocal)) and counter in n.names for n in ast.walk(func)
    ):
        return None
    starts: list[int] = []
    known: set[int] = set()  # the Name targets of those bindings
    for node in own_nodes(func.body):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
            step = _step(node, counter, move)
            if step is not None:  # ``counter = counter - 1``: a step, not a start
                if step < 1:
                    return None
                known.add(id(node.targets[0]))
                continue
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == counter for t in node.targets
        ):
            value = const_int(node.value, [])
            if len(node.targets) != 1 or id(node) in in_loop or value is None or value < 0:
                return None
            starts.append(value)
            known.add(id(node.targets[0]))
        elif (
            isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == counter
        ):
            value = const_int(node.value, [])
            if not isinstance(node.op, move) or value is None or value < 1:
                return None
            known.add(id(node.target))
    for node in own_nodes(func.body):
        if (
            isinstance(node, ast.Name)
            and node.id == counter
            and not isinstance(node.ctx, ast.Load)
            and id(node) not in known
        ):
            return None  # a loop target, a tuple unpacking, ``del``, a walrus
    return starts or None


def _one_object(mark: ast.AST, loop: ast.For | ast.AsyncFor | ast.While) -> bool:
    """True for a mark ``block["cache_control"] = cc`` whose ``block`` names one object for
    the whole loop: the loop neither binds the name nor reads it other than to store into
    one of its keys (``for data in message.data: if ...: item["cache_control"] = ...`` on an
    ``item`` made before the loop). Each pass sets the same key of the same dict again, so
    the loop leaves one breakpoint there, however long it runs."""
    if not (
        isinstance(mark, ast.Subscript)
        and isinstance(mark.ctx, ast.Store)
        and isinstance(mark.value, ast.Name)
    ):
        return False
    name = mark.value.id
    stored_into = {
        id(n.value)
        for n in ast.walk(loop)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
    }
    return all(
        id(n) in stored_into for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id == name
    )


def _quiet_mark(mark: ast.AST, quiet: set[str]) -> bool:
    """True for a ``"cache_control": cc`` key or ``cache_control=cc`` keyword whose value is
    a name in ``quiet`` (see ``_quiet_names``)."""
    value: ast.expr | None = None
    if isinstance(mark, ast.Dict):
        key = dict_mark(mark)
        value = mark.values[mark.keys.index(key)] if key is not None else None
    elif isinstance(mark, ast.keyword) and mark.arg in KEYS:
        value = mark.value
    return isinstance(value, ast.Name) and value.id in quiet


def _copied_names(loop: ast.For | ast.AsyncFor, scope: Scope) -> set[str]:
    """The names that hold only a copy of a marker or ``None``: every binding of the name in
    its function is in ``loop``, a plain ``cc = item.get("cache_control")``, ``cc =
    msg.extra["cache_control"]``, ``cc = None`` or ``if cc := ...:`` of such a value
    (``sets_none``), and the name is no parameter. A block given such a name carries the
    marker the element already had, one for one, as a block given the copy itself does."""
    values: dict[str, list[bool]] = {}
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(sets_none(node.value))
        elif isinstance(node, ast.NamedExpr):
            values.setdefault(node.target.id, []).append(sets_none(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            copy = node.value is not None and sets_none(node.value)
            values.setdefault(node.target.id, []).append(copy)
    return {
        name
        for name, copies in values.items()
        if all(copies)
        and name not in scope.params
        and len(scope.names.get(name, [])) == len(copies)
        and len(copies) == _stores(loop, name)
    }


def _stores(loop: ast.For | ast.AsyncFor, name: str) -> int:
    return sum(
        1
        for n in ast.walk(loop)
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
    )


def _copied_store(mark: ast.AST, loop: ast.For | ast.AsyncFor, copied: set[str]) -> bool:
    """True for a mark ``block["cache_control"] = cc`` whose ``cc`` is in ``copied``."""
    if not copied or not isinstance(mark, ast.Subscript):
        return False
    return any(
        isinstance(n, ast.Assign)
        and any(t is mark for t in n.targets)
        and isinstance(n.value, ast.Name)
        and n.value.id in copied
        for n in ast.walk(loop)
    )


def _quiet_names(
    loop: ast.For | ast.AsyncFor, index_names: set[str], capped: set[int], compared: set[str]
) -> set[str]:
    """The names a loop binds to a breakpoint only for the elements an index test or a counter
    picks, and to ``None`` for the others: every binding of the name in the loop is ``None``,
    a marker given only under an index test (``cc = MARK if i == last else None``), or one
    made in the body of an ``if`` on the index (``if i == last: cc = MARK``, as ``_guard``
    decides) or of an ``if`` a counter caps, after an unconditional ``cc = None`` at the top
    of the loop body that resets it for each element. A block given such a name
    (``{"cache_control": cc}``) is marked as often as the guarded binding runs, not once
    per element. A name also bound anywhere else in the loop (a nested loop, an unpacking,
    a marker given unconditionally) is not quiet."""
    reset: set[str] = set()
    conditional: set[str] = set()
    chosen: set[str] = set()  # bound to a marker-or-None under an index test
    bad: set[str] = set()
    accounted: set[int] = set()

    def visit(body: list[ast.stmt], guarded: bool, top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.If):
                inner = guarded or _guard(stmt.test, index_names) or id(stmt.test) in capped
                visit(stmt.body, inner, False)
                visit(stmt.orelse, guarded, False)
                continue
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                visit(stmt.body, guarded, False)
                continue
            if not (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                continue
            target = stmt.targets[0]
            if sets_none(stmt.value):
                if top:
                    reset.add(target.id)
                accounted.add(id(target))
            elif index_guarded(stmt.value, compared):
                chosen.add(target.id)
                accounted.add(id(target))
            elif guarded:
                conditional.add(target.id)
                accounted.add(id(target))

    visit(loop.body, False, True)
    for node in ast.walk(loop):
        stored = isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
        if stored and id(node) not in accounted:
            bad.add(node.id)  # type: ignore[attr-defined]
    return {n for n in chosen | (conditional & reset) if n not in bad}


def _guard(test: ast.expr, index_names: set[str]) -> bool:
    if picks_many(test):
        return False  # ``if i < 10:`` marks the first 10 elements, not one
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_guard(operand, index_names) for operand in test.values)
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and (node.id in index_names or node.id == "len"):
            return True
        if _const_int(node) == -1 if isinstance(node, ast.expr) else False:
            return True
    return False


#: the roles a request holds one message of (the system prompt)
_ONCE_ROLES = frozenset({"system", "developer"})
_ADDS = frozenset({"append", "appendleft", "insert", "extend"})


def _system_role_tests(loop: ast.For | ast.AsyncFor, elements: set[str]) -> set[int]:
    """The ``if`` tests (by ``id``) of ``loop`` that let through only an element whose role is
    ``"system"`` or ``"developer"``: ``msg.get("role") == "system"`` (``msg["role"]``,
    ``msg.role``, a name bound once in the loop, and nowhere else in it, to one of those),
    ``in`` a literal of such roles only, alone or as one operand of an ``and``."""
    stores: dict[str, int] = {}
    for n in ast.walk(loop):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
    roles = {
        n.targets[0].id
        for n in _own_nodes(loop.body)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and stores.get(n.targets[0].id) == 1
        and _role_read(n.value, elements, set())
    }
    return {
        id(n.test)
        for n in _own_nodes(loop.body)
        if isinstance(n, ast.If) and _once_role_test(n.test, elements, roles)
    }


def _once_role_test(test: ast.expr, elements: set[str], roles: set[str]) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_once_role_test(v, elements, roles) for v in test.values)
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, ast.Eq):
        if _role_read(right, elements, roles):
            left, right = right, left
        return _role_read(left, elements, roles) and _once_role(right)
    if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        return (
            _role_read(left, elements, roles)
            and bool(right.elts)
            and all(_once_role(e) for e in right.elts)
        )
    return False


def _once_role(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in _ONCE_ROLES


def _role_read(node: ast.expr, elements: set[str], roles: set[str]) -> bool:
    """``msg.get("role")`` (no default, or one that is no system role), ``msg["role"]`` or
    ``msg.role`` of an element name, or a name in ``roles``."""
    if isinstance(node, ast.Name):
        return node.id in roles
    if isinstance(node, ast.Attribute):
        return (
            node.attr == "role" and isinstance(node.value, ast.Name) and node.value.id in elements
        )
    if isinstance(node, ast.Subscript):
        key = node.slice
        return (
            isinstance(node.value, ast.Name)
            and node.value.id in elements
            and isinstance(key, ast.Constant)
            and key.value == "role"
        )
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in elements
        and 1 <= len(node.args) <= 2
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "role"
        and not (len(node.args) == 2 and _once_role(node.args[1]))
    )


#: string methods whose argument is text to look for, not a role given to a message
_LOOKUPS = frozenset({"get", "startswith", "endswith", "find", "index", "count"})
#: how many names, fields or helper returns a system message is followed through
_HOLD_DEPTH = 3


def _system_role_value(node: ast.expr | None, variable: bool) -> bool:
    """``"system"``/``"developer"``, a name or field that spells one (``Role.SYSTEM``,
    ``SYSTEM_ROLE``), or, where ``variable``, any plain name (``{"role": role}``)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return node.value in _ONCE_ROLES
    spelled = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    if isinstance(spelled, str) and any(role in spelled.lower() for role in _ONCE_ROLES):
        return True
    return variable and isinstance(node, ast.Name)


def _system_message(node: ast.AST, variable: bool) -> bool:
    """A message that is or may be a system message: a dict display whose ``"role"`` is a
    system role (``_system_role_value``), a call given such a ``role=``, or a call of a class
    named ``...SystemMessage`` / ``...DeveloperMessage``."""
    if isinstance(node, ast.Dict):
        return any(
            isinstance(k, ast.Constant) and k.value == "role" and _system_role_value(v, variable)
            for k, v in zip(node.keys, node.values, strict=True)
        )
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if isinstance(called, str) and called.endswith(("SystemMessage", "DeveloperMessage")):
        return True
    return any(k.arg == "role" and _system_role_value(k.value, variable) for k in node.keywords)


def _names_system_role(tree: ast.Module) -> bool:
    """True where the module hands a system role to code as a value: ``"system"`` as a call's
    argument (``self.add("system", text)``, not ``s.startswith("system")``) or as a
    parameter's default. A message built with a role from a name (``{"role": role}``) may
    then be a system message."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _LOOKUPS:
                continue
            values = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.arguments):
            values = [*node.defaults, *(d for d in node.kw_defaults if d is not None)]
        else:
            continue
        if any(_once_role(v) for v in values):
            return True
    return False


class _Holds:
    """Where the system messages of one module are placed (see ``_repeats_system_messages``)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[int, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent

    def once(self, value: ast.AST, depth: int = 0) -> bool:
        """True when the message ``value`` makes (or reads) is held once: at the head of a
        list display bound (to no name or field read in it), returned or passed
        (``[{"role": "system", ...}, *history, user]``, also as the left operand of ``+``),
        added outside any loop to a list the same function builds afresh, or bound to a
        local name or a field, or returned by a same-module function, every read or call of
        which holds it once; also one made under a loop's test that its element is a system
        message (the loop copies the system messages it is given)."""
        if depth > _HOLD_DEPTH:
            return False
        child, up = value, self.parents.get(id(value))
        while isinstance(up, ast.IfExp) and child is not up.test:
            child, up = up, self.parents.get(id(up))
        placed, holder = child, up
        func, looped = self._context(value)
        if looped is None:
            return True  # a converter's copy of a system message it was given
        if isinstance(holder, ast.List):
            return self._head_of_list(placed, holder, func, looped, depth)
        if isinstance(holder, ast.Call) and placed is not holder.func:
            return self._added(holder, func, looped)
        if isinstance(holder, ast.Assign) and holder.value is placed and len(holder.targets) == 1:
            return self._bound(holder.targets[0], func, depth)
        if isinstance(holder, ast.AnnAssign) and holder.value is placed:
            return self._bound(holder.target, func, depth)
        if isinstance(holder, ast.Return) and isinstance(
            func, (ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            return self._returned(func, depth)
        return False

    def _context(self, value: ast.AST) -> tuple[ast.AST | None, bool | None]:
        """The function ``value`` is in and whether a loop (or comprehension) of that
        function repeats it; None for the second where a loop's system-role test guards it."""
        looped = False
        guards: set[int] = set()  # the ``if`` tests it is made under (in their body)
        child, up = value, self.parents.get(id(value))
        while up is not None:
            if isinstance(up, ast.If) and any(child is stmt for stmt in up.body):
                guards.add(id(up.test))
            if isinstance(up, (ast.For, ast.AsyncFor)):
                elements = {n.id for n in ast.walk(up.target) if isinstance(n, ast.Name)}
                if _system_role_tests(up, elements) & guards:
                    return None, None
            if isinstance(up, (ast.For, ast.AsyncFor, ast.While)) and child is not getattr(
                up, "iter", None
            ):
                looped = True
            if isinstance(up, _COMPS):
                looped = True
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return up, looped
            child, up = up, self.parents.get(id(up))
        return None, looped

    def _head_of_list(
        self, placed: ast.AST, display: ast.List, func: ast.AST | None, looped: bool, depth: int
    ) -> bool:
        if not display.elts or display.elts[0] is not placed:
            return False  # after other messages: a note added to a conversation
        whole: ast.AST = display
        up = self.parents.get(id(whole))
        while isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add) and up.left is whole:
            whole, up = up, self.parents.get(id(up))
        read = {ast.dump(n) for n in ast.walk(whole) if isinstance(n, (ast.Name, ast.Attribute))}
        if isinstance(up, (ast.Assign, ast.AnnAssign)) and up.value is whole:
            targets = up.targets if isinstance(up, ast.Assign) else [up.target]
            return all(
                isinstance(t, (ast.Name, ast.Attribute))
                and ast.dump(_loaded(t)) not in read  # ``history = [system, *history]``
                for t in targets
            )
        if isinstance(up, (ast.Return, ast.keyword)):
            return True
        if isinstance(up, ast.Call) and whole is not up.func:
            if isinstance(up.func, ast.Attribute) and up.func.attr in _ADDS:
                return self._added(up, func, looped)  # ``history.extend([system])``
            return True
        if isinstance(up, ast.AugAssign) and up.value is whole:
            return self._added(up, func, looped)  # ``history += [system]``
        return False

    def _added(self, call: ast.AST, func: ast.AST | None, looped: bool) -> bool:
        """The message is handed to ``call``: held once only where that adds it, outside any
        loop, to a list the same function builds afresh (``_fresh_target``)."""
        if isinstance(call, ast.AugAssign):
            return not looped and _fresh_target(call, func)
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in _ADDS
        ):
            return False  # passed to a call that may keep it (``self.add(message)``)
        return not looped and _fresh_target(call, func)

    def _bound(self, target: ast.expr, func: ast.AST | None, depth: int) -> bool:
        """``name = message`` (a local or module name) or ``self.field = message``: every read
        of that name in its function (the module for a module name) or of that field in the
        module holds it once."""
        reads: list[ast.expr]
        if isinstance(target, ast.Name):
            scope: ast.AST = func if func is not None else self.tree
            if isinstance(scope, ast.Lambda):
                return False
            reads = [
                n
                for n in ast.walk(scope)
                if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
            ]
        elif isinstance(target, ast.Attribute):
            key = ast.dump(_loaded(target))
            reads = [
                n
                for n in ast.walk(self.tree)
                if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Load)
                and ast.dump(n) == key
            ]
        else:
            return False
        return all(self.once(read, depth + 1) for read in reads)

    def _returned(self, func: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> bool:
        """A function that returns the message: every call of it in the module (by its name,
        or as a method) holds what it returns once."""
        calls = [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, ast.Call)
            and (
                (isinstance(n.func, ast.Name) and n.func.id == func.name)
                or (isinstance(n.func, ast.Attribute) and n.func.attr == func.name)
            )
        ]
        return all(self.once(call, depth + 1) for call in calls)


def _loaded(node: ast.expr) -> ast.expr:
    """``node`` as it reads when loaded (a store target's ``ctx`` changed to ``Load``)."""
    if isinstance(node, ast.Name):
        return ast.Name(id=node.id, ctx=ast.Load())
    if isinstance(node, ast.Attribute):
        return ast.Attribute(value=node.value, attr=node.attr, ctx=ast.Load())
    return node


def _repeats_system_messages(tree: ast.Module) -> bool:
    """True where the module makes system messages that may pile up in one list: a system
    message (``_system_message``; one built with a role from a name too, where the module
    hands ``"system"`` to code as a value) that ``_Holds.once`` does not place once, such as
    one appended to a list the function did not build, made in a loop or a comprehension
    other than at the head of a list display, or placed after other messages."""
    variable = _names_system_role(tree)
    holds = _Holds(tree)
    return any(_system_message(n, variable) and not holds.once(n) for n in ast.walk(tree))


def _fresh_target(added: ast.AST, func: ast.AST | None) -> bool:
    """True when ``added`` (``msgs.append(...)`` or ``msgs += ...``) adds to a local name of
    ``func`` every binding of which is a list display (a list the call builds afresh)."""
    if isinstance(added, ast.AugAssign):
        target: ast.AST = added.target
    else:
        target = added.func.value  # type: ignore[attr-defined]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(
        target, ast.Name
    ):
        return False
    name = target.id
    if any(
        isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in ast.walk(func)
    ) or name in {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}:
        return False
    stores = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == name
    ]
    if isinstance(added, ast.AugAssign):
        stores = [n for n in stores if n is not added.target]
    binds = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id == name
        and isinstance(n.value, ast.List)
    ]
    return bool(binds) and len(binds) == len(stores)
