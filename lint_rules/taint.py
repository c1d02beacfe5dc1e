"""The taint engine: follows volatile values through one module to the cached prefix.

Scope: one module at a time (intra-module), flow-sensitive within a function body, no
fixed point over loops. It follows assignments (names, tuples, instance attributes
``self.x``), f-strings, ``+``, ``%``, ``.format``, ``str.join``, ``textwrap.dedent``,
``string.Template``, container literals and comprehensions, and the return values of functions
and methods defined in the same module (through per-function summaries, computed once).

Per-request vs once: a source evaluated at module level outside loops, in a class body, in
``__init__``-like methods or in a ``functools.cache`` function is *pinned* (computed once per
process or session); its TIME/UNIQUE facts then no longer count as volatile.

Functions whose source has none of the trigger words (``relevant``) are analysed only when a
relevant function calls them. ``__init__``-like methods are analysed before the other methods of
their class, so what ``self.<attr>`` holds is known when the methods read it. Everything the
rules need is returned as ``PrefixEntry`` and ``SinkCall`` lists (see ``events.py``).
"""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from .analysis.exports import (
    exportable_value,
    fact_to_json,
    local_class_names,
    summary_to_json,
    value_to_json,
)
from .calls import CallsMixin, Unresolved, called_name, converted_classes
from .conversations import held_companions
from .events import HandedTurn, PrefixEntry, SinkCall
from .exprs import ExprsMixin
from .facts import (
    ASSUMED,
    CLEAN,
    ONCE,
    OVERRIDE,
    PINNABLE,
    SELF,
    Fact,
    Kind,
    Shape,
    Value,
    assumed,
    branch_marked,
    entry_key,
    entry_suffix,
    held_once,
    join,
    map_facts,
    method_result,
    replace,
)
from .frames import (
    INIT_METHODS,
    Bound,
    ClassInfo,
    ExternalClass,
    Frame,
    Summary,
    fields_known,
    is_abstract,
    keys_kept,
    merge,
    stamped_only,
    yielded_elem,
)
from .http_sinks import HttpSinksMixin
from .library import FEW_CONSTANTS, FEW_STRINGS, LibraryMixin, fixed_names
from .regions import RegionsMixin, sent_tools
from .session import configuration_label, escaping, pin_ids, reused_in_loops
from .sinks import SinkSpec
from .statements import StatementsMixin, holds_no_object, merge_field

BUILTIN_NAMES = frozenset(dir(builtins))
#: what another module of the program exports under a qualified name: a function's summary,
#: a class, or a module-level value
External = Summary | ExternalClass | Value
CACHE_DECORATORS = frozenset({"cache", "lru_cache", "cached_property", "cached"})
#: decorators that register a command-line entry point (``Analyzer.runs_once_per_process``)
_CLI_DECORATORS = frozenset({"click.command", "click.group"})
#: calls that make a command-line app whose ``.command()``/``.callback()`` register entry points
_CLI_APPS = frozenset({"typer.Typer", "typer.main.Typer", "click.Group", "click.core.Group"})


#: words of identifiers that name per-request or per-turn state (a condition on them can change
#: between the requests of one session)
_PER_REQUEST_WORDS = frozenset(
    {
        "question",
        "query",
        "prompt",
        "message",
        "messages",
        "msg",
        "msgs",
        "history",
        "input",
        "inputs",
        "text",
        "content",
        "turn",
        "turns",
        "step",
        "steps",
        "attempt",
        "attempts",
        "retry",
        "retries",
        "iteration",
        "round",
        "request",
        "req",
        "conversation",
        "utterance",
        "tokens",
        "usage",
        "reply",
        "response",
    }
)

#: last words of a name that count something of what the words before it name (``turn_count``,
#: ``message_index``): per-turn state when those words are
_COUNTER_WORDS = frozenset({"count", "index", "idx", "number", "num", "len", "length", "size"})

#: first words of a name that bound what the words after it name (``max_tokens``, ``min_turns``):
#: a limit set for the call, not the state it limits
_BOUND_WORDS = frozenset({"max", "min", "maximum", "minimum"})

#: first words of a name that say it is the system's part of the prompt (``system_prompt``,
#: ``sys_msg``): the instructions the session is configured with, not a turn's input
_SYSTEM_WORDS = frozenset({"system", "sys"})


def names_per_request_state(name: str) -> bool:
    """True when an identifier names per-turn state: its last word (the head of an English
    compound: ``user_question`` is a question, ``response_type`` a type) is one of
    ``_PER_REQUEST_WORDS``, or a counter of one (``turn_count``). A setting named after the
    request (``response_type``, ``response_schema``, ``message_format``) is fixed per call
    site, not per turn, and so is a bound on the state (``max_tokens``, ``max_turns``: its
    first word is ``max`` or ``min``), a limit the caller sets, and the system's part of the
    prompt (``system_prompt``, ``sys_msg``: its first word is ``system`` or ``sys``), the
    instructions the session is configured with (a system prompt that does change carries
    the volatile value that changes it).

    >>> [names_per_request_state(n) for n in ("question", "num_turns", "turn_count")]
    [True, True, True]
    >>> [names_per_request_state(n) for n in ("response_type", "response_schema", "tools")]
    [False, False, False]
    >>> [names_per_request_state(n) for n in ("max_tokens", "used_tokens", "min_turns")]
    [False, True, False]
    >>> [names_per_request_state(n) for n in ("system_prompt", "sys_msg", "user_prompt")]
    [False, False, True]
    """
    words = [w for w in name.lower().split("_") if w]
    if not words or (len(words) > 1 and words[0] in _BOUND_WORDS | _SYSTEM_WORDS):
        return False
    if words[-1] in _PER_REQUEST_WORDS:
        return True
    return words[-1] in _COUNTER_WORDS and any(w in _PER_REQUEST_WORDS for w in words[:-1])


_ANNOTATION_SHAPES = {
    "str": Shape.STR,
    "int": Shape.NUM,
    "float": Shape.NUM,
    "dict": Shape.DICT,
    "Dict": Shape.DICT,
    "Mapping": Shape.DICT,
    "set": Shape.SET,
    "frozenset": Shape.SET,
    "Set": Shape.SET,
    "list": Shape.LIST,
    "List": Shape.LIST,
}


#: a text's pieces in order (``PrefixEntry.parts``)
Pieces = tuple[tuple[ast.AST, bool, int | None, frozenset[Fact]], ...]


def _pieces(flat: Iterable[tuple[ast.AST, Value]]) -> Pieces:
    """Each piece as (node, varies per call, length when constant, its facts)."""
    return tuple(
        (n, v.dynamic, len(v.const) if v.const is not None else None, v.facts) for n, v in flat
    )


def _annotated_shape(annotation: ast.expr | None) -> Shape:
    """The shape a parameter annotation promises (``str``, ``dict[str, int]``, ...)."""
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    if isinstance(annotation, ast.Attribute):
        return _ANNOTATION_SHAPES.get(annotation.attr, Shape.UNKNOWN)
    if isinstance(annotation, ast.Name):
        return _ANNOTATION_SHAPES.get(annotation.id, Shape.UNKNOWN)
    return Shape.UNKNOWN


#: decorators that register a function as system text (pydantic-ai's ``@agent.system_prompt``
#: and ``@agent.instructions``): what it returns is recorded as system text
_PROMPT_DECORATORS = frozenset({"system_prompt", "instructions"})


def _is_main_guard(stmt: ast.If) -> bool:
    """``if __name__ == "__main__":`` at module level."""
    test = stmt.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _called_once(body: list[ast.stmt]) -> set[str]:
    """The names of the functions called by name exactly once in ``body`` and not inside a
    loop, a comprehension or a nested definition there."""
    counts: dict[str, int] = {}
    looped: set[str] = set()

    def visit(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            counts[node.func.id] = counts.get(node.func.id, 0) + 1
            if in_loop:
                looped.add(node.func.id)
        loop = isinstance(
            node,
            (
                ast.For,
                ast.AsyncFor,
                ast.While,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        )
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or loop)

    for stmt in body:
        visit(stmt, False)
    return {name for name, n in counts.items() if n == 1 and name not in looped}


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    names = []
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute):
            names.append(target.attr)
        elif isinstance(target, ast.Name):
            names.append(target.id)
    return names


def _first_turn_prompt(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True for a function registered with ``@agent.system_prompt`` (or ``dynamic=False``):
    pydantic-ai runs it when a conversation starts, with no message history, and keeps its
    text in the history for the later runs (``Agent.system_prompt``'s ``dynamic``: "If True,
    the system prompt will be reevaluated even when ``messages_history`` is provided"), so
    what it computes is made once per conversation. ``dynamic=True`` (or not a constant)
    runs it on every run."""
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if not (isinstance(target, ast.Attribute) and target.attr == "system_prompt"):
            continue
        dynamic = (
            next((kw.value for kw in dec.keywords if kw.arg == "dynamic"), None)
            if isinstance(dec, ast.Call)
            else None
        )
        return dynamic is None or (isinstance(dynamic, ast.Constant) and dynamic.value is False)
    return False


def _joined_position(values: list[Value]) -> Value:
    """One position of the tuples a function returns on its paths, joined: a ``None`` (or
    ``True``/``False``) on some paths holds nothing, so where one value is left beside them
    it keeps its structure (``return None, error`` and ``return (messages, msg), None``: the
    caller unpacks the message lists with their elements' fields)."""
    held = [v for v in values if not _literal_none(v)]
    if len(held) == 1:
        return held[0]
    if held and all(v.items is not None and v.shape is Shape.DICT for v in held):
        # dicts of known keys at this position on every path (``return {}, []`` and
        # ``return fields, [log]``): each key holds what any put there, as for a lone return
        return functools.reduce(merge, held)
    return join(*values)


def _yielded(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """``id``s of the values of ``func``'s own ``yield`` expressions (not those of a function
    or lambda nested in it); empty for a ``@contextmanager``, whose one yield is what
    ``with`` binds, not what a loop iterates. Found once per tree (kept on the node: trees
    are kept for later analyses of the file)."""
    known: set[int] | None = func.__dict__.get("_yielded")
    if known is not None:
        return known
    out: set[int] = set()
    func.__dict__["_yielded"] = out
    if any("contextmanager" in name for name in _decorator_names(func)):
        return out
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
            out.add(id(node.value))
        todo.extend(ast.iter_child_nodes(node))
    return out


def _literal_none(value: Value) -> bool:
    return (
        value.ref == "literal"
        and value.shape is Shape.UNKNOWN
        and not value.facts
        and value.elts is None
        and value.items is None
    )


def _unseen_rank(
    unseen: tuple[tuple[str, int, str, str], ...],
) -> tuple[bool, int, tuple[tuple[str, int, str, str], ...]]:
    """How the unseen steps of one unproven flow to a sink compare with another's (smaller is
    kept, as ``Fact.rank``): steps through no call the analysis cannot see first, then the
    fewer, then by the steps' (file, line, name, text)."""
    return assumed(unseen), len(unseen), tuple((p, line, n, t) for t, line, n, p in unseen)


def _reads_per_request_state(test: ast.expr, own: frozenset[str]) -> bool:
    """Whether ``test`` reads a name or attribute that names per-request state
    (``names_per_request_state``), not counting the names in ``own``.

    Of a chain of field reads only the field read last counts: ``llm_request.config.tools``
    reads the request's configured tools, fixed for the session, while ``request.messages``
    reads its messages. The object a method is called on still counts (``query.strip()``
    reads the query)."""
    through: set[int] = set()
    called: set[int] = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            called.add(id(node.func))
        elif isinstance(node, ast.Attribute) and id(node) not in called:
            through.add(id(node.value))
    for node in ast.walk(test):
        name = None
        if id(node) in through:
            continue
        if isinstance(node, ast.Name) and node.id not in own:
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        if name is not None and names_per_request_state(name):
            return True
    return False


class _Computed:
    """What one summary computed by the class pre-pass depended on (``_prepass_classes``):
    the fields of classes it read, as (class, table, attribute, value read), a store of the
    value a field already held counting as a read of it; the summaries it used, as
    (function, summary); and ``clean``: False once it met anything that makes it a summary
    to compute again (a store that changes a field, an event a recording pass keeps, a
    recursion cut); for a nested function, the frame it closed over."""

    __slots__ = ("clean", "closure", "reads", "uses")

    def __init__(self, closure: Frame | None) -> None:
        self.reads: list[tuple[ClassInfo, str, str, object]] = []
        self.uses: list[tuple[ast.AST, Summary]] = []
        self.clean = True
        #: for a function nested in another, the frame it closes over (``closures``)
        self.closure = closure


class _ReadLog(dict):  # type: ignore[type-arg]
    """A class's ``attrs`` or ``attr_defs`` table (``name``) while the pre-pass runs: each
    ``get`` is noted in the innermost summary being computed, and a store makes that summary
    one to compute again unless the field already held an equal value (``_stored``)."""

    __slots__ = ("info", "name", "track")

    def __init__(self, info: ClassInfo, name: str, track: list[_Computed]) -> None:
        super().__init__(getattr(info, name))
        self.info = info
        self.name = name
        self.track = track

    def get(self, key: str, default: Any = None) -> Any:
        value = dict.get(self, key, _MISSING)
        if self.track:
            self.track[-1].reads.append((self.info, self.name, key, value))
        return default if value is _MISSING else value

    def __setitem__(self, key: str, value: Any) -> None:
        if self.track:
            self._stored(key, value)
        dict.__setitem__(self, key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if self.track:
            self._stored(key, dict.get(self, key, default))
        return dict.setdefault(self, key, default)

    def _stored(self, key: str, value: Any) -> None:
        """``value`` stored under ``key`` by the innermost summary being computed. A value
        equal to the one the field holds counts as a read of it: computed again while the
        field holds it, the summary stores that value again and the table stays as it is
        (the value stored follows from what the summary read). Any other store makes the
        summary one to compute again."""
        old = dict.get(self, key, _MISSING)
        if old is not _MISSING and (old is value or old == value):
            self.track[-1].reads.append((self.info, self.name, key, old))
        else:
            self.track[-1].clean = False

    def update(self, *args: Any, **kwargs: Any) -> None:
        if self.track:
            self.track[-1].clean = False
        dict.update(self, *args, **kwargs)

    def pop(self, *args: Any) -> Any:
        if self.track:
            self.track[-1].clean = False
        return dict.pop(self, *args)


_MISSING = object()


class Analyzer(StatementsMixin, ExprsMixin, CallsMixin, LibraryMixin, RegionsMixin, HttpSinksMixin):
    """Walk one parsed module and collect ``PrefixEntry`` and ``SinkCall`` events.

    ``extra_sinks`` are user wrappers from config. Use ``run()`` once per instance.
    """

    def __init__(
        self,
        tree: ast.Module,
        extra_sinks: tuple[SinkSpec, ...] = (),
        segment: Callable[[ast.AST], bytes] | None = None,
        triggered: Callable[[bytes], bool] | None = None,
        module: str = "",
        is_package: bool = False,
        externals: Mapping[str, External] | None = None,
        sink_calls: Collection[bytes] = (),
        unsent: Collection[str] = (),
    ) -> None:
        self.tree = tree
        #: qualified names of the program's own message classes (or callables) that no module
        #: is seen to turn into request messages (``message_classes``, ``converts``): their
        #: objects of a literal system role are not taken as system text (``message_object``)
        self.unsent = frozenset(unsent)
        #: qualified names of what builds this module's message objects of a literal system
        #: role (exported as ``message_classes``)
        self.message_classes: set[str] = set()
        #: ``name(`` texts of other modules' functions whose arguments reach a sink (the
        #: program driver's reason to analyse a file without a trigger word)
        self.sink_calls = tuple(sink_calls)
        self.argument_calls: set[ast.Call] = set()
        self.module = module
        self.is_package = is_package
        self.externals: Mapping[str, External] = externals or {}
        #: qualified names this module uses that may be defined elsewhere in the program ->
        #: whether a value with facts was passed to them (what the program driver resolves)
        self.wanted: dict[str, bool] = {}
        #: class qualified name -> attribute -> order facts this module stores into that field
        #: of an instance (exported as ``field_stores``; the driver gives every reader of the
        #: class the union, ``ExternalClass.field_facts``)
        self.field_stores: dict[str, dict[str, frozenset[Fact]]] = {}
        #: calls of a function (of any module) that puts a cache breakpoint on an argument:
        #: (the call, that argument, the function's name), for PC018
        self.breakpoint_calls: list[tuple[ast.Call, ast.expr, str]] = []
        #: calls passing the history their client sent to a function that puts text made
        #: from the turn's input ahead of it (``RegionsMixin.note_handed_turns``)
        self.handed_turns: list[HandedTurn] = []
        self.unproven_memo = {}
        self.passed_memo = {}
        self.extra_sinks = extra_sinks
        self.segment = segment
        self.triggered = triggered
        self.relevant: Callable[[ast.AST], bool] = lambda node: True
        self.imports: dict[str, str] = {}
        self.fixed: tuple[dict[str, Shape], frozenset[str]] | None = None
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.method_class: dict[ast.AST, ClassInfo] = {}
        self.summaries: dict[ast.AST, Summary] = {}
        self.in_progress: set[ast.AST] = set()
        self.entries: list[PrefixEntry] = []
        self.sinks: list[SinkCall] = []
        self.recording = True
        #: the call whose arguments are being sent (a sink, or a function whose summary sends
        #: them): where a parameter recorded meanwhile is sent (``Summary.sink_lines``)
        self.sink_call: ast.Call | None = None
        #: while the class pre-pass runs: one ``_Computed`` per summary being computed,
        #: innermost last (empty otherwise)
        self._track: list[_Computed] = []
        #: summaries the class pre-pass computed that the recording pass may take instead of
        #: computing them again, with what each depended on (``_prepass_classes``, ``_take``)
        self._kept: dict[ast.AST, tuple[Summary, _Computed]] = {}
        #: the pre-pass's bookkeeping per summary it computed (None outside the pre-pass)
        self._computed: dict[ast.AST, _Computed] | None = None
        self.module_frame = Frame(env={}, defs={}, pinned=True)
        self.frame = self.module_frame
        self.closures: dict[ast.AST, Frame] = {}
        #: a nested function -> the frame of the function it is defined in (its parameters
        #: are that function's, ``enclosing_summary``)
        self.enclosing: dict[ast.AST, Frame] = {}
        #: module-level names of command-line apps, and of the functions the ``__main__`` guard
        #: calls once (``_entry_names``), found on first use
        self._entry_names_found: tuple[frozenset[str], frozenset[str]] | None = None

    # ------------------------------------------------------------------ driver

    def run(self) -> tuple[list[PrefixEntry], list[SinkCall]]:
        """Analyse the module; returns (prefix entries, sink calls).

        Order: the module body (class bodies included), the pre-pass over the methods of
        classes with a relevant method (``_prepass_classes``), then for each class with a relevant
        method its ``__init__``-like methods (so instance attributes are known), then every
        relevant function and method. Other functions are analysed only when something calls
        them (their summary is computed on demand).
        """
        self._collect(self.tree.body)
        self._close_relevance()
        self.exec_block(self.tree.body)
        self._prepass_classes()
        for info in self.classes.values():
            if any(self.relevant(m) for m in info.methods.values()):
                # a same-module base's ``__init__`` sets fields the subclass's methods read
                for base in info.lineage():
                    for method in base.methods.values():
                        if method.name in INIT_METHODS:
                            self.summary(method)
        for func in self.functions.values():
            if self.relevant(func):
                self.summary(func)
        for info in self.classes.values():
            for method in info.methods.values():
                if self.relevant(method):
                    self.summary(method)
        return self.entries, self.sinks

    def run_module_only(self) -> tuple[list[PrefixEntry], list[SinkCall]]:
        """The module body alone (imports, classes, module-level values), for a module that
        is analysed only to export summaries; functions are summarised on demand."""
        self._collect(self.tree.body)
        self.exec_block(self.tree.body)
        self._prepass_classes()
        return self.entries, self.sinks

    def _prepass_classes(self) -> None:
        """What instance attributes hold is known only once every method that stores into
        them has run (``connect()`` fills ``self.tools``, ``all_tools()`` returns it). So the
        methods of classes with a relevant method run once first, recording nothing; their
        summaries are then dropped and recomputed with the attributes complete. Every method
        runs, not only those that store into fields: the names a method looks up while it
        runs are what the program driver asks other modules to export, and findings elsewhere
        depend on those exports.

        A summary the recording pass would compute the same is kept for it instead: one whose
        run changed no field (a store of the value the field held counts as a read of it),
        recorded nothing (no prefix entry with facts, no sink call, no call of a function
        that marks a breakpoint) and met no recursion cut. When the recording pass asks for
        it, it is taken, with the kept summaries it used, if the fields it read hold equal
        values then, each summary it used is (or equals) the one there is then or is a kept
        one that holds too, and (for a nested function) the frame it closes over is equal
        (``_take``); a summary it used that the recording pass has not computed yet and that
        was not kept makes it one to compute again."""
        classes = list(
            dict.fromkeys(
                base
                for info in self.classes.values()
                if any(self.relevant(m) for m in info.methods.values())
                # a subclass's methods read what its same-module bases' methods store
                for base in info.lineage()
            )
        )
        if not classes:
            return
        before = set(self.summaries)
        tables = list(self.classes.values())
        for info in tables:
            info.attrs = _ReadLog(info, "attrs", self._track)
            info.attr_defs = _ReadLog(info, "attr_defs", self._track)
        computed: dict[ast.AST, _Computed] = {}
        self._computed = computed
        self.recording = False
        try:
            for info in classes:
                methods = sorted(info.methods.values(), key=lambda m: m.name not in INIT_METHODS)
                for method in methods:
                    self.summary(method)
        finally:
            self.recording = True
            self._computed = None
            self._track.clear()
            for info in tables:
                info.attrs = dict(info.attrs)
                info.attr_defs = dict(info.attr_defs)
        for key in set(self.summaries) - before:
            summary = self.summaries.pop(key)
            done = computed[key]
            if done.clean:
                self._kept[key] = (summary, done)

    def _take(self, func: ast.AST) -> Summary | None:
        """The pre-pass's summary of ``func`` (``_kept``) when computing it now would give
        it again: the fields it read hold equal values now, and each summary it used is the
        one there is now, or equal to it (a summary computed again the same), or is such a
        kept summary too (then taken with it). None, and nothing taken, otherwise."""
        taking: dict[ast.AST, Summary] = {}
        if not self._still_holds(func, taking):
            self._kept.pop(func, None)
            return None
        for key, summary in taking.items():
            del self._kept[key]
            self.summaries[key] = summary
        return taking[func]

    def _still_holds(self, func: ast.AST, taking: dict[ast.AST, Summary]) -> bool:
        if func in taking:
            return True
        kept = self._kept.get(func)
        if kept is None:
            return False
        summary, done = kept
        then = done.closure
        if then is not None:
            # a nested function: computed again, it would close over the frame there is now
            frame = self.closures.get(func)
            if frame is not then and (
                frame is None
                or frame.cls is not then.cls
                or frame.self_name != then.self_name
                or frame.env != then.env
                or frame.defs != then.defs
            ):
                return False
        for info, name, key, value in done.reads:
            now = dict.get(getattr(info, name), key, _MISSING)
            if now is not value and (now is _MISSING or value is _MISSING or now != value):
                return False
        taking[func] = summary
        for use, used in done.uses:
            have = self.summaries.get(use)
            if have is None:
                if not self._still_holds(use, taking):
                    return False
                have = taking[use]
            if have is not used and have != used:
                return False
        return True

    def export(self, requests: Collection[str], path: str) -> dict[str, Any]:
        """This module's exports for the program driver (see ``analysis.exports``): the
        symbols in ``requests``, every function or method whose arguments reach a sink, and the
        names its imports bind."""
        functions: dict[str, Any] = {}
        classes: dict[str, Any] = {}
        values: dict[str, Any] = {}
        missing: list[str] = []
        wanted_classes = set()
        for name, func in self.functions.items():
            summary = self.summaries.get(func)
            if name in requests or (
                summary is not None and (summary.param_sinks or summary.attr_sinks)
            ):
                functions[name] = summary_to_json(self.summary(func), path)
        for name, info in self.classes.items():
            if name in requests or any(
                (s := self.summaries.get(m)) is not None and (s.param_sinks or s.attr_sinks)
                for m in info.methods.values()
            ):
                wanted_classes.add(name)
        # a class of this module that an exported function returns an instance of
        # (``make_store()`` returning ``Store(...)``): the importer calls its methods on what
        # the function returned, so the driver looks the class up too (``_class_refs``)
        for data in functions.values():
            wanted_classes.update(n for n in local_class_names(data["ret"]) if n in self.classes)
        todo = sorted(wanted_classes)
        while todo:
            info = self.classes[todo.pop()]
            for func in info.methods.values():
                for n in local_class_names(summary_to_json(self.summary(func), path)["ret"]):
                    if n in self.classes and n not in wanted_classes:
                        wanted_classes.add(n)
                        todo.append(n)
        for name in sorted(wanted_classes):
            info = self.classes[name]
            methods = sorted(info.methods.items(), key=lambda kv: kv[0] not in INIT_METHODS)
            classes[name] = {
                "methods": {m: summary_to_json(self.summary(f), path) for m, f in methods},
                "default_repr": info.default_repr,
            }
            role = info.fixed_role()
            if role:
                classes[name]["role"] = role
            # what the driver needs to find the overrides of an abstract method in the
            # program's subclasses (``Program._overrides``)
            bases = [b for b in map(self._base_name, info.node.bases) if b is not None]
            if bases:
                classes[name]["bases"] = bases
            abstract = sorted(m for m, f in info.methods.items() if is_abstract(f))
            if abstract:
                classes[name]["abstract"] = abstract
        for name in requests:
            if name in functions or name in classes:
                continue
            value = self.module_frame.env.get(name)
            if value is not None and exportable_value(value):
                values[name] = value_to_json(value.pinned(), path, lambda key: False)
            elif value is not None and (few := self.fixed_few(name)) is not None:
                # a name bound once to few constants: what ``few_choice`` of an importer reads
                ref = FEW_STRINGS if few is Shape.STR else FEW_CONSTANTS
                values[name] = {"facts": [], "shape": Shape.UNKNOWN.value, "ref": ref}
            elif name not in self.imports:
                missing.append(name)
        out: dict[str, Any] = {"aliases": dict(self.imports)}
        for key, table in (("functions", functions), ("classes", classes), ("values", values)):
            if table:
                out[key] = table
        if missing:
            out["missing"] = sorted(missing)
        if self.message_classes:
            out["message_classes"] = sorted(self.message_classes)
        converts = converted_classes(self.tree, self.module, self.classes, self.imports)
        if converts:
            out["converts"] = converts
        if self.field_stores:
            out["field_stores"] = {
                cls: {
                    attr: sorted((fact_to_json(f, path) for f in facts), key=repr)
                    for attr, facts in sorted(fields.items())
                }
                for cls, fields in sorted(self.field_stores.items())
            }
        return out

    def fixed_few(self, name: str) -> Shape | None:
        """The ``few_constant_choice`` shape of a module-level name bound once to a display
        of few constants and never changed (``library.fixed_names``), else None."""
        if self.fixed is None:
            self.fixed = fixed_names(self.tree)
        return self.fixed[0].get(name)

    def _base_name(self, node: ast.expr) -> str | None:
        """How a class's base class is named for the driver: ``@Name`` for a class of this
        module, its qualified name for an imported one, None for anything else."""
        if isinstance(node, ast.Name) and node.id in self.classes:
            return f"@{node.id}"
        qual = self.qualify(node)
        if qual is None or qual.startswith("builtins."):
            return None
        return qual

    def _close_relevance(self) -> None:
        """A function is relevant when its text holds a trigger word or a call of another
        module's sink function (``sink_calls``); functions that call a relevant function are
        relevant too (a volatile argument can flow into its sink), to a fixed point; a
        relevant ``__init__``, ``__new__`` or ``__call__`` is called by its class's name."""
        segment, triggered = self.segment, self.triggered
        if segment is None or triggered is None:
            return
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = list(self.functions.values())
        for info in self.classes.values():
            functions.extend(info.methods.values())
        texts = {f: segment(f) for f in functions}
        sink_calls = self.sink_calls
        # a sink function imported under another name (``import chat as ask``, found by its
        # text ``chat as ``): its calls are written with that name
        aliased = {c[: -len(b" as ")].decode() for c in sink_calls if c.endswith(b" as ")}
        if aliased:
            sink_calls = (
                *sink_calls,
                *(
                    f"{local}(".encode()
                    for local, qual in self.imports.items()
                    if qual.rsplit(".", 1)[-1] in aliased and local not in aliased
                ),
            )
        flags = {
            f: triggered(text)
            or any(call in text for call in sink_calls)
            # registered as a prompt by a decorator, on a line before the function's own
            or bool(_PROMPT_DECORATORS.intersection(_decorator_names(f)))
            for f, text in texts.items()
        }
        # to a fixed point: each round looks only for calls of the functions found relevant
        # in the round before (one already searched for matches no other function later)
        found = [f for f, on in flags.items() if on]
        while found and not all(flags.values()):
            calls = [f"{f.name}(".encode() for f in found]
            # a class is called by its own name: ``Job(stamp)`` runs ``Job.__init__`` (and a
            # function that makes a callable object often calls it there, ``Job()(stamp)``)
            calls += [
                f"{self.method_class[f].node.name}(".encode()
                for f in found
                if f.name in ("__init__", "__new__", "__call__") and f in self.method_class
            ]
            found = []
            for func, on in flags.items():
                if not on and any(call in texts[func] for call in calls):
                    found.append(func)
            for func in found:
                flags[func] = True
        self.relevant = lambda node: flags.get(node, True)  # type: ignore[call-overload]

    def _collect(self, body: list[ast.stmt]) -> None:
        """Imports, functions and classes at module level (also inside if/try blocks)."""
        for stmt in body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.imports[root] = root
            elif isinstance(stmt, ast.ImportFrom):
                base = self.absolute_module(stmt.module, stmt.level)
                if base is None:
                    continue
                for alias in stmt.names:
                    if alias.name != "*":
                        self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                methods = {
                    s.name: s
                    for s in stmt.body
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
                info = ClassInfo(stmt, methods)
                for base_node in stmt.bases:
                    local = (
                        self.classes.get(base_node.id) if isinstance(base_node, ast.Name) else None
                    )
                    if local is not None:
                        info.bases.append(local)
                info.default_repr = (
                    not stmt.decorator_list
                    and not stmt.keywords
                    and all(isinstance(b, ast.Name) and b.id == "object" for b in stmt.bases)
                    and not ({"__repr__", "__str__", "__format__"} & set(methods))
                )
                self.classes[stmt.name] = info
                for method in methods.values():
                    self.method_class[method] = info
            elif isinstance(stmt, ast.If):
                self._collect(stmt.body)
                self._collect(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                self._collect(stmt.body)
                for handler in stmt.handlers:
                    self._collect(handler.body)
                self._collect(stmt.orelse)

    def absolute_module(self, module: str | None, level: int) -> str | None:
        """The absolute name of ``from <level dots><module> import ...`` in this module, or
        None when it climbs above the top-level package (or this module's name is unknown)."""
        if not level:
            return module
        if not self.module:
            return None
        parts = self.module.split(".")
        if not self.is_package:
            parts = parts[:-1]
        if level - 1 > len(parts) or (level - 1 == len(parts) and not module):
            return None
        parts = parts[: len(parts) - (level - 1)]
        if module:
            parts.append(module)
        return ".".join(parts) if parts else None

    def external(self, qual: str, carries: bool = False) -> External | None:
        """What another module exports under ``qual`` (None if unknown yet); notes the use,
        so the program driver can supply it on the next pass."""
        if qual.startswith("builtins."):
            return None
        self.wanted[qual] = self.wanted.get(qual, False) or carries
        return self.externals.get(qual)

    # ------------------------------------------------------------------ facts and events

    def fact(self, kind: Kind, node: ast.AST, detail: str, **kwargs: object) -> Fact:
        """A new fact born at ``node`` in the current frame (pinned where code runs once)."""
        return Fact(
            kind,
            getattr(node, "lineno", 0),
            getattr(node, "col_offset", 0),
            detail,
            # a command's environment values are not taken as the global frozen layer (PC017)
            pinned=self.frame.once or (kind in PINNABLE and self.frame.made_once),
            **kwargs,  # type: ignore[arg-type]
        )

    def record(self, region: str, value: Value, node: ast.AST, label: str) -> None:
        """A value enters a prefix region (or the tail, which is not recorded). A tool object
        of an agent SDK enters the tools region with only what its SDK sends of it
        (``regions.sent_tools``)."""
        if region == "tools":
            value = sent_tools(value, self.module)
        own = self.frame.summary
        if own is not None and value.facts:
            key = id(self.frame.func)
            for f in value.facts:
                if f.kind is not Kind.PARAM:
                    continue
                if f.fix != (key,):
                    # a parameter of an enclosing function, sent by a function nested in it
                    # (``def get_generator(): return service.send(messages)``): the
                    # enclosing function sends it where it calls this one (``call_bound``)
                    if f.param >= 0 and self.encloses(f) and (f, region, label) not in own.outer:
                        own.outer.append((f, region, label))
                    continue
                summary = own
                # what of it: its contents without its order ("~sorted"), or its order only
                # ("~order": a list built by iterating it)
                grain = f"~{f.granularity}" if f.granularity in ("sorted", "order", ONCE) else ""
                method = method_result(f.detail) if f.param >= 0 else None
                if f.param == SELF and f.detail.startswith("self."):
                    name = f.detail[len("self.") :] + grain
                    sinks = summary.attr_sinks.setdefault(name, [])
                elif method is not None and not f.role.startswith("="):
                    # what a method of a parameter whose class is not known returns
                    # (``provider.generate()``): "<index>.<method>()", so a caller whose
                    # argument is an object of a project class passes only what that method
                    # returns of it (``CallsMixin.method_result_of``), not the whole object
                    name = f"{f.param}.{method[1]}()" + grain
                    sinks = summary.attr_sinks.setdefault(name, [])
                elif f.param >= 0 and (
                    entry_key(f.detail) is not None or f.role.startswith("=") or grain
                ):
                    # one entry or field of a parameter: "<index>['<key>']", "<index>.<attr>";
                    # only its messages of one role: "<index>@<role>", "<index>['k']@<role>"
                    entry = f"{f.param}{entry_suffix(f.detail)}"
                    if f.role.startswith("="):
                        entry += f"@{f.role[1:]}"
                    name = entry + grain
                    sinks = summary.attr_sinks.setdefault(name, [])
                else:
                    name = str(f.param)
                    sinks = summary.param_sinks.setdefault(f.param, [])
                call = self.sink_call
                if call is not None and name not in summary.sink_lines:
                    called, line = called_name(call)
                    summary.sink_lines[name] = (line, called, "")
                # a parameter that reaches the region only through a call the analysis
                # cannot see keeps those steps: the caller's argument is unproven there
                # (one unproven flow per region and label is enough for ``--explain``;
                # a proven one replaces it); so does one sent by an override
                unseen = tuple(s for s in f.via if s[0].startswith((ASSUMED, OVERRIDE)))
                # of several, the one of smallest ``_unseen_rank``, whatever order they are
                # met in (the facts of a set, a callee's sinks filled in a set's order: both
                # change with the hash seed)
                same = [t for t in sinks if t[0] == region and t[1] == label]
                if not same or all(_unseen_rank(unseen) < _unseen_rank(t[2]) for t in same):
                    sinks[:] = [t for t in sinks if t not in same]
                    sinks.append((region, label, unseen))
        if self._track and value.facts:
            self._track[-1].clean = False
        if self.recording and value.facts:
            parts: Pieces = ()
            if region in ("system", "frozen", "session") and isinstance(
                node, (ast.JoinedStr, ast.BinOp, ast.Call)
            ):
                parts = _pieces(self.flatten(node, known=value))
            texts = self.system_texts(node) if region == "system" and len(parts) < 2 else ()
            self.entries.append(
                PrefixEntry(
                    region,
                    value,
                    node,
                    label,
                    self.frame.once,
                    parts,
                    self.frame.func,
                    self.sink_arg,
                    texts,
                )
            )

    def system_texts(self, node: ast.AST | None) -> tuple[Pieces, ...]:
        """The pieces of the system text ``node`` stands for where ``record`` does not split
        it (``PrefixEntry.texts``): the f-string or ``+`` a name of this function was last
        bound to, or each text that a function of this module returns, called here with
        arguments that call nothing, its parameters' pieces taking those arguments' facts
        (``call_bound``, as for its whole value)."""
        if isinstance(node, ast.Name):
            held = self.frame.defs.get(node.id)
            if node.id not in self.frame.env:
                return ()
            if isinstance(held, (ast.JoinedStr, ast.BinOp)):
                return (_pieces(self.flatten(node)),)
            node = held
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id not in self.frame.env
            and node.func.id in self.functions
        ):
            return ()
        given = [*node.args, *(kw.value for kw in node.keywords)]
        if any(
            isinstance(sub, (ast.Call, ast.Await, ast.NamedExpr))
            for a in given
            for sub in ast.walk(a)
        ):
            return ()
        summary = self.summary(self.functions[node.func.id])
        texts = []
        for pieces in summary.text_returns:
            probe = Summary(summary.params, name=summary.name, key=summary.key)
            probe.ret = Value(
                frozenset().union(*(v.facts for _, v in pieces)), elts=tuple(v for _, v in pieces)
            )
            passed = self.call_bound(Bound(probe), node).elts
            if passed is None or len(passed) != len(pieces):
                continue
            texts.append(_pieces(zip((n for n, _ in pieces), passed, strict=True)))
        return tuple(texts)

    def encloses(self, fact: Fact) -> bool:
        """Whether ``fact`` is a parameter's of a function this one is nested in (at any
        depth)."""
        func = self.frame.func
        seen: set[int] = set()
        while func is not None and id(func) not in seen:
            seen.add(id(func))
            parent = self.enclosing.get(func)
            if parent is None or parent.func is None:
                return False
            if fact.fix == (id(parent.func),):
                return True
            func = parent.func
        return False

    def skipped_unrecorded(self) -> None:
        """Code that runs only in the recording pass was skipped (the class pre-pass): the
        summary being computed is not the one the recording pass computes."""
        if self._track:
            self._track[-1].clean = False

    def add_sink(self, sink: SinkCall) -> None:
        if self._track:
            self._track[-1].clean = False
        if self.recording:
            sink.loops = tuple(self.frame.loops)
            sink.function = self.frame.func
            sink.once = self.frame.once
            self.sinks.append(sink)

    def runtime_test(self, test: ast.expr, value: Value, own: frozenset[str] = frozenset()) -> bool:
        """True when a condition can change between requests of one session.

        Evidence is required: the condition's value carries a volatile fact (time,
        randomness, a value chosen per request), or it reads per-turn state, a name or
        attribute such as ``question``, ``len(messages)``, ``turn``, ``attempt``.
        Configuration flags, environment, constructor arguments and ``x if x else None``
        sentinels are not evidence. ``value``: the condition's value, as the caller
        evaluated it. ``own``: names bound by the enclosing comprehension, which
        do not count. Code that runs once never varies.
        """
        if self.frame.pinned:
            return False
        # kept on the node, for each ``own`` (trees are kept for later analyses of the file)
        known: dict[frozenset[str], bool] = test.__dict__.setdefault("_per_request", {})
        reads = known.get(own)
        if reads is None:
            reads = known[own] = _reads_per_request_state(test, own)
        return reads or any(f.volatile for f in value.facts)

    # ------------------------------------------------------------------ functions

    def summary(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> Summary:
        """The function's summary, computing it on first use (recursion yields a blank one).

        Parameters are bound to PARAM facts (``fix == (id(func),)``) and the receiver of a
        method to a ``SELF`` fact, so the summary says which arguments reach the return value,
        a sink, or the objects the function stores into.
        """
        done = self.summaries.get(func)
        track = self._track
        if done is not None:
            if track:
                track[-1].uses.append((func, done))
            return done
        if func in self._kept:
            # computed by the class pre-pass on what there is now (``_prepass_classes``)
            taken = self._take(func)
            if taken is not None:
                return taken
        info = self.method_class.get(func)
        decorators = _decorator_names(func)
        is_static = "staticmethod" in decorators
        args = [*func.args.posonlyargs, *func.args.args]
        self_name = None
        if info is not None and not is_static and args:
            self_name = args[0].arg
            args = args[1:]
        names = [a.arg for a in args] + [a.arg for a in func.args.kwonlyargs]
        label = f"{info.node.name}.{func.name}" if info is not None else func.name
        if func in self.in_progress:
            if track:
                track[-1].clean = False
            return Summary(names, name=label, key=id(func))
        self.in_progress.add(func)
        parent = self.closures.get(func)
        computed = self._computed
        if computed is not None:
            track.append(_Computed(parent))
        env = dict(parent.env) if parent is not None else {}
        defs = dict(parent.defs) if parent is not None else {}
        summary = Summary(names, name=label, key=id(func))
        pinned = (
            (info is not None and func.name in INIT_METHODS)
            or bool(CACHE_DECORATORS & set(decorators))
            or _first_turn_prompt(func)
        )
        frame = Frame(env, defs, func, info, self_name, pinned, summary=summary)
        frame.process = self.runs_once_per_process(func)
        if info is None and parent is not None and parent.cls is not None:
            # a function nested in a method: ``self`` is the method's own object
            frame.cls, frame.self_name = parent.cls, parent.self_name
        annotations = {a.arg: a.annotation for a in [*args, *func.args.kwonlyargs]}
        companions = held_companions(func)
        for index, name in enumerate(names):
            frame.params[name] = index
            fact = Fact(
                Kind.PARAM, func.lineno, func.col_offset, name, param=index, fix=(id(func),)
            )
            annotation = annotations.get(name)
            env[name] = Value(
                # a parameter sent only beside a conversation the function holds (a
                # ``system=`` text): what a caller passes for it is written there once
                held_once(frozenset({fact})) if name in companions else frozenset({fact}),
                _annotated_shape(annotation),
                ref=self.annotated_class(annotation),
            )
        if self_name is not None:
            fact = Fact(
                Kind.PARAM, func.lineno, func.col_offset, self_name, param=SELF, fix=(id(func),)
            )
            env[self_name] = Value(frozenset({fact}), ref=info)
        for extra in (func.args.vararg, func.args.kwarg):
            if extra is not None:
                env[extra.arg] = CLEAN
        # a decorator that registers the function as the system prompt (pydantic-ai's
        # @agent.system_prompt / @agent.instructions): what it returns is system text
        summary.builder = bool(_PROMPT_DECORATORS & set(decorators))
        saved = self.frame
        self.frame = frame
        first_entry = len(self.entries)
        try:
            self.exec_block(func.body)
        finally:
            self.frame = saved
            self.in_progress.discard(func)
            if computed is not None and track:
                computed[func] = track.pop()
        self.pin_factory_entries(func, first_entry)
        if frame.return_branches:
            # ``if include_hour_min: return ...``: what only such returns make is made only
            # where the caller's argument takes their branches
            summary.returns = branch_marked(summary.returns, frame.return_branches)
        if summary.returns:
            values = [v for _, v in summary.returns]
            if len(values) > 1 and info is not None and self_name is not None:
                # a read back by key of a cache the class fills by key (``return
                # self._snapshots[path]`` beside ``return self._reload(path)``, which builds a
                # ``Snapshot(loaded_at=time.time(), ...)`` and stores it there): the cache holds
                # what the class builds, so beside an instance of a project class returned on
                # another path it stands for that instance, and a time in one field of the
                # stored instances stays in that field instead of spreading over all of them
                kept = [
                    v for node, v in summary.returns if not _cache_read(node, defs, info, self_name)
                ]
                if len(kept) < len(values) and any(
                    v.items is not None and isinstance(v.ref, (ClassInfo, ExternalClass))
                    for v in kept
                ):
                    values = kept
            # a dict of known keys returned beside values of unknown keys (a cached or loaded
            # dict): what it holds under each key stays that key's (``keys_kept``)
            summary.ret = (
                values[0]
                if len(values) == 1
                else join(*(v.with_facts(keys_kept(v)) for v in values))
            )
            if len(values) > 1 and all(v.shape is Shape.STR for v in values):
                # text on every return (``return ""`` beside ``return header + body``): text,
                # so a str method of the result (``.strip()``) returns what it holds
                summary.ret = replace(summary.ret, shape=Shape.STR)
            if len(values) > 1 and all(
                v.items is not None and v.shape is Shape.DICT for v in values
            ):
                # dicts of known keys on every return: each key holds what any put there
                summary.ret = functools.reduce(merge, values)
            if len(values) > 1 and all(v.elem is not None for v in values):
                # lists of elements of known fields on every return (``return questions``
                # after the loop that fills it, ``return [Question(text=..., size="medium")]``
                # as the fallback): each field of the elements holds what either put there, so
                # a set stored in one field does not spread over the others
                merged = functools.reduce(merge, values)
                if merged.elem is not None:
                    summary.ret = merged
            # a return of which nothing is known (``Record.from_dict(data)``, a call the
            # analysis does not follow) holds no fact in any field: beside an instance built on
            # another path it is left out, so the time stamped into one field of that instance
            # (``Record(id=id)``, ``created_at`` from its factory) stays in that field
            built = [v for v in values if v != CLEAN]
            instance = any(isinstance(v.ref, (ClassInfo, ExternalClass)) for v in built)
            if not instance:
                built = values
            if len(values) > 1 and all(
                isinstance(v.ref, (ClassInfo, ExternalClass))
                or holds_no_object(v)
                # a looked-up object only stamped in a field (``session.last_used = now``):
                # that field's, beside the instance built on the other path (``merge``)
                or (instance and stamped_only(v))
                for v in built
            ):
                # an instance of a project class (or None) on every return (``return
                # self._client`` on two paths): that instance, its class and fields kept
                summary.ret = functools.reduce(merge_field, built)
            sizes = {len(v.elts) if v.elts is not None else -1 for v in values}
            if len(values) > 1 and len(sizes) == 1 and -1 not in sizes:
                summary.ret = replace(
                    summary.ret,
                    elts=tuple(
                        _joined_position([v.elts[i] for v in values if v.elts])
                        for i in range(sizes.pop())
                    ),
                    more=any(v.more for v in values),
                )
            if any(fields_known(v) for v in values):
                yielded = _yielded(func)
                elem = yielded_elem([v for node, v in summary.returns if id(node) in yielded])
                if elem is not None:
                    # a generator: each step it yields keeps its fields for the loop that
                    # reads them
                    summary.ret = Value(summary.ret.facts, elem=elem)
        self.summaries[func] = summary
        if track:
            track[-1].uses.append((func, summary))
        return summary

    def pin_factory_entries(self, func: ast.FunctionDef | ast.AsyncFunctionDef, first: int) -> None:
        """A factory builds an agent once for many requests: an id ``func`` makes and passes
        to a configuration sink (``system_prompt=``, a ``"system_prompt"`` key, ``Agent(...)``)
        whose object it returns or stores, or uses in a loop after building it (each pass
        sends with the object built once), names that object, so in the entries it recorded
        there (from ``first`` on) such ids are pinned (``session.py``)."""
        entries = self.entries
        requests = frozenset(s.label.rsplit(".", 1)[-1] for s in self.extra_sinks)
        found = [
            i
            for i in range(first, len(entries))
            if entries[i].function is func
            and entries[i].region == "system"
            and configuration_label(entries[i].sink, requests)
            and any(f.kind is Kind.UNIQUE and not f.pinned for f in entries[i].value.facts)
        ]
        if not found:
            return
        leaving = escaping(func) | reused_in_loops(func)
        for i in found:
            entry = entries[i]
            if id(entry.node) in leaving:
                entries[i] = replace(
                    entry,
                    value=map_facts(entry.value, pin_ids),
                    parts=tuple((n, d, size, pin_ids(f)) for n, d, size, f in entry.parts),
                    texts=tuple(
                        tuple((n, d, size, pin_ids(f)) for n, d, size, f in text)
                        for text in entry.texts
                    ),
                )

    def annotated_class(self, annotation: ast.expr | None) -> object:
        """The project class a parameter annotation names (``clock: Clock``, ``Clock | None``,
        ``Optional[Clock]``), as a ``ClassInfo`` or ``ExternalClass``; an ``Unresolved`` for a
        class of another module whose summary is not known (yet); else None."""
        if annotation is None:
            return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            sides = [self.annotated_class(annotation.left), self.annotated_class(annotation.right)]
            known = [c for c in sides if isinstance(c, (ClassInfo, ExternalClass))]
            return known[0] if known else next((c for c in sides if c is not None), None)
        if isinstance(annotation, ast.Subscript) and isinstance(
            annotation.value, (ast.Name, ast.Attribute)
        ):
            if self.qualify(annotation.value) in ("typing.Optional", "typing.Union"):
                inner = annotation.slice
                items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                return next((c for c in map(self.annotated_class, items) if c is not None), None)
            return None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.Name) and annotation.id in self.classes:
            return self.classes[annotation.id]
        qual = (
            self.qualify(annotation) if isinstance(annotation, (ast.Name, ast.Attribute)) else None
        )
        if qual is not None:
            found = self.external(qual)
            if isinstance(found, ExternalClass):
                return found
            if found is None and not qual.startswith(("typing.", "builtins.")):
                return Unresolved(qual)
        return None

    def mark_builder(self, func: ast.FunctionDef | ast.AsyncFunctionDef, label: str) -> None:
        """A function passed as ``instructions=`` builds the system prompt: record its returns."""
        summary = self.summary(func)
        if summary.builder:
            return
        saved = self.frame
        self.frame = Frame({}, {}, func, self.method_class.get(func), None, False)
        try:
            for node, value in summary.returns:
                self.record("system", value, node, label)
        finally:
            self.frame = saved

    # ------------------------------------------------------------------ names

    def lookup(self, name: str) -> Value:
        frame = self.frame
        value = frame.env.get(name)
        if value is not None:
            return value
        value = self.module_frame.env.get(name)
        if value is not None:
            return value.pinned()
        if name in self.functions:
            return Value(shape=Shape.FUNC, ref=self.functions[name])
        qual = self.imports.get(name)
        if qual is not None:
            found = self.external(qual)
            if isinstance(found, Value):
                return found.pinned()
            if isinstance(found, Summary):
                return Value(shape=Shape.FUNC, ref=Bound(found))
        return CLEAN

    def runs_once_per_process(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """True for a command-line entry point and the functions defined inside it: a function
        registered with ``@click.command()``/``@click.group()`` or with ``.command()``,
        ``.callback()`` or ``.group()`` of a ``typer.Typer()``/``click.Group()`` made at module
        level (or of a ``click`` group function), or a function called by name once, outside
        loops, under ``if __name__ == "__main__":``. The command runs once per process, so what it
        makes before sending (a session's start time, its id) is the process's, as a value
        computed at import is, and serves each request the process then sends; what it makes
        inside a loop is per pass (``Frame.once``). ``.command()`` of any other object (a chat
        bot's, a Slack app's: one call per message) is not one."""
        parent = self.enclosing.get(func)
        if parent is not None and parent.func is not None:
            return parent.process
        apps, main_calls = self._entry_names()
        if func.name in main_calls and self.functions.get(func.name) is func:
            return True
        for dec in func.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if self.qualify(target) in _CLI_DECORATORS:
                return True
            if (
                isinstance(target, ast.Attribute)
                and target.attr in ("command", "callback", "group")
                and isinstance(target.value, ast.Name)
                and target.value.id in apps
            ):
                return True
        return False

    def _entry_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """(module-level names of command-line apps: ``app = typer.Typer()``, ``cli =
        click.Group()``, functions decorated ``@click.group()``; the functions called by name
        once, outside loops, under ``if __name__ == "__main__":``), found once per module."""
        found = self._entry_names_found
        if found is not None:
            return found
        names: set[str] = set()
        main_calls: set[str] = set()
        for stmt in self.tree.body:
            if isinstance(stmt, ast.If) and _is_main_guard(stmt):
                # ``if __name__ == "__main__": main()`` or ``asyncio.run(main())``: ``main`` runs
                # once per process, as a command does; a function called there more than once,
                # or in a loop (``for q in questions: ask(q)``), runs once per call
                main_calls.update(_called_once(stmt.body))
            elif (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Call)
                and self.qualify(stmt.value.func) in _CLI_APPS
            ):
                names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in stmt.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if self.qualify(target) in ("click.group", "typer.Typer"):
                        names.add(stmt.name)
        self._entry_names_found = (frozenset(names), frozenset(main_calls))
        return self._entry_names_found

    def qualify(self, node: ast.expr) -> str | None:
        """Fully qualified dotted name of ``node`` through imports, or None."""
        if isinstance(node, ast.Name):
            name = node.id
            if name in self.imports:
                return self.imports[name]
            if (
                name in BUILTIN_NAMES
                and name not in self.frame.env
                and name not in self.module_frame.env
                and name not in self.functions
            ):
                return f"builtins.{name}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualify(node.value)
            return f"{base}.{node.attr}" if base else None
        return None


__all__ = ["INIT_METHODS", "Analyzer", "ClassInfo", "Frame", "Summary"]


def _keyed_fields(cls: ast.ClassDef) -> frozenset[str]:
    """The fields of ``self`` that a method of ``cls`` stores into by a computed key
    (``self._cache[key] = value``), found once per class (kept on its node)."""
    known: frozenset[str] | None = cls.__dict__.get("_keyed_fields")
    if known is not None:
        return known
    found: set[str] = set()
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        me = method.args.args[0].arg
        for sub in ast.walk(method):
            if not isinstance(sub, (ast.Assign, ast.AnnAssign)):
                continue
            for target in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                if (
                    isinstance(target, ast.Subscript)
                    and not isinstance(target.slice, (ast.Constant, ast.Slice))
                    and isinstance(target.value, ast.Attribute)
                    and isinstance(target.value.value, ast.Name)
                    and target.value.value.id == me
                ):
                    found.add(target.value.attr)
    cls.__dict__["_keyed_fields"] = frozen = frozenset(found)
    return frozen


def _cache_read(
    returned: ast.expr, defs: Mapping[str, ast.expr], info: ClassInfo, self_name: str
) -> bool:
    """True for a return of a value read by a computed key from a field of ``self`` that the
    class fills by such keys (``return self._cache[key]``, ``return self._cache.get(key)``,
    also through a local name bound to such a read)."""
    if isinstance(returned, ast.Name):
        bound = defs.get(returned.id)
        if bound is None:
            return False
        returned = bound
    holder: ast.expr | None = None
    if isinstance(returned, ast.Subscript) and not isinstance(
        returned.slice, (ast.Constant, ast.Slice)
    ):
        holder = returned.value
    elif (
        isinstance(returned, ast.Call)
        and isinstance(returned.func, ast.Attribute)
        and returned.func.attr == "get"
        and returned.args
        and not isinstance(returned.args[0], ast.Constant)
    ):
        holder = returned.func.value
    return (
        isinstance(holder, ast.Attribute)
        and isinstance(holder.value, ast.Name)
        and holder.value.id == self_name
        and holder.attr in _keyed_fields(info.node)
    )
