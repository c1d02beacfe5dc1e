"""Values made once per session and kept for its requests.

An error needs a value that changes between the requests of one session. Two shapes make a
value once per session (a conversation, a thread, an agent) and reuse it, so they are pinned
(``Fact.pinned``) like a value computed in ``__init__``:

- **a field set by another entry point.** A method stores a value into a field of ``self``
  (``start()`` sets ``self.thread_id = str(uuid4())`` when a thread starts) and another method
  reads it for every request (``ask()`` formats ``self.thread_id`` into the system message).
  When neither method calls the other (through calls on ``self``, at any depth), nothing shows
  the store running per request: the value read there is the session's. When the method that
  stores it calls the method that reads it (``on_message()`` sets ``self.now`` then calls
  ``self.reply()``), or the reading method calls the storing one, it changes per request;
  so does a store made by a caller before each call (``bot.start(); bot.ask(q)``), which the
  caller's own analysis follows through the reading method's summary.
- **an id made by a factory.** An id (``uuid4()``, ``secrets.token_hex()``: ``Kind.UNIQUE``)
  is passed to a configuration sink (a ``system_prompt=`` keyword of a call that is not a
  vendor request, a ``"system_prompt"`` key, ``Agent(system_prompt=, instructions=)``) inside a
  function that returns the object built there or stores it into an attribute: an id minted
  while an agent is built names that agent (its working folder, its thread), and the agent
  with its prompt serves every request it is given. Where the function uses the object itself
  (``create_agent(system_prompt=...).run(q)``), the id is the request's; where it builds the
  object before a loop whose passes send with it (``agents = build(values)``, then
  ``agents[name].run(prompt)`` every round), the id (a ``random.randint()`` drawn once per
  game) is the object's again, unless it is drawn and the object built inside the loop. A
  time in a factory's prompt stays per request: a "now" is put there to be current, and
  agents whose prompt tells the time are built per request (the nexent case of
  ``tests/lint/real_cases.toml``).
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Iterator

from .facts import PINNABLE, Fact, Kind, Value, map_facts
from .frames import ClassInfo
from .sinks import is_system_prompt_name

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _methods(info: ClassInfo) -> Iterator[FunctionNode]:
    for cls in info.lineage():
        yield from cls.methods.values()


def _self_calls(method: FunctionNode) -> set[str]:
    """The names of the methods ``method`` calls on its own object (``self.name(...)``),
    found once per tree (kept on the node: trees are kept for later analyses of the file;
    callers must not change the set)."""
    known: set[str] | None = method.__dict__.get("_self_calls")
    if known is None:
        known = method.__dict__["_self_calls"] = _find_self_calls(method)
    return known


def _find_self_calls(method: FunctionNode) -> set[str]:
    args = [*method.args.posonlyargs, *method.args.args]
    if not args:
        return set()
    self_name = args[0].arg
    return {
        node.func.attr
        for node in ast.walk(method)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == self_name
    }


def reach(info: ClassInfo, method: FunctionNode) -> frozenset[FunctionNode]:
    """The methods ``method`` runs through calls on ``self``, itself included (cached on
    ``info``)."""
    done = info.reach.get(method)
    if done is not None:
        return done
    out: set[FunctionNode] = set()
    todo = [method]
    while todo:
        current = todo.pop()
        if current in out:
            continue
        out.add(current)
        calls = info.self_calls.get(current)
        if calls is None:
            calls = info.self_calls[current] = _self_calls(current)
        for name in calls:
            callee = info.find_method(name)
            if callee is not None:
                todo.append(callee)
    result = frozenset(out)
    info.reach[method] = result
    return result


def _method_at(info: ClassInfo, line: int) -> FunctionNode | None:
    """The first method of ``info`` (its own, then its bases') whose lines hold ``line``
    (cached on ``info``: a class's methods are fixed once the module is collected)."""
    if line in info.lines:
        return info.lines[line]
    found = None
    for method in _methods(info):
        if method.lineno <= line <= (method.end_lineno or method.lineno):
            found = method
            break
    info.lines[line] = found
    return found


def storing_methods(info: ClassInfo, fact: Fact) -> set[FunctionNode]:
    """The methods of ``info`` where ``fact`` was born or passed on (each step of its chain
    in this file), so one of them stored it into the field."""
    lines = [line for _, line, _, path in fact.via if not path]
    if not fact.path:
        lines.append(fact.line)
    found = {_method_at(info, line) for line in lines}
    return {m for m in found if m is not None}


#: per class of an analysis: (method, fact) -> whether a field read there holds ``fact`` as
#: the session's (``kept_from_session``); the answer depends only on the class's methods and
#: the fact's places, and the same facts are read again and again (kept while ``info`` lives)
_SESSION_FACTS: weakref.WeakKeyDictionary[ClassInfo, dict[tuple[FunctionNode, Fact], bool]] = (
    weakref.WeakKeyDictionary()
)


def kept_from_session(value: Value, info: ClassInfo, method: FunctionNode) -> Value:
    """``value``, read from a field of ``self`` in ``method``, with the per-request facts that
    only a method unconnected to ``method`` stored there pinned (see the module docstring)."""
    if not value.facts and value.elts is None and value.items is None:
        return value
    here = reach(info, method)
    known = _SESSION_FACTS.setdefault(info, {})

    def session(fact: Fact) -> bool:
        if fact.pinned or fact.kind not in PINNABLE:
            return False
        key = (method, fact)
        found = known.get(key)
        if found is None:
            stores = storing_methods(info, fact)
            found = known[key] = bool(stores) and not any(
                m in here or method in reach(info, m) for m in stores
            )
        return found

    def change(facts: frozenset[Fact]) -> frozenset[Fact]:
        kept = {f for f in facts if session(f)}
        if not kept:
            return facts
        return frozenset(f.pin() if f in kept else f for f in facts)

    return map_facts(value, change)


#: the innermost label of an entry recorded through summaries (``"make() -> f(system_prompt=)"``)
_CONFIG_LABEL = re.compile(r'^(?:(?P<call>\w+)\((?P<kw>\w+)=\)|\{"(?P<key>\w+)": \.\.\.\})$')


def configuration_label(label: str, requests: frozenset[str]) -> bool:
    """True when a prefix entry's label names a configuration sink: a system-prompt keyword of
    a call that is not a vendor request (``create_subagent(system_prompt=)``), a
    system-prompt key of a dict, or an ``Agent(...)`` constructor's ``system_prompt=`` or
    ``instructions=``. ``requests``: the labels of the user's own request wrappers (config
    sinks), which are requests."""
    inner = label.rsplit(" -> ", 1)[-1]
    match = _CONFIG_LABEL.match(inner)
    if match is None:
        return False
    if match["key"] is not None:
        return is_system_prompt_name(match["key"])
    call, keyword = match["call"], match["kw"]
    if call in requests:
        return False
    if call == "Agent":
        return keyword in ("system_prompt", "instructions")
    return keyword != "system" and is_system_prompt_name(keyword)


def escaping(func: FunctionNode) -> set[int]:
    """``id``s of the expressions of ``func`` whose value leaves it: returned or yielded,
    stored into an attribute, or part of a value that is (through local names assigned from
    them, unpacked names included, and the arguments and elements of calls and containers,
    not the receiver of a method call: ``agent.run(q)`` returns the run's result, not
    ``agent``)."""
    assigned: dict[str, list[ast.expr]] = {}
    roots: list[ast.expr] = []
    for node in ast.walk(func):
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            roots.append(node.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                # ``graph, backend = build()``: each name unpacked may hold what was built
                parts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                for part in parts:
                    if isinstance(part, ast.Starred):
                        part = part.value
                    if isinstance(part, ast.Name):
                        assigned.setdefault(part.id, []).append(node.value)
                    elif isinstance(part, (ast.Attribute, ast.Subscript)):
                        roots.append(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "insert")
            and isinstance(node.func.value, ast.Name)
        ):
            assigned.setdefault(node.func.value.id, []).extend(node.args)
    return _reached(roots, assigned)


def _reached(roots: list[ast.expr], assigned: dict[str, list[ast.expr]]) -> set[int]:
    """``id``s of the expressions that are part of ``roots``' values (see ``escaping``)."""
    out: set[int] = set()
    names: set[str] = set()
    todo = list(roots)
    while todo:
        expr = todo.pop()
        stack: list[ast.AST] = [expr]
        while stack:
            node = stack.pop()
            if id(node) in out:
                continue
            out.add(id(node))
            if isinstance(node, ast.Name) and node.id not in names:
                names.add(node.id)
                todo.extend(assigned.get(node.id, ()))
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Attribute):
                    stack.append(node.func)
                stack.extend(node.args)
                stack.extend(kw.value for kw in node.keywords)
            elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            else:
                stack.extend(ast.iter_child_nodes(node))
    return out


def _receiver_name(node: ast.expr) -> str | None:
    """The local name whose object ``node`` reaches (``agents[name]`` -> ``agents``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def reused_in_loops(func: FunctionNode) -> set[int]:
    """``id``s of the expressions of ``func`` whose value is built before a loop and used by
    it: assigned to a local name (``agents = build(values)``) outside a loop whose body calls
    a method of that object (``agents[name].run(prompt)``), so every pass of the loop sends
    with what was built once. The arguments and elements of calls and containers are part of
    the value, as in ``escaping``."""
    loops = [
        node for node in ast.walk(func) if isinstance(node, (ast.For, ast.AsyncFor, ast.While))
    ]
    if not loops:
        return set()
    assigned: dict[str, list[ast.expr]] = {}
    stores: list[tuple[str, ast.Assign | ast.AnnAssign]] = []
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                parts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                for part in parts:
                    if isinstance(part, ast.Name):
                        assigned.setdefault(part.id, []).append(node.value)
                        stores.append((part.id, node))
    roots: list[ast.expr] = []
    for loop in loops:
        inside = {id(n) for stmt in loop.body for n in ast.walk(stmt)}
        used = {
            name
            for stmt in loop.body
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and (name := _receiver_name(n.func.value)) is not None
        }
        for name, store in stores:
            if (
                name in used
                and id(store) not in inside
                and store.lineno < loop.lineno
                and store.value is not None
            ):
                roots.append(store.value)
    return _reached(roots, assigned) if roots else set()


def pin_ids(facts: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` with the ids made per call (``Kind.UNIQUE``) pinned: made once for the object
    a factory builds, they name it (see the module docstring)."""
    if not any(f.kind is Kind.UNIQUE and not f.pinned for f in facts):
        return facts
    return frozenset(f.pin() if f.kind is Kind.UNIQUE else f for f in facts)
