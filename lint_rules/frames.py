"""State of the taint engine: function summaries, class info, evaluation frames.

``EngineState`` declares (for type checkers only) what the engine's mixins (``exprs``,
``calls``, ``regions``) use of ``taint.Analyzer``, which implements all of it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .events import HandedHistory, HandedTurn
from .facts import (
    CLEAN,
    KEYED_KINDS,
    Fact,
    Kind,
    Shape,
    Step,
    Value,
    When,
    into_fields,
    keyed,
    replace,
)
from .nodes import all_nodes

if TYPE_CHECKING:
    from .events import PrefixEntry, SinkCall
    from .facts import Kind
    from .sinks import SinkSpec

INIT_METHODS = frozenset(
    {"__init__", "__post_init__", "__enter__", "__aenter__", "setup", "model_post_init"}
)


#: where a parameter (or a field of one) reaches a prefix region inside a function: (region,
#: label, the unproven steps on the way: ``Summary.param_sinks``)
SinkTarget = tuple[str, str, tuple[Step, ...]]


@dataclass
class Summary:
    """What a function does with its inputs, computed once per analysis.

    ``ret``: the joined value of its return statements and ``yield`` expressions (PARAM facts
    stand for arguments, ``facts.SELF`` for the receiver); ``returns``: each returned or yielded
    expression and its value (empty for a summary read from another module); ``param_sinks``:
    parameter index -> (region, label, unseen) of the prefix regions that parameter reaches
    inside the function, ``unseen`` the steps "assumed to pass through" a call the analysis
    cannot see on the way (empty when the flow is proven; a caller's argument passed there is
    unproven too); ``stores``: target parameter index (``SELF`` = the receiver) -> the facts the
    function stores into that object (``self.x = ...``, ``lst.append(...)``, ``d[k] = ...``),
    PARAM facts again standing for arguments; ``attr_stores``: the part of ``stores[SELF]``
    stored into each attribute (``self.sections``), so an object's attributes keep their own
    facts (a message's ``created_at`` is not its ``content``); ``attr_sinks``: likewise, the
    receiver's attributes that reach a sink (``self._system_prompt``); ``attr_objects``: for an
    attribute every store into which was an instance of one project class whose fields are
    known (``self.last = Chat(chat_id=...)``), that object: its class and the facts of each
    field, so a caller's read of ``self.last.notes`` takes only ``notes``' facts (None: some
    store was of another value); ``marks``: the parameters whose contents the function puts
    a cache breakpoint on (``cache_control`` written into an element of ``messages``).
    ``name`` is how a finding names the function (``Clock.now_text``); ``key`` identifies its
    PARAM facts (``Fact.fix == (key,)``).
    """

    params: list[str]
    ret: Value = CLEAN
    returns: list[tuple[ast.expr, Value]] = field(default_factory=list)
    param_sinks: dict[int, list[SinkTarget]] = field(default_factory=dict)
    builder: bool = False
    marks: frozenset[int] = frozenset()
    stores: dict[int, frozenset[Fact]] = field(default_factory=dict)
    attr_stores: dict[str, frozenset[Fact]] = field(default_factory=dict)
    attr_objects: dict[str, Value | None] = field(default_factory=dict)
    attr_sinks: dict[str, list[SinkTarget]] = field(default_factory=dict)
    name: str = ""
    key: int = 0
    #: where each parameter (``param_sinks``' index as a string) or entry of one
    #: (``attr_sinks``' key) is first sent: (line, the callee's name there, file or "" for
    #: this one), named by a caller that reaches this method as an override
    sink_lines: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    #: for a nested function: the parameters of an enclosing function that it sends to a
    #: prefix region, (PARAM fact, region, label), recorded where it is called
    outer: list[tuple[Fact, str, str]] = field(default_factory=list)
    #: parameter index -> the facts the function stores under a constant key into that
    #: parameter's ``state`` (``callback_context.state["clock"] = now``: an agent framework's
    #: session state, read by ``LibraryMixin.adk_state_instructions``)
    state_stores: dict[int, frozenset[Fact]] = field(default_factory=dict)
    #: for each return of text built from pieces (an f-string or ``+``), those pieces in
    #: order with their values (PARAM facts standing for arguments), so a caller that sends
    #: what it returns as system text knows the order of what varies and what is static
    text_returns: list[tuple[tuple[ast.AST, Value], ...]] = field(default_factory=list)
    #: system text made from the turn's input ahead of a history the function is given and
    #: does not append to (PC010, reported by a caller that passes its client's history)
    turn_histories: list[HandedHistory] = field(default_factory=list)


@dataclass(frozen=True)
class ExternalClass:
    """A class defined in another module of the program, known through its exported summary.

    ``qualname``: ``app.tools.Registry``; ``methods``: method name -> summary (``__init__``
    included); ``default_repr``: its instances print their memory address; ``field_facts``:
    attribute -> the order facts that code anywhere in the program stores into that field of
    an instance (tools registered while iterating ``list_tools()``), so any instance's field
    may hold them.
    """

    qualname: str
    methods: Mapping[str, Summary] = field(hash=False, compare=False)
    default_repr: bool = False
    field_facts: dict[str, frozenset[Fact]] = field(default_factory=dict, hash=False, compare=False)
    #: its abstract methods (``is_abstract``), and for each, the overriding methods of its
    #: subclasses anywhere in the program whose arguments reach a sink (the driver's
    #: ``overrides``): a call of one on an object of this class may run any of them
    abstract: frozenset[str] = field(default=frozenset(), hash=False, compare=False)
    overrides: Mapping[str, tuple[Summary, ...]] = field(
        default_factory=dict, hash=False, compare=False
    )
    #: the role its class body fixes for every instance (``ClassInfo.fixed_role``), or ""
    role: str = field(default="", hash=False, compare=False)


@dataclass(frozen=True)
class Table:
    """What a dict or list literal of callables holds (``{"now": self.now_text}``), so that
    ``table[key]()`` calls them."""

    targets: tuple[object, ...]


@dataclass(frozen=True)
class Bound:
    """A callable value: a function or method (``target``: an AST node or an external
    summary) and, for a bound method, the receiver's value and expression."""

    target: object
    receiver: Value | None = field(default=None, compare=False)
    receiver_expr: ast.expr | None = field(default=None, compare=False)


def is_abstract(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A method with no implementation of its own: decorated ``@abstractmethod``, or whose
    body (after its docstring) only raises ``NotImplementedError`` or is ``...``."""
    for decorator in func.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else None
        if isinstance(decorator, ast.Name):
            name = decorator.id
        if name == "abstractmethod":
            return True
    body = func.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    if len(body) != 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return stmt.value.value is Ellipsis
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


@dataclass(frozen=True)
class Choice:
    """``Value.ref`` of an object that is one of several project classes' instances, or may
    be one of them (``self.service = OpenAIChat()`` in one branch, ``AnthropicChat()`` in
    another; ``svc = self.services[name]`` in one branch, ``self.service`` in another): an
    argument of a method called on it reaches the sinks each class's method sends it to
    (``calls.call_choices``). Anything else about the object (its fields, its repr, what its
    methods return) is unknown, as for an object of no class, except the fields when each path
    built it with its fields known, an instance of a project class or a dict of known keys
    (``Value.items``, ``merge``); a read of a name that one of the classes defines as a method
    or property takes all the object holds (``calls._attribute_of``)."""

    classes: tuple[object, ...]


#: the most classes a ``Choice`` keeps (past that, the object is of no known class)
MAX_CHOICES = 8


@dataclass(frozen=True)
class Texts:
    """``Value.ref`` of a str that is one of a few constants, each made on its own path
    (``fmt = "%H:%M" if precise else "%Y-%m-%d"``, or an ``if`` that binds the name to another
    constant): each text with the condition on a parameter of the function being summarised
    that it needs (``Fact.when``; ``()`` where none is known). At most ``MAX_CHOICES`` texts.
    ``calls.formatted_as`` reads a time formatted by such a format as each text formats it."""

    texts: tuple[tuple[str, When], ...]


def texts_of(value: Value) -> tuple[tuple[str, When], ...] | None:
    """The constants a str value may be (each with the condition it needs), or None when it
    may be any text."""
    if value.shape is not Shape.STR:
        return None
    if value.const is not None:
        return ((value.const, ()),)
    return value.ref.texts if isinstance(value.ref, Texts) else None


def merged_texts(a: Value, b: Value) -> Texts | None:
    """``Value.ref`` of a str that is ``a`` on one path and ``b`` on another when each is one
    of a few constants: every text of either, a text both may be (under different conditions)
    needing none; None when either may be any text or there are more than ``MAX_CHOICES``."""
    left, right = texts_of(a), texts_of(b)
    if left is None or right is None:
        return None
    texts: dict[str, When] = {}
    for text, when in (*left, *right):
        texts[text] = when if texts.get(text, when) == when else ()
    if len(texts) > MAX_CHOICES:
        return None
    return Texts(tuple(texts.items()))


def merged_ref(a: object, b: object) -> object:
    """``Value.ref`` of a value that is ``a``'s on one path and ``b``'s on another: the same
    ref, else a ``Choice`` of the project classes either may be an instance of (a side of no
    class adds none), else None."""
    if a == b:
        return a
    classes = tuple(dict.fromkeys((*_classes_of(a), *_classes_of(b))))
    if not classes or len(classes) > MAX_CHOICES:
        return None
    return Choice(classes)


def _classes_of(ref: object) -> tuple[object, ...]:
    if isinstance(ref, Choice):
        return ref.classes
    if isinstance(ref, (ClassInfo, ExternalClass)):
        return (ref,)
    return ()


@dataclass(eq=False)
class ClassInfo:
    """A class defined in the module: its methods and what its instance attributes hold."""

    node: ast.ClassDef
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    attrs: dict[str, Value] = field(default_factory=dict)
    attr_defs: dict[str, ast.expr] = field(default_factory=dict)
    default_repr: bool = False
    bases: list[ClassInfo] = field(default_factory=list)
    #: method -> the methods it runs through calls on ``self`` (``session.reach``, cached)
    reach: dict[ast.AST, frozenset[ast.FunctionDef | ast.AsyncFunctionDef]] = field(
        default_factory=dict
    )
    #: line -> the method of this class or a base whose lines hold it (``session._method_at``)
    lines: dict[int, ast.FunctionDef | ast.AsyncFunctionDef | None] = field(default_factory=dict)
    #: method -> the names of the methods it calls on ``self`` (``session._self_calls``, cached)
    self_calls: dict[ast.AST, set[str]] = field(default_factory=dict)
    #: the attributes a method other than an ``__init__``-like one sets to ``None``
    #: (``statements.none_fields``, computed on first use)
    none_fields: frozenset[str] | None = None
    #: name -> ``find_method(name)`` (a class's methods and bases are fixed once the module
    #: is collected)
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | None] = field(default_factory=dict)

    def fixed_role(self) -> str:
        """``"system"`` or ``"developer"`` when the class body (or a same-module base's) sets
        its ``role`` field to that literal (pydantic's ``role: Literal["system"] = "system"``,
        a dataclass default): a message class whose every instance that keeps the default is
        of that role; "" otherwise."""
        for info in self.lineage():
            default = info.attr_defs.get("role")
            if default is not None:
                if isinstance(default, ast.Constant) and default.value in ("system", "developer"):
                    return str(default.value)
                return ""
        return ""

    def find_method(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The method ``name`` of this class or of a same-module base class (breadth-first)."""
        if name in self.found:
            return self.found[name]
        method = self.found[name] = self._find_method(name)
        return method

    def _find_method(self, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for info in self.lineage():
            method = info.methods.get(name)
            if method is not None:
                return method
        return None

    def attr(self, name: str) -> Value | None:
        """What the instance attribute ``name`` holds: what this class's methods store into
        it, else what a same-module base class's do (an object of a subclass has the fields
        its base's ``__init__`` set); None when no class of the lineage stores into it."""
        for info in self.lineage():
            value = info.attrs.get(name)
            if value is not None:
                return value
        return None

    def lineage(self) -> Iterator[ClassInfo]:
        """This class, then its same-module base classes, breadth-first (each once, the order
        ``find_method`` and ``fixed_role`` look in)."""
        seen: set[int] = set()
        todo = [self]
        while todo:
            info = todo.pop(0)
            if id(info) in seen:
                continue
            seen.add(id(info))
            yield info
            todo.extend(info.bases)


@dataclass
class Frame:
    """Evaluation state of one function body (or of the module body)."""

    env: dict[str, Value]
    defs: dict[str, ast.expr]
    func: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    cls: ClassInfo | None = None
    self_name: str | None = None
    pinned: bool = False
    loops: list[ast.stmt] = field(default_factory=list)
    mutation_facts: list[frozenset[Fact]] = field(default_factory=list)
    #: each enclosing loop that pushed order facts onto ``mutation_facts``, with that entry
    #: (the same object), so that a store whose place does not follow the loop's order
    #: (``positional_loops``) can leave it out
    loop_orders: list[tuple[ast.stmt, frozenset[Fact]]] = field(default_factory=list)
    summary: Summary | None = None
    params: dict[str, int] = field(default_factory=dict)
    #: name -> constant key -> the subscript assignment that set it (``kwargs["k"] = v``),
    #: for dicts later splatted into a sink with ``**``
    dict_keys: dict[str, dict[str, ast.Subscript]] = field(default_factory=dict)
    #: ``ast.dump`` of an expression other than a name -> the message role an enclosing
    #: ``if`` tested it equal to (``if msgs[0]["role"] == "system":``)
    narrowed: dict[str, str] = field(default_factory=dict)
    #: local name of an object of unknown fields -> the facts it holds only because they were
    #: stored into one of its fields (``dia.kb_ids = ...``): a read of another of its fields
    #: (``dia.prompt``) does not take them (``Value`` of ``<name>.<field>`` in ``env`` holds
    #: each field's)
    field_added: dict[str, frozenset[Fact]] = field(default_factory=dict)
    #: True once this body called ``random.seed(x)`` with a value that holds no fact (a constant,
    #: a setting): the module-level ``random.*`` draws after it repeat on every run of the body
    seeded: bool = False
    #: the conditions on a parameter of the function (``Fact.when``) that the code being run
    #: needs: an enclosing ``if include_hour_min:`` or ``if not include_hour_min:`` branch, or
    #: one that returns or raises, for the rest of its block; innermost last
    branches: list[When] = field(default_factory=list)
    #: the index of each ``return`` in ``summary.returns`` run under ``branches`` -> those
    #: conditions (``branch_marked``)
    return_branches: dict[int, tuple[When, ...]] = field(default_factory=dict)

    #: a command-line entry point or a function defined in one
    #: (``Analyzer.runs_once_per_process``): what it makes outside loops is made once per
    #: process (``made_once``), though its prompts are not the global frozen layer (``once``)
    process: bool = False

    @property
    def once(self) -> bool:
        """Code here runs once (module level outside loops, ``__init__``, a cached function)."""
        return self.pinned and not self.loops

    @property
    def object_state(self) -> bool:
        """What code here stores into a field of ``self`` is the object's state, built once
        per object: an ``__init__``-like method, outside loops or inside ``for`` loops only
        (``for t in tools: self.ids[t] = uuid4().hex`` fills the field once, as a store outside
        the loop would); a ``while`` loop there may serve requests, so it is not."""
        return (
            self.pinned
            and self.cls is not None
            and self.func is not None
            and self.func.name in INIT_METHODS
            and all(isinstance(loop, (ast.For, ast.AsyncFor)) for loop in self.loops)
        )

    @property
    def made_once(self) -> bool:
        """What code here makes is made once: ``once``, or a command's body outside loops."""
        return (self.pinned or self.process) and not self.loops


def merge(a: Value, b: Value) -> Value:
    """Join two values of the same variable from different paths, keeping a common shape."""
    if a is b:
        return a
    # a path on which nothing is known of the value (``Session.from_dict(data)``, a call the
    # analysis does not follow) holds no fact in any field: beside an instance of a project
    # class of known fields built on the other path, each field holds what that instance put
    # there, and a time stamped into one field does not spread over the others
    for known, other in ((a, b), (b, a)):
        if known.items is not None and isinstance(known.ref, (ClassInfo, ExternalClass)):
            if other == CLEAN:
                return known
            if stamped_only(other):
                # nothing known there but what was stamped into its fields (a cached session
                # given ``session.last_used = time.monotonic()`` before it is returned): each
                # stays its field's, beside the fields of the instance built on the other path
                return replace(
                    known,
                    facts=known.facts | other.facts,
                    items=into_fields(known.items, other.facts),
                )
    shape = a.shape if a.shape is b.shape else Shape.UNKNOWN
    items = None
    if a.items is not None and b.items is not None and fields_known(a) and fields_known(b):
        # two dicts of known keys (``page = {...} if x else {...}``), two instances of project
        # classes whose fields are known (``self.helper`` set in ``__init__`` and again later;
        # ``[SystemMessage(content=...), AssistantMessage(content=..., took=...)]``), or one
        # such instance and one such dict (``[search_tool, {"name": ...}]``, read as
        # ``t.name if isinstance(t, Tool) else t["name"]``): each key or field holds what
        # either put there
        left, right = dict(a.items), dict(b.items)
        items = tuple(
            (
                key,
                merge(left[key], right[key])
                if key in left and key in right
                else left.get(key) or right[key],
            )
            for key in sorted(set(left) | set(right))
        )
    const = a.const if a.const == b.const else None
    ref = merged_ref(a.ref, b.ref)
    if shape is Shape.STR and const is None:
        ref = merged_texts(a, b) or ref
    return Value(
        keys_kept(a, items) | keys_kept(b, items),
        shape,
        const,
        a.elem_str and b.elem_str,
        a.name_key if a.name_key == b.name_key else "",
        ref,
        items=items,
        # a side whose elements were not tracked counts as a list of unknown fields only as
        # ``listed_elem`` says: ``conv.message = []`` on a record read from a database keeps
        # the fields of the messages appended to it
        elem=merge_elem(listed_elem(a), listed_elem(b))
        if a.elem is not None or b.elem is not None
        else None,
    )


def stamped_only(value: Value) -> bool:
    """True for a value of which nothing is known but the times or ids stored into its fields
    (``field_keyed``): a looked-up object stamped with ``session.last_used = now``."""
    return (
        bool(value.facts)
        and value.with_facts(frozenset()) == CLEAN
        and all(f.key[:1] and f.key[0].startswith(".") for f in value.facts)
    )


def keys_kept(value: Value, items: object = None) -> frozenset[Fact]:
    """``value``'s facts in a join whose keys are not known (``items`` None): where ``value``
    is a dict of known constant keys (``{"notes": "", "updated": now}`` returned on one path,
    a cached or loaded dict on another), each time or id it holds under a key is marked as
    that key's (``keyed``), so a read of another constant key of the joined value
    (``profile.get("notes")``) leaves it out; any other value's facts as they are."""
    if items is not None or value.items is None or value.shape is not Shape.DICT:
        return value.facts
    if not any(f.kind in KEYED_KINDS for f in value.facts):
        return value.facts
    under: set[Fact] = set()
    out: set[Fact] = set()
    for key, held in value.items:
        under |= held.facts
        out |= keyed(held.facts, (key,))
    # what the dict holds beside its entries (a computed key's, a condition's) stays whole
    return frozenset(out) | (value.facts - under)


@dataclass(frozen=True)
class KeyedBy:
    """``Value.ref`` of a dict built by a comprehension (``{key(c): i for i, c in ...}``):
    the facts that only its keys hold, which an entry looked up by a key (``d.get(k)``,
    ``d[k]``) does not hold: an id used as a lookup key is not in the value found."""

    facts: frozenset[Fact]


#: ``Value.elem`` of a list built empty (``[]``): no element yet, so no key is known either
NO_ELEM = Value(shape=Shape.DICT, items=())


def fields_known(value: Value) -> bool:
    """True when ``value`` is a dict of known keys or an object of a class we know, built with
    its fields known (``Value.items``), or either of them (a ``Choice`` with items, ``merge``)."""
    return value.items is not None and (
        value.shape is Shape.DICT or isinstance(value.ref, (ClassInfo, ExternalClass, Choice))
    )


def str_valued(value: Value) -> bool:
    """True when ``value`` is a dict of known keys (a literal, ``fields_known``) whose every
    value is a str (``{"groq": "Groq rules.", ...}``): an entry read at any key, or a
    ``.get(key, default)`` with a str default, is a str (a missing key raises or gives the
    default), so a str method of it (``.strip()``) returns what it holds."""
    return (
        value.shape is Shape.DICT
        and bool(value.items)
        and not isinstance(value.ref, (ClassInfo, ExternalClass, Choice))
        and all(held.shape is Shape.STR for _, held in value.items or ())
    )


def positions_known(value: Value) -> bool:
    """True when ``value`` is a tuple (or a list of fixed length) whose elements are known
    (``Value.elts``): a list of such pairs keeps each position apart."""
    return value.elts is not None and not value.more and value.items is None


def known_elem(value: Value) -> Value | None:
    """``value`` as an element of a list for ``Value.elem``: itself when of known fields or a
    tuple of known elements, ``NO_ELEM`` when it holds no fact at all (nothing it holds under
    any key can matter) or only facts that ``element_fields`` carries on every field (a tool's
    result got from the receiver's environment, a caller's message: whatever it holds under
    any key is no more than those, as ``listed_elem`` says of a list), else None."""
    if fields_known(value) or positions_known(value):
        return value
    return NO_ELEM if all(_on_every_field(f) for f in value.facts) else None


def with_every_field(value: Value, facts: frozenset[Fact]) -> Value:
    """``value`` with ``facts`` added to it, to each of its known fields and to each element
    of a tuple of known elements (and to that element's fields)."""
    if not facts:
        return value
    items = value.items
    if items is not None:
        items = tuple((k, v.with_facts(v.facts | facts)) for k, v in items)
    elts = value.elts
    if elts is not None:
        elts = tuple(with_every_field(e, facts) for e in elts)
    return replace(value, facts=value.facts | facts, items=items, elts=elts)


def _on_every_field(fact: Fact) -> bool:
    """Whether ``fact``, held by a list beside its elements' known fields, is carried on each
    field read of an element (``element_fields``): the list's own order and per-request
    choices (its order, a filter, a condition it was chosen by), a parameter (the caller's
    elements, of fields unknown here: the caller's argument takes its place), and what came
    through a call the analysis cannot see (an unproven fact, no finding by itself)."""
    return (
        fact.kind in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE, Kind.VARIES, Kind.LOOP, Kind.PARAM)
        or not fact.proven
    )


def listed_elem(listed: Value) -> Value | None:
    """``Value.elem`` of a list ``listed`` whose elements were not tracked: ``NO_ELEM`` when it
    holds no fact at all, or only facts that ``element_fields`` carries on every field (a list
    read from a database, a file, a store queried with the caller's id: whatever its
    elements hold under any key is no more than those), else its ``elem``."""
    if listed.elem is None and all(_on_every_field(f) for f in listed.facts):
        return NO_ELEM
    return listed.elem


def list_elem(values: list[Value], spread: tuple[bool, ...] = ()) -> Value | None:
    """``Value.elem`` of a list literal of ``values``: ``NO_ELEM`` when empty, None when one of
    them is not of known fields. ``spread`` says which of them are starred (``[system,
    *history]``): such a value stands for its list's elements (``listed_elem``), as the right
    side of ``[system] + history`` does."""
    out: Value | None = NO_ELEM
    for i, v in enumerate(values):
        out = merge_elem(out, listed_elem(v) if i < len(spread) and spread[i] else known_elem(v))
        if out is None:
            return None
    return out


def held_inside(elem: Value, depth: int = 0) -> set[Fact]:
    """The facts held in the known fields and positions of ``elem`` (a list's ``Value.elem``)
    and of theirs, a few levels down: what the elements hold, not the list's own order."""
    out: set[Fact] = set()
    for v in (*(v for _, v in elem.items or ()), *(elem.elts or ())):
        out |= v.facts
        if depth < 3:
            out |= held_inside(v, depth + 1)
    return out


def element_fields(listed: Value) -> Value | None:
    """One element of ``listed`` with its fields known (``Value.elem``), carrying the list's
    facts of ``_on_every_field`` that no known field holds on every field, or None when the
    list holds another fact that none of its known elements' fields holds (something stored
    into it some other way)."""
    elem = listed.elem
    if elem is None or elem is NO_ELEM or listed.items is not None:
        return None
    extra = listed.facts - elem.facts - held_inside(elem)
    if not all(_on_every_field(f) for f in extra):
        return None
    return with_every_field(elem, extra)


#: shapes of builtin values that hold no data attribute (``.context`` of one is no field)
_FIELDLESS = frozenset(
    {Shape.STR, Shape.NUM, Shape.DICT, Shape.SET, Shape.UNORDERED_LIST, Shape.LIST}
)


def yielded_elem(yielded: list[Value]) -> Value | None:
    """``Value.elem`` of a generator whose ``yield`` expressions give ``yielded``, so that a
    field read of the loop variable of ``for step in gen()`` takes only what was put into that
    field: the yielded objects of known fields merged field by field (or, where it yields no
    such object, its dicts of known keys), None when there is none; a yielded builtin value
    with no data attribute (a status string or dict, a number, a list) adds its facts to the
    element read whole only. What any other yielded value holds is left to
    ``element_fields``: on every field when a parameter's or unproven, else the element is
    read whole."""
    objects = [
        v for v in yielded if fields_known(v) and isinstance(v.ref, (ClassInfo, ExternalClass))
    ]
    fielded = objects or [v for v in yielded if fields_known(v)]
    out: Value | None = NO_ELEM
    whole: frozenset[Fact] = frozenset()
    for v in yielded:
        if any(v is f for f in fielded):
            out = merge_elem(out, v)
            if out is None:
                return None
        elif v.shape in _FIELDLESS:
            whole |= v.facts
    if out is None or out is NO_ELEM:
        return None
    return out.with_facts(out.facts | whole) if whole else out


def merge_elem(a: Value | None, b: Value | None) -> Value | None:
    """``Value.elem`` of a list holding the elements ``a`` and ``b`` describe: their fields
    merged key by key, or None (elements of unknown fields) when either is unknown or they are
    not of one kind (``NO_ELEM``, a list with no element, takes the other's)."""
    if a is None or b is None:
        return None
    if a is NO_ELEM:
        return b
    if b is NO_ELEM:
        return a
    if positions_known(a) and positions_known(b):
        # tuples of known elements (``(step, result)`` pairs): position by position
        assert a.elts is not None and b.elts is not None
        if len(a.elts) != len(b.elts):
            return None
        return Value(
            a.facts | b.facts,
            a.shape if a.shape is b.shape else Shape.UNKNOWN,
            elts=tuple(merge(x, y) for x, y in zip(a.elts, b.elts, strict=True)),
        )
    out = merge(a, b)
    return out if fields_known(out) else None


class EngineState:
    """What the mixins of ``taint.Analyzer`` rely on (declarations for type checkers only)."""

    if TYPE_CHECKING:
        #: calls written as a tool call's arguments text: the value of an ``"arguments"`` key
        #: of a dict literal or of an ``arguments=`` keyword (OpenAI's function-call shape,
        #: https://platform.openai.com/docs/api-reference/chat/create, checked 2026-12-03),
        #: noted as the dict or call holding them is evaluated
        argument_calls: set[ast.Call]
        tree: ast.Module
        imports: dict[str, str]
        functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
        classes: dict[str, ClassInfo]
        extra_sinks: tuple[SinkSpec, ...]
        frame: Frame
        module_frame: Frame
        entries: list[PrefixEntry]
        closures: dict[ast.AST, Frame]
        enclosing: dict[ast.AST, Frame]
        method_class: dict[ast.AST, ClassInfo]
        field_stores: dict[str, dict[str, frozenset[Fact]]]
        module: str
        unsent: frozenset[str]
        message_classes: set[str]
        breakpoint_calls: list[tuple[ast.Call, ast.expr, str]]
        handed_turns: list[HandedTurn]
        recording: bool
        sink_call: ast.Call | None
        relevant: Callable[[ast.AST], bool]
        #: ``library.fixed_names`` of the module, once a draw asks for it
        fixed: tuple[dict[str, Shape], frozenset[str]] | None

        def _collect(self, body: list[ast.stmt]) -> None: ...
        def absolute_module(self, module: str | None, level: int) -> str | None: ...
        def exec_block(self, body: list[ast.stmt]) -> None: ...
        def eval(self, node: ast.expr) -> Value: ...
        def fact(self, kind: Kind, node: ast.AST, detail: str, **kwargs: object) -> Fact: ...
        def record(self, region: str, value: Value, node: ast.AST, label: str) -> None: ...
        def skipped_unrecorded(self) -> None: ...
        def varying_key_order(
            self, node: ast.AST, dumped: Value
        ) -> tuple[str, tuple[int, int]] | None: ...
        def add_sink(self, sink: SinkCall) -> None: ...
        def runtime_test(
            self, test: ast.expr, value: Value, own: frozenset[str] = frozenset()
        ) -> bool: ...
        def summary(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> Summary: ...
        def mark_builder(
            self, func: ast.FunctionDef | ast.AsyncFunctionDef, label: str
        ) -> None: ...
        def lookup(self, name: str) -> Value: ...
        def few_choice(self, node: ast.Call, first: Value) -> Shape | None: ...
        def drawn_again(self, node: ast.Call) -> bool: ...
        def picked_whole(self, node: ast.Call, pool: Value) -> Value | None: ...
        def qualify(self, node: ast.expr) -> str | None: ...
        def annotated_class(self, annotation: ast.expr | None) -> object: ...
        def assign(self, target: ast.expr, value: Value, expr: ast.expr | None) -> None: ...
        def with_mutation_facts(self, value: Value) -> Value: ...
        def joined(self, value: Value, holder: ast.expr) -> Value: ...
        def mutate(
            self, holder: ast.expr, added: Value, target: ast.expr | None = None
        ) -> None: ...
        def note_store(self, holder: ast.Name, added: Value, attr: str = "") -> None: ...
        def self_attr_facts(self, self_name: str, attr: str) -> frozenset[Fact]: ...
        def external(self, qual: str, carries: bool = False) -> object: ...

        externals: Mapping[str, object]

        def eval_call(self, node: ast.Call) -> Value: ...
        def qualified_call(
            self, qual: str, node: ast.Call, args: list[Value], kwargs: dict[str | None, Value]
        ) -> Value | None: ...
        def json_dumps(self, node: ast.Call, first: Value) -> Value: ...
        def handle_sink(self, spec: SinkSpec, node: ast.Call) -> Value: ...
        def http_post(self, node: ast.Call) -> Value | None: ...
        def keyword_argument(
            self,
            spec: SinkSpec,
            sink: SinkCall,
            name: str,
            value: ast.expr,
            label: str,
            at: ast.expr | None = None,
        ) -> None: ...
        def assigned_value(self, target: ast.Subscript) -> ast.expr | None: ...
        def drop_uncached(self, sink: SinkCall, first_entry: int) -> None: ...
        def attribute_source(self, node: ast.Attribute, qual: str) -> Value: ...
        def attribute_of(self, base: Value, node: ast.Attribute) -> Value: ...
        def property_read(self, value: Value, node: ast.Attribute) -> Value: ...
        def formatted_as(self, value: Value, fmt: Value) -> Value: ...
        def regranulate(self, value: Value, fmt: str | None) -> Value: ...
        def stringify(self, value: Value, node: ast.AST) -> Value: ...
        def iteration_fact(self, iterable: Value, node: ast.expr) -> Fact | None: ...
        def element_of(self, iterable: Value) -> Value: ...
        def record_message_content(self, content: ast.expr, label: str) -> None: ...
        def branch_param(self, test: ast.expr) -> When | None: ...
        def role_tests(self, test: ast.expr) -> list[tuple[ast.expr, str]]: ...
        def const_role(self, node: ast.expr) -> str | None: ...
        def formatted(self, part: ast.FormattedValue) -> Value: ...
        def flatten(
            self, node: ast.expr, depth: int = 0, known: Value | None = None
        ) -> list[tuple[ast.AST, Value]]: ...
        def deref(self, node: ast.expr) -> tuple[ast.expr, Frame]: ...
        def note_handed_turns(
            self,
            summary: Summary,
            arg_values: dict[int, tuple[Value, ast.expr | None]],
            node: ast.Call,
        ) -> None: ...
        def walk_region(
            self,
            kind: str,
            expr: ast.expr,
            sink: SinkCall | None,
            label: str,
            at: ast.expr | None = None,
        ) -> None: ...


def _set_expr(node: ast.expr) -> tuple[int, int, str] | None:
    """Where a set ``node`` is made and how it is written, for ``set_values_birth``:
    ``set()``, ``set(x)``, ``frozenset(...)``, a set comprehension or a set display (not one
    of numbers only or of one element, in one order in every process). None for anything
    else."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in ("set", "frozenset"):
            return node.lineno, node.col_offset, f"{node.func.id}()"
        return None
    if isinstance(node, ast.SetComp):
        return node.lineno, node.col_offset, "a set comprehension"
    if isinstance(node, ast.Set) and len(node.elts) > 1:
        if all(
            isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) for e in node.elts
        ):
            return None
        return node.lineno, node.col_offset, "a set literal"
    return None


def _set_values_in(scope: ast.AST) -> dict[str, tuple[int, int, str]]:
    """Per dict text (``self.by_scope``, ``groups``), the first set stored as one of its
    values in ``scope``: ``text.setdefault(k, set())``, ``text[k] = set()`` (or any set
    ``_set_expr`` takes) or ``text = defaultdict(set)``. A text with none is absent. One
    walk of ``scope`` answers every text (the first node in ``ast.walk``'s order that
    stores a set, and within an assignment its first target that does)."""
    out: dict[str, tuple[int, int, str]] = {}
    for node in all_nodes(scope):  # ``ast.walk``'s order
        if isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "setdefault"
                and len(node.args) == 2
            ):
                found = _set_expr(node.args[1])
                if found is not None:
                    out.setdefault(ast.unparse(node.func.value), found)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            here: dict[str, tuple[int, int, str]] = {}
            for target in targets:
                if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Slice):
                    found = _set_expr(node.value)
                    if found is not None:
                        here.setdefault(ast.unparse(target.value), found)
                if (
                    isinstance(node.value, ast.Call)
                    and node.value.args
                    and isinstance(node.value.args[0], ast.Name)
                    and node.value.args[0].id in ("set", "frozenset")
                    and ast.unparse(node.value.func) in ("defaultdict", "collections.defaultdict")
                ):
                    arg = node.value.args[0]
                    here.setdefault(
                        ast.unparse(target), (arg.lineno, arg.col_offset, f"{arg.id}()")
                    )
            for text, found in here.items():
                out.setdefault(text, found)
    return out


def set_values_birth(holder: ast.expr, frame: Frame) -> tuple[int, int, str] | None:
    """Where the sets are made that the dict ``holder`` holds as its values: a local of the
    function or a field of our own object (``self.by_scope``, filled by any method of the
    class) given a set under a key (``_set_values_in``). Iterating one of its values
    (``for name in self.by_scope.get(scope, ())``) then gives a set's order, which for
    strings changes with each process's hash seed. None for any other holder."""
    if isinstance(holder, ast.Name) and frame.func is not None and holder.id != frame.self_name:
        scope: ast.AST = frame.func
    elif (
        isinstance(holder, ast.Attribute)
        and isinstance(holder.value, ast.Name)
        and holder.value.id == frame.self_name
        and frame.cls is not None
    ):
        scope = frame.cls.node
    else:
        return None
    text = ast.unparse(holder)
    if isinstance(holder, ast.Attribute):
        text = f"self.{holder.attr}"
    known: dict[str, tuple[int, int, str]] | None = scope.__dict__.get("_set_values")
    if known is None:
        known = scope.__dict__["_set_values"] = _set_values_in(scope)
    return known.get(text)
