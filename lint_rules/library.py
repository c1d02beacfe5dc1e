"""Calls to known library functions for the taint engine: the sources of ``sources.py``,
builtins (``sorted``, ``set``, ``str``, ``hash``, ...), ``json.dumps``, ``yaml.dump``,
``textwrap.dedent``, ``string.Template``, ``random.Random`` and ``PromptBuilder(...)``.

``LibraryMixin`` is mixed into ``taint.Analyzer`` (state declared on ``frames.EngineState``).
"""

from __future__ import annotations

import ast
import re
import textwrap

from .events import SinkCall
from .facts import (
    ASSUMED,
    CLEAN,
    ONE_SERVER,
    SAMPLED,
    Fact,
    Kind,
    Shape,
    Value,
    join,
    joined_servers,
    replace,
    stable_set,
    wrapped,
)
from .frames import ClassInfo, EngineState, ExternalClass, Texts
from .nodes import all_nodes
from .sources import (
    CALL_SOURCES,
    COMPLETION_ORDER_SOURCES,
    MCP_TOOL_PRODUCERS,
    NO_ARG_TIME_SOURCES,
    PER_PROCESS_SOURCES,
    SANITIZERS,
    TOOL_PRODUCERS,
    UNORDERED_SOURCES,
    format_granularity,
)

_PASS_THROUGH = {
    "builtins.enumerate",
    "builtins.reversed",
    "builtins.iter",
    "builtins.zip",
    "builtins.map",
    "builtins.filter",
    "itertools.chain",
    "itertools.islice",
}
#: Google ADK's LLM agent class (``Agent`` is ``LlmAgent``), by the names it is imported by
_ADK_AGENTS = frozenset(
    {
        "google.adk.Agent",
        "google.adk.agents.Agent",
        "google.adk.agents.LlmAgent",
        "google.adk.agents.llm_agent.Agent",
        "google.adk.agents.llm_agent.LlmAgent",
    }
)
#: a placeholder ADK fills from the session state when it builds each request's instruction
#: (``flows/llm_flows/instructions.py``, ``utils/instructions_utils.py``: ``{key}``, ``{key?}``)
_ADK_PLACEHOLDER = re.compile(r"{+[^{}]*}+")
#: the detail of a parameter's fact that reads one constant key of its state
#: (``ctx.state['clock']``)
_STATE_ENTRY = re.compile(r"^\w+\.state\[(['\"])(.*)\1\]$")
#: ``cast(T, value)``: returns ``value`` itself at run time
_CASTS = frozenset({"typing.cast", "typing_extensions.cast"})
#: calls that start a process; the process object, its pipes and a run's result (stdout,
#: returncode) carry nothing of the ``args``/``env=`` it was started with
_PROCESS_STARTS = frozenset(
    {
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "subprocess.Popen",
        "subprocess.run",
    }
)
#: ``re.sub``/``re.subn``: the string argument with its matches replaced by the replacement
_REGEX_SUBSTITUTIONS = frozenset({"re.sub", "re.subn"})
_BUILDER_QUALS = frozenset({"promptcache.PromptBuilder", "promptcache.prompt.PromptBuilder"})


def _state_gets(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
    """The constant keys ``func`` reads from its first parameter's state with ``.get(key)``
    (``ctx.state.get("clock", "")``) outside a test or a comparison; None where that state
    is used any other way (passed on whole, iterated, read by a computed key), so that what
    the function returns of it is not known key by key."""
    params = func.args.posonlyargs + func.args.args
    if not params:
        return None
    name = params[0].arg
    tested: set[int] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tested.update(id(n) for n in ast.walk(node.test))
        elif isinstance(node, ast.Compare):
            tested.update(id(n) for n in ast.walk(node))
    keys: set[str] = set()
    gets: set[int] = set()
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "state"
            and isinstance(node.func.value.value, ast.Name)
            and node.func.value.value.id == name
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            gets.add(id(node.func.value))
            if id(node) not in tested:
                keys.add(node.args[0].value)
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "state"
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and id(node) not in gets
        ):
            return None
    return keys


def source_text(node: ast.AST) -> str:
    """Short source form of a call for messages: ``datetime.now()``."""
    if isinstance(node, ast.Call):
        return f"{source_text(node.func)}()"
    if isinstance(node, ast.Attribute):
        return f"{source_text(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return "<expr>"


def substituted(held: list[Value], kwargs: dict[str | None, Value], subn: bool) -> Value:
    """What ``re.sub(pattern, repl, string)`` (``held``: ``[repl, string]``, the positional
    arguments after the pattern) or a compiled pattern's ``.sub(repl, string)`` returns: the
    string with its matches replaced (https://docs.python.org/3/library/re.html#re.sub, checked
    2026-12-06), so what the string and a replacement text hold is in the result, a proven
    step; the pattern only chooses where. A replacement function's result is not known here.
    ``subn`` gives the pair (text, count): no shape."""
    parts = held[:2] + [value for key, value in kwargs.items() if key in ("repl", "string")]
    facts = join(*parts).facts if parts else frozenset()
    return Value(facts) if subn else Value(facts, Shape.STR)


def span(node: ast.AST) -> tuple[int, int, int, int]:
    """(line, col, end line, end col) of a node, ``ast`` conventions."""
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
    )


def _fixed_keys(node: ast.AST) -> bool:
    """True when ``node`` is a call whose first argument is a dict display of constant keys
    only (``json.dumps({"language": lang, "code": code})``, no ``**``): its keys are written in
    the source's order on every call."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    shown = node.args[0]
    return isinstance(shown, ast.Dict) and all(isinstance(key, ast.Constant) for key in shown.keys)


#: the most constants a ``choice`` may pick from and still be a variant rather than a unique
#: value: each of so few values makes one prefix, cached after its first request
FEW_CHOICES = 16
#: how such a draw is named where it is reported (PC011: a model drawn so)
FEW_DETAIL = "a random choice among constants"
#: the qualified draws of one element of their argument
_CHOICE_CALLS = frozenset({"random.choice", "secrets.choice", "numpy.random.choice"})


def few_constant_choice(node: ast.Call) -> Shape | None:
    """The shape of a draw of one element (``random.choice(["x", "o"])``, ``rng.choice(...)``)
    whose only argument is a list, tuple or set display of at most ``FEW_CHOICES`` constants
    (``Shape.STR`` when all are strings): one of those few values, so a prompt holding it has
    that many variants, each cached after its first request, not a new prefix per request; it
    still varies per request (a model drawn so is PC011). None for any other draw (a
    variable, a computed list, a ``size=`` or ``p=`` keyword, more constants)."""
    if len(node.args) != 1 or node.keywords:
        return None
    shown = node.args[0]
    if not isinstance(shown, (ast.List, ast.Tuple, ast.Set)):
        return None
    if not 0 < len(shown.elts) <= FEW_CHOICES:
        return None
    values = [elt.value for elt in shown.elts if isinstance(elt, ast.Constant)]
    if len(values) != len(shown.elts):
        return None
    return Shape.STR if all(isinstance(v, str) for v in values) else Shape.UNKNOWN


#: the qualified draws of one whole number between bounds, ``randint(a, b)`` and
#: ``randrange([start,] stop[, step])``, of the module generator (``rng.randint`` is a method)
RANGE_DRAWS = frozenset({"random.randint", "random.randrange"})
#: bounds written as names that stand for a huge constant (an id's range)
_HUGE_BOUNDS = frozenset({"sys.maxsize"})


def _bound(node: ast.expr) -> int | None:
    """The whole number a bound written in the source holds: an int literal, ``-n``,
    ``sys.maxsize``, or ``+ - * // ** <<`` of such (``10**9``, ``2**32 - 1``; a power or shift
    of a base past 2**64, or by more than 256, is not worked out); None for any other
    expression (a name, a field, a call), whose value the analysis does not know."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return int(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _bound(node.operand)
        return None if inner is None else -inner
    if isinstance(node, (ast.Attribute, ast.Name)) and source_text(node) in _HUGE_BOUNDS:
        return 2**63 - 1
    if isinstance(node, ast.BinOp):
        left, right = _bound(node.left), _bound(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
        if isinstance(node.op, ast.Pow) and abs(left) <= 2**64 and 0 <= right <= 256:
            return int(left**right)
        if isinstance(node.op, ast.LShift) and abs(left) <= 2**64 and 0 <= right <= 256:
            return left << right
    return None


def range_draw_unique(node: ast.Call, method: str) -> bool:
    """Whether a draw of a whole number between bounds (``random.randint(a, b)``, ``randrange``,
    ``rng.randint``; ``method`` its name) is shown to be a new value per call: its bounds are
    written as numbers (``randint(0, 10**9)``) spanning more than ``FEW_CHOICES`` values, or
    the call is one the bounds cannot be read from (keywords, a ``step`` not written as a
    number). A draw between bounds written as numbers spanning at most ``FEW_CHOICES`` values
    (``randint(1, 6)``) is one of that many, each prefix cached after its first request; one
    between bounds the analysis does not know (``randrange(self.low, self.high)``, a setting)
    is not shown to be more than such a few: both only vary per call."""
    if node.keywords or not 1 <= len(node.args) <= (2 if method == "randint" else 3):
        return True
    bounds = [_bound(arg) for arg in node.args]
    if method == "randint":
        if len(bounds) != 2:
            return True
        low, high, step = bounds[0], bounds[1], 1
    elif len(bounds) == 1:
        low, high, step = 0, bounds[0], 1
    else:
        low, high = bounds[0], bounds[1]
        given = bounds[2] if len(bounds) == 3 else 1
        if given is None or given == 0:
            return True
        step = abs(given)
    if low is None or high is None:
        return False
    # randint draws both bounds; range(low, high, step) holds ceil(|high - low| / step) values
    count = abs(high - low) + 1 if method == "randint" else -(-abs(high - low) // step)
    return count > FEW_CHOICES


#: the ``Value.ref`` of a name another module binds once to a display of at most
#: ``FEW_CHOICES`` constants and never changes, as an importer looks it up: strings, or others
FEW_STRINGS = "few strings"
FEW_CONSTANTS = "few constants"
#: methods that change a list or set in place (a name they are called on is not fixed)
_MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "add"}
    | {"update", "discard", "difference_update", "intersection_update", "__setitem__"}
)


def fixed_names(tree: ast.Module) -> tuple[dict[str, Shape], frozenset[str]]:
    """What a module's text proves of its names, for ``random.choice(NAME)``: the names bound
    at module level, once in the whole module, to a list, tuple or set display of at most
    ``FEW_CHOICES`` constants (``SYSTEM_PROMPTS = ["You are ...", ...]``), each with its
    ``few_constant_choice`` shape; and every name bound exactly once in the module (an
    assignment, an import, a definition) and never changed in place: no ``global`` or
    ``nonlocal`` of it, no mutating method called on it (``NAME.append``), no item stored or
    deleted, no ``shuffle(NAME)``. Found once per tree (kept on the node: callers must not
    change it)."""
    known: tuple[dict[str, Shape], frozenset[str]] | None = tree.__dict__.get("_fixed_names")
    if known is None:
        known = tree.__dict__["_fixed_names"] = _find_fixed_names(tree)
    return known


def _find_fixed_names(tree: ast.Module) -> tuple[dict[str, Shape], frozenset[str]]:
    bound: dict[str, int] = {}
    changed: set[str] = set()
    for node in all_nodes(tree):
        names: list[str] = []
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.alias):
            names = [node.asname or node.name.partition(".")[0]]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names = [node.name]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            changed.update(node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in _MUTATORS:
                changed.add(node.value.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                changed.add(node.value.id)
        elif isinstance(node, ast.Call) and source_text(node.func).endswith("shuffle"):
            changed.update(a.id for a in node.args if isinstance(a, ast.Name))
        for name in names:
            bound[name] = bound.get(name, 0) + 1
    once = frozenset(n for n, count in bound.items() if count == 1 and n not in changed)
    few: dict[str, Shape] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, shown = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, shown = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in once:
            shape = few_constant_choice(ast.Call(ast.Name("choice"), [shown], []))
            if shape is not None:
                few[target.id] = shape
    return few, once


def imported_modules(tree: ast.Module) -> frozenset[str]:
    """The names an ``import`` statement anywhere in the module binds to a module (``import
    chevron``, ``import os.path`` binds ``os``, ``import numpy as np`` binds ``np``), not those
    ``from ... import`` binds (which may be objects). Found once per tree (kept on the node)."""
    known: frozenset[str] | None = tree.__dict__.get("_imported_modules")
    if known is None:
        known = frozenset(
            alias.asname or alias.name.partition(".")[0]
            for node in all_nodes(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        )
        tree.__dict__["_imported_modules"] = known
    return known


_NO_FACT = Fact(Kind.UNIQUE, 0, 0, "")


def sample_of(node: ast.Call, pool: Value, fact: Fact) -> Value | None:
    """``random.sample(pool, k)`` (or ``rng.sample``): a list of ``k`` of the pool's elements,
    drawn per call: the pool's facts and ``fact``, a ``SAMPLED`` fact, which an element taken
    in a loop drops and a join or what the loop appends keeps. None where the elements are not
    whole values of the pool: a draw from a string (characters), a ``range`` (numbers) or a
    constant, which stays a unique value."""
    if not node.args:
        return None
    given = node.args[0]
    if (
        pool.shape is Shape.STR
        or isinstance(given, ast.Constant)
        or (isinstance(given, ast.Call) and source_text(given.func) == "range")
        or (isinstance(given, ast.Attribute) and source_text(given).startswith("string."))
    ):
        return None
    return Value(pool.facts | {fact}, Shape.LIST, elem_str=pool.elem_str, elem=pool.elem)


_DRAWN_AGAIN = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def _in_comprehension(func: ast.AST, node: ast.Call) -> bool:
    """Whether ``node`` is inside a comprehension, generator expression or lambda of ``func``
    (where each element is drawn again, a draw per turn)."""
    inside: set[int] | None = func.__dict__.get("_promptcache_comprehended")
    if inside is None:
        inside = set()
        for sub in ast.walk(func):
            if isinstance(sub, _DRAWN_AGAIN):
                inside.update(id(n) for n in ast.walk(sub) if isinstance(n, ast.Call))
        func.__dict__["_promptcache_comprehended"] = inside
    return id(node) in inside


class LibraryMixin(EngineState):
    """``qualified_call``: the value of a call whose target resolves to a known import."""

    def adk_state_instructions(self, node: ast.Call) -> None:
        """An ADK agent (``Agent(instruction=..., before_agent_callback=stamp)``) whose callback
        stores a time or an id into the session state under a constant key
        (``callback_context.state["clock"] = now``) and whose instruction reads that key: a
        template's ``{clock}`` or ``{clock?}``, which ADK fills from the state each time it
        builds a request, or a function given as the instruction that reads
        ``ctx.state["clock"]`` (``.get("clock")``). The callback runs before every run of the
        agent, so that entry of the system instruction changes with every request; recorded
        at the instruction. Not with ``static_instruction=``: ADK then sends the
        ``instruction`` after the history, as the request's tail."""
        given = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
        callback = given.get("before_agent_callback")
        if callback is None:
            return
        stored = self.adk_state_stores(callback)
        if not stored:
            return
        for name in ("global_instruction", "instruction"):
            instruction = given.get(name)
            if instruction is None or (name == "instruction" and "static_instruction" in given):
                continue
            label = f"{ast.unparse(node.func)}({name}=)"
            provider = self.adk_provider(instruction)
            keys: set[str] = set()
            if provider is not None:
                # the function returns entries of the state of the context ADK hands it
                # (``ctx.state["clock"]``, or ``ctx.state.get("clock")`` where each use of
                # the state is such a read of a constant key)
                got = _state_gets(provider)
                for f in self.summary(provider).ret.facts:
                    if f.kind is not Kind.PARAM or f.param != 0:
                        continue
                    read = _STATE_ENTRY.match(f.detail)
                    if read is not None:
                        keys.add(read.group(2))
                    elif f.detail.endswith(".state") and got is not None:
                        keys.update(got)
            else:
                template = self.eval(instruction).const
                for match in _ADK_PLACEHOLDER.finditer(template or ""):
                    keys.add(match.group().lstrip("{").rstrip("}").strip().removesuffix("?"))
            held = frozenset(f for f in stored if f.key[:1] and f.key[0] in keys)
            if held:
                self.record("system", Value(held), instruction, label)

    def adk_state_stores(self, callback: ast.expr) -> frozenset[Fact]:
        """The times and ids that ``callback`` (a function of this module, or a list of them)
        stores into its first parameter's state under a constant key
        (``callback_context.state["clock"] = now``): the facts of its summary's stores into
        that parameter that carry a key."""
        names = callback.elts if isinstance(callback, (ast.List, ast.Tuple)) else [callback]
        out: set[Fact] = set()
        for name in names:
            if not isinstance(name, ast.Name) or name.id in self.frame.env:
                continue
            func = self.functions.get(name.id)
            if func is None:
                continue
            for f in self.summary(func).state_stores.get(0, frozenset()):
                if f.key and f.kind in (Kind.TIME, Kind.UNIQUE) and not f.pinned:
                    out.add(f)
        return frozenset(out)

    def adk_provider(self, instruction: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function of this module given as an ADK instruction (an instruction provider,
        called with the request's context), or None."""
        if isinstance(instruction, ast.Name) and instruction.id not in self.frame.env:
            return self.functions.get(instruction.id)
        return None

    def drawn_again(self, node: ast.Call) -> bool:
        """Whether the draw ``node`` runs again within one call of this body: inside a loop,
        a comprehension, a generator expression or a lambda (``"".join(choice(chars) for _ in
        range(8))``, an id made of many draws)."""
        scope = self.frame.func if self.frame.func is not None else self.tree
        return bool(self.frame.loops) or _in_comprehension(scope, node)

    def picked_whole(self, node: ast.Call, pool: Value) -> Value | None:
        """``random.choice(pool)`` (or ``rng.choice``) of a pool of whole values, drawn once
        in this body: one of the pool's elements, a value that repeats (a prefix cached when
        it does), not a new value per call: the element's facts and a ``VARIES`` fact (a
        model drawn so is PC011, a tool list PC006). None where the drawn elements may be
        combined or are not whole values: a draw inside a loop or a comprehension (drawn
        again each turn), from a string (a character), a ``range`` (a number) or a
        constant, or with more arguments."""
        if len(node.args) != 1 or node.keywords or sample_of(node, pool, _NO_FACT) is None:
            return None
        if self.drawn_again(node):
            return None
        element = self.element_of(pool)
        picked = self.fact(Kind.VARIES, node, source_text(node))
        return Value(element.facts | {picked}, element.shape, elem_str=element.elem_str)

    def few_choice(self, node: ast.Call, first: Value) -> Shape | None:
        """``few_constant_choice``, also for a draw from a name (``first`` its value) that
        holds few constants on every call: bound once in this module, at module level, to
        such a display, or imported once from a module that binds it so (``FEW_STRINGS``,
        ``FEW_CONSTANTS``), and in both modules never rebound or changed (``fixed_names``).
        A name of the function's own scope, or one changed anywhere, is not."""
        few = few_constant_choice(node)
        if few is not None or len(node.args) != 1 or node.keywords:
            return few
        shown = node.args[0]
        if not isinstance(shown, ast.Name) or shown.id in self.frame.env:
            return None
        if self.fixed is None:
            self.fixed = fixed_names(self.tree)
        few_here, once = self.fixed
        name = shown.id
        if name in self.module_frame.env:
            return few_here.get(name)
        if name in self.imports and name in once:
            if first.ref == FEW_STRINGS:
                return Shape.STR
            if first.ref == FEW_CONSTANTS:
                return Shape.UNKNOWN
        return None

    def qualified_call(
        self,
        qual: str,
        node: ast.Call,
        args: list[Value],
        kwargs: dict[str | None, Value],
    ) -> Value | None:
        first = args[0] if args else CLEAN
        if qual in _CASTS:
            # ``cast(T, value)`` tells a type checker what ``value`` is and returns it
            # unchanged: what it holds, and what it is, are the value's
            held = args[1] if len(args) > 1 else kwargs.get("val")
            if held is not None:
                return held
        if qual in _ADK_AGENTS:
            self.adk_state_instructions(node)
        if (
            qual == "dataclasses.asdict"
            and len(node.args) == 1
            and not node.keywords
            and first.items is not None
            and isinstance(first.ref, (ClassInfo, ExternalClass))
        ):
            # a project dataclass built here, as a dict of its fields: each holds what was
            # stored into it (as ``model_dump()`` of a pydantic model)
            return Value(first.facts, Shape.DICT, items=first.items)
        if qual in _REGEX_SUBSTITUTIONS:
            return substituted(args[1:], kwargs, qual == "re.subn")
        if qual in _PROCESS_STARTS:
            # a started process: what it prints and returns is the program's output, made of
            # neither its arguments nor its environment
            return CLEAN
        if qual == "random.seed":
            # ``random.seed(42)`` (or a seed from a setting or a parameter) makes the draws
            # after it in this body the same on every run of it; ``random.seed()`` or a seed
            # made of a time or an id does not
            self.frame.seeded = bool(node.args) and not any(
                f.kind is Kind.TIME or f.kind is Kind.UNIQUE for f in args[0].facts
            )
            return CLEAN
        source = CALL_SOURCES.get(qual)
        if source is not None:
            kind, granularity, shape = source
            if self.frame.seeded and qual.startswith("random."):
                # a draw from the module generator after a fixed seed in this same body
                return join(*args) if args else CLEAN
            if qual == "random.shuffle" and node.args and isinstance(node.args[0], ast.Name):
                # a shuffle draws a new order of the same elements: an order fact (PC004), which
                # an element taken in a loop drops and what the loop appends keeps, as for a set
                name = node.args[0].id
                old = self.lookup(name)
                shuffled = self.fact(
                    Kind.UNORDERED, node, source_text(node), granularity="shuffled"
                )
                self.frame.env[name] = old.with_facts(old.facts | {shuffled})
                return CLEAN
            if qual == "random.sample":
                drawn = sample_of(
                    node, first, self.fact(kind, node, source_text(node), granularity=SAMPLED)
                )
                if drawn is not None:
                    return replace(drawn, facts=drawn.facts | join(*args[1:]).facts)
            if qual in RANGE_DRAWS and not self.drawn_again(node):
                method = qual.rpartition(".")[2]
                if not range_draw_unique(node, method):
                    varies = self.fact(Kind.VARIES, node, source_text(node))
                    return Value(frozenset({varies}) | join(*args).facts)
            if qual in _CHOICE_CALLS:
                few = self.few_choice(node, first)
                if few is not None:
                    return Value(frozenset({self.fact(Kind.VARIES, node, FEW_DETAIL)}), few)
                picked = self.picked_whole(node, first) if qual == "random.choice" else None
                if picked is not None:
                    return picked
            if qual == "os.getenv" or qual == "os.environ.get":
                shape = Shape.STR
            fact = self.fact(kind, node, source_text(node), granularity=granularity)
            if qual in PER_PROCESS_SOURCES and not fact.pinned:
                fact = replace(fact, pinned=True)
            return Value(
                frozenset({fact}) | join(*args).facts if args else frozenset({fact}), shape
            )
        if qual in NO_ARG_TIME_SOURCES:
            if node.args:
                return join(*args)
            return Value(
                frozenset({self.fact(Kind.TIME, node, source_text(node), granularity="subday")}),
                Shape.STR,
            )
        if qual == "time.strftime":
            if len(node.args) == 1 and first.const is None and isinstance(first.ref, Texts):
                # one of a few formats: the time now as each formats it (``formatted_as``)
                now = self.fact(Kind.TIME, node, source_text(node), granularity="subday")
                return Value(
                    first.facts | self.formatted_as(Value(frozenset({now})), first).facts,
                    Shape.STR,
                )
            if len(node.args) == 1:
                fmt = first.const
                grain = format_granularity(fmt) if fmt is not None else "subday"
                if not grain:
                    return Value(first.facts, Shape.STR)
                fact = self.fact(Kind.TIME, node, source_text(node), granularity=grain)
                return Value(first.facts | {fact}, Shape.STR)
            return self.formatted_as(join(*args[1:]), first)
        if qual in ("random.Random", "random.SystemRandom", "numpy.random.default_rng"):
            if qual == "random.SystemRandom" or (not node.args and not node.keywords):
                return Value(shape=Shape.RNG, ref=source_text(node))
            return CLEAN
        if qual == "builtins.hash":
            if first.shape is Shape.STR:
                return Value(
                    frozenset({self.fact(Kind.UNIQUE, node, "hash() of a str")}) | first.facts
                )
            return Value(first.facts)
        if qual == "builtins.sorted":
            value = first.ordered()
            return Value(
                value.facts,
                Shape.LIST,
                elem_str=first.elem_str,
                name_key=first.name_key,
                elem=first.elem,
            )
        if qual in ("builtins.set", "builtins.frozenset"):
            ref: object = (node.lineno, node.col_offset, f"{qual[9:]}()")
            if stable_set(first):
                # a copy of a set of numbers or of one element keeps its one order
                ref = first.ref
            return Value(
                first.without(Kind.UNORDERED).facts, Shape.SET, elem_str=first.elem_str, ref=ref
            )
        if qual in ("builtins.list", "builtins.tuple"):
            if not node.args:
                return Value(shape=Shape.LIST)
            unordered = self.iteration_fact(first, node.args[0])
            facts = first.facts | {unordered} if unordered else first.facts
            return Value(
                facts, Shape.LIST, elem_str=first.elem_str, name_key=first.name_key, elem=first.elem
            )
        if qual == "builtins.dict":
            role = next((kw.value for kw in node.keywords if kw.arg == "role"), None)
            content = next((kw.value for kw in node.keywords if kw.arg == "content"), None)
            if (
                isinstance(role, ast.Constant)
                and role.value in ("system", "developer")
                and content is not None
            ):
                self.record_message_content(content, f"dict(role={role.value!r})")
            made = Value(join(*args, *kwargs.values()).facts, Shape.DICT)
            if node.args or any(kw.arg is None for kw in node.keywords):
                # keys of another mapping or of a ``**`` splat: not known here
                return made
            # keywords only: a dict of known keys, as the literal ``{"role": ..., ...}`` is, and
            # a chat message of a constant role marks what it holds with that role
            made = replace(made, items=tuple((str(kw.arg), kwargs[kw.arg]) for kw in node.keywords))
            constant = self.const_role(role) if role is not None else None
            if constant is not None:
                return wrapped(made, constant)
            return made
        if qual in ("builtins.str", "builtins.repr"):
            if not node.args:
                return Value(shape=Shape.STR, const="")
            return self.stringify(first, node)
        if qual == "builtins.format":
            spec = args[1].const if len(args) > 1 else None
            if spec is not None and (
                first.shape in (Shape.DATETIME, Shape.DATE)
                or any(f.kind is Kind.TIME for f in first.facts)
            ):
                return self.regranulate(first, spec)
            return self.stringify(first, node)
        if (
            qual == "builtins.zip"
            and args
            and not node.keywords
            and len(args) == len(node.args)
            and all(a.shape not in (Shape.SET, Shape.UNORDERED_LIST) for a in args)
        ):
            # pairs of the lists' elements: each position holds what one list's elements hold
            return Value(
                join(*args).facts,
                Shape.LIST,
                elem=Value(
                    join(*args).without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts,
                    elts=tuple(self.element_of(a) for a in args),
                ),
            )
        if qual in _PASS_THROUGH:
            for value in args:
                if value.shape in (Shape.SET, Shape.UNORDERED_LIST):
                    return Value(
                        join(*args).facts, value.shape, elem_str=value.elem_str, ref=value.ref
                    )
            return Value(join(*args).facts, Shape.LIST) if args else CLEAN
        if qual in SANITIZERS:
            return CLEAN
        if qual == "json.dumps":
            return self.json_dumps(node, first)
        if qual in ("yaml.dump", "yaml.safe_dump"):
            for kw in node.keywords:
                if (
                    kw.arg == "sort_keys"
                    and isinstance(kw.value, ast.Constant)
                    and kw.value.value is False
                ):
                    why = self.varying_key_order(node, first)
                    if why is None:
                        break
                    fix = ("replace", *span(kw.value), "True")
                    fact = self.fact(
                        Kind.JSON_UNSORTED,
                        node,
                        f"{source_text(node)} with sort_keys=False",
                        fix=fix,
                        granularity=why[0],
                        site=why[1],
                    )
                    fact = _as_shown(fact, first)
                    facts = first.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts
                    return Value(facts | {fact}, Shape.STR)
            return Value(first.facts, Shape.STR)
        if qual in ("textwrap.dedent", "inspect.cleandoc"):
            const = first.const
            if const is not None:
                const = textwrap.dedent(const) if qual == "textwrap.dedent" else const.strip()
            return Value(first.facts, Shape.STR, const)
        if qual == "string.Template":
            return Value(first.facts, Shape.STR, first.const)
        if qual in UNORDERED_SOURCES:
            return Value(
                join(*args).facts,
                Shape.UNORDERED_LIST,
                elem_str=UNORDERED_SOURCES[qual],
                ref=(
                    node.lineno,
                    node.col_offset,
                    source_text(node),
                    "completion" if qual in COMPLETION_ORDER_SOURCES else "filesystem",
                ),
            )
        if qual in TOOL_PRODUCERS:
            # one MCP server's tools (``ONE_SERVER``); entry points and modules are listed in
            # installation order
            grain = ONE_SERVER if qual in MCP_TOOL_PRODUCERS else ""
            fact = self.fact(Kind.TOOLS_UNSTABLE, node, source_text(node), granularity=grain)
            return Value(frozenset({fact}), Shape.LIST, name_key="elem")
        if qual in _BUILDER_QUALS:
            sink = SinkCall(node, "promptcache", "PromptBuilder")
            for kw in node.keywords:
                if kw.arg == "cache_key":
                    sink.params["prompt_cache_key"] = (kw.value, kwargs[kw.arg])
                elif kw.arg == "model":
                    sink.params["model"] = (kw.value, kwargs[kw.arg])
            if node.args:
                sink.params["model"] = (node.args[0], first)
            self.add_sink(sink)
            return Value(shape=Shape.BUILDER)
        if qual in ("pathlib.Path", "pathlib.PurePath"):
            return Value(join(*args).facts, ref="path") if args else Value(ref="path")
        if qual in ("asyncio.gather",):
            if not args:
                return CLEAN
            facts = join(*args).facts
            listing = [
                a
                for a, v in zip(node.args, args, strict=False)
                if any(f.granularity == ONE_SERVER for f in v.facts)
            ]
            if len(listing) > 1 or any(isinstance(a, ast.Starred) for a in listing):
                # the tool lists of several MCP servers (two awaitables that list tools, or
                # a starred list of them), joined; one server's list gathered beside other
                # work (``gather(session.list_tools(), session.list_prompts())``) is not
                facts = joined_servers(facts, lambda f: True)
            return Value(facts, Shape.LIST)
        return None

    def json_dumps(self, node: ast.Call, first: Value) -> Value:
        """``json.dumps``: JSON_UNSORTED when sort_keys is not set and the dumped value's key
        order is shown to vary between requests (``varying_key_order``)."""
        sort_keys: ast.keyword | None = None
        for kw in node.keywords:
            if kw.arg is None:
                return Value(first.facts, Shape.STR)
            if kw.arg == "sort_keys":
                sort_keys = kw
        if sort_keys is not None and not (
            isinstance(sort_keys.value, ast.Constant) and sort_keys.value.value is False
        ):
            cleaned = first.without(Kind.REPR, Kind.JSON_UNSORTED)
            if first.shape is Shape.DICT:
                # sort_keys orders a dict's keys, not the lists it holds
                listed = _orders_in_values(first)
                cleaned = cleaned.without(Kind.UNORDERED)
                cleaned = cleaned.with_facts(cleaned.facts | listed)
            return Value(cleaned.facts, Shape.STR)
        if first.shape in (Shape.STR, Shape.NUM) or first.ref == "literal" or not node.args:
            return Value(first.facts, Shape.STR)
        why = self.varying_key_order(node, first)
        if why is None:
            return Value(first.facts, Shape.STR)
        if sort_keys is not None:
            fix: tuple[int | str | bool, ...] = ("replace", *span(sort_keys.value), "True")
        else:
            last = node.args[-1] if not node.keywords else node.keywords[-1].value
            assert last.end_lineno is not None and last.end_col_offset is not None
            fix = ("insert", last.end_lineno, last.end_col_offset, ", sort_keys=True")
        fact = self.fact(
            Kind.JSON_UNSORTED,
            node,
            f"{source_text(node)} without sort_keys",
            fix=fix,
            granularity=why[0],
            site=why[1],
        )
        fact = _as_shown(fact, first)
        # sorting the keys is the fix of a dict built in an unstable order: one finding, PC003
        return Value(first.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts | {fact}, Shape.STR)

    def varying_key_order(self, node: ast.AST, dumped: Value) -> tuple[str, tuple[int, int]] | None:
        """Why the keys of the value that ``node`` serialises can come in another order on the
        next request, or None when nothing shows it: ("unordered", where the unstable order
        comes from) or ("arguments", (0, 0)). Python dicts keep insertion order
        (https://docs.python.org/3/library/stdtypes.html#dict, checked 2026-12-03), so a dict
        built the same way each time (a literal, a pydantic ``model_dump()`` or
        ``model_json_schema()``, a server's response) dumps to the same text. The evidence:

        - the dict was built by iterating a set or another hash- or filesystem-ordered source
          (its value carries an unpinned order fact and its keys are not a literal's);
        - the text is a tool call's ``arguments``: arguments the model produced, parsed and
          stored by the application (a database's JSON column may reorder keys), serialised
          again into the history of every later request. Not when the dumped value is a dict
          display whose keys are all constants (``{"code": m["content"]}``): its keys come in
          the source's order, whatever the store hands back.
        """
        if dumped.items is None and dumped.shape not in (
            Shape.LIST,
            Shape.SET,
            Shape.UNORDERED_LIST,
        ):
            order = [
                (0, 0) if f.path else (f.line, f.col)
                for f in dumped.facts
                if f.kind in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE) and not f.pinned
            ]
            if order:
                return "unordered", min(order)
        if node in self.argument_calls and not _fixed_keys(node):
            return "arguments", (0, 0)
        return None


def _as_shown(fact: Fact, dumped: Value) -> Fact:
    """``fact``, the unstable key order of ``dumped``'s text, carrying the unproven steps of
    the order fact that shows it when no such fact of ``dumped`` is proven: an order that
    reaches the dumped value only through a call the analysis cannot see (a model's answer,
    stored into an object one of whose fields holds a set) is an unproven flow, shown by
    ``--explain``, not a finding. A tool call's ``arguments`` (no order fact) stay as they are."""
    evidence = [
        f for f in dumped.facts if f.kind in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE) and not f.pinned
    ]
    if not evidence or any(f.proven for f in evidence):
        return fact
    shown = min(evidence, key=lambda f: (len(f.via), f.path, f.line, f.col, f.detail))
    for step in shown.via:
        if step[0].startswith(ASSUMED):
            fact = fact.passed_on(step)
    return fact


def _orders_in_values(value: Value, depth: int = 0) -> frozenset[Fact]:
    """The order facts held in the values of a dict of known keys that are not dicts (a
    ``list(set(tags))`` under ``"tags"``): ``json.dumps(..., sort_keys=True)`` sorts the keys
    of every dict it writes, nested ones too, but writes a list's elements in their order."""
    if value.items is None or depth > 4:
        return frozenset()
    found: set[Fact] = set()
    for _key, item in value.items:
        if item.shape is Shape.DICT:
            found |= _orders_in_values(item, depth + 1)
        else:
            found |= {f for f in item.facts if f.kind is Kind.UNORDERED}
    return frozenset(found)
