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
import re
from collections.abc import Callable

from .calls import CallsMixin
from .events import PrefixEntry, SinkCall
from .exprs import ExprsMixin
from .facts import CLEAN, Fact, Kind, Shape, Value, join
from .frames import INIT_METHODS, ClassInfo, Frame, Summary
from .library import LibraryMixin
from .regions import RegionsMixin
from .sinks import SinkSpec, is_system_prompt_name
from .statements import StatementsMixin

BUILTIN_NAMES = frozenset(dir(builtins))
CACHE_DECORATORS = frozenset({"cache", "lru_cache", "cached_property", "cached"})
_BUILDER_DOC = re.compile(
    r"\b(build|return|render|construct|create|assemble|generate|make|compose)s?\b[^.]{0,80}"
    r"\bsystem[ -](prompt|message|instructions?)\b",
    re.IGNORECASE,
)


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


def _annotated_shape(annotation: ast.expr | None) -> Shape:
    """The shape a parameter annotation promises (``str``, ``dict[str, int]``, ...)."""
    if isinstance(annotation, ast.Subscript):
        annotation = annotation.value
    if isinstance(annotation, ast.Attribute):
        return _ANNOTATION_SHAPES.get(annotation.attr, Shape.UNKNOWN)
    if isinstance(annotation, ast.Name):
        return _ANNOTATION_SHAPES.get(annotation.id, Shape.UNKNOWN)
    return Shape.UNKNOWN


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    names = []
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute):
            names.append(target.attr)
        elif isinstance(target, ast.Name):
            names.append(target.id)
    return names


class Analyzer(StatementsMixin, ExprsMixin, CallsMixin, LibraryMixin, RegionsMixin):
    """Walk one parsed module and collect ``PrefixEntry`` and ``SinkCall`` events.

    ``extra_sinks`` are user wrappers from config. Use ``run()`` once per instance.
    """

    def __init__(
        self,
        tree: ast.Module,
        extra_sinks: tuple[SinkSpec, ...] = (),
        segment: Callable[[ast.AST], bytes] | None = None,
        triggered: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.tree = tree
        self.extra_sinks = extra_sinks
        self.segment = segment
        self.triggered = triggered
        self.relevant: Callable[[ast.AST], bool] = lambda node: True
        self.imports: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.method_class: dict[ast.AST, ClassInfo] = {}
        self.summaries: dict[ast.AST, Summary] = {}
        self.in_progress: set[ast.AST] = set()
        self.entries: list[PrefixEntry] = []
        self.sinks: list[SinkCall] = []
        self.recording = True
        self.module_frame = Frame(env={}, defs={}, pinned=True)
        self.frame = self.module_frame
        self.closures: dict[ast.AST, Frame] = {}

    # ------------------------------------------------------------------ driver

    def run(self) -> tuple[list[PrefixEntry], list[SinkCall]]:
        """Analyse the module; returns (prefix entries, sink calls).

        Order: the module body (class bodies included), then for each class with a relevant
        method its ``__init__``-like methods (so instance attributes are known), then every
        relevant function and method. Other functions are analysed only when something calls
        them (their summary is computed on demand).
        """
        self._collect(self.tree.body)
        self._close_relevance()
        self.exec_block(self.tree.body)
        for info in self.classes.values():
            methods = list(info.methods.values())
            if any(self.relevant(m) for m in methods):
                for method in methods:
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

    def _close_relevance(self) -> None:
        """Functions that call a relevant function are relevant too (a volatile argument can
        flow into its sink), to a fixed point."""
        segment, triggered = self.segment, self.triggered
        if segment is None or triggered is None:
            return
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = list(self.functions.values())
        for info in self.classes.values():
            functions.extend(info.methods.values())
        texts = {f: segment(f) for f in functions}
        flags = {f: triggered(text) for f, text in texts.items()}
        changed = any(flags.values()) and not all(flags.values())
        while changed:
            changed = False
            calls = [f"{f.name}(".encode() for f, on in flags.items() if on]
            for func, on in flags.items():
                if not on and any(call in texts[func] for call in calls):
                    flags[func] = changed = True
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
                if stmt.level or not stmt.module:
                    continue
                for alias in stmt.names:
                    self.imports[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                methods = {
                    s.name: s
                    for s in stmt.body
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
                info = ClassInfo(stmt, methods)
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

    # ------------------------------------------------------------------ facts and events

    def fact(self, kind: Kind, node: ast.AST, detail: str, **kwargs: object) -> Fact:
        """A new fact born at ``node`` in the current frame (pinned where code runs once)."""
        return Fact(
            kind,
            getattr(node, "lineno", 0),
            getattr(node, "col_offset", 0),
            detail,
            pinned=self.frame.once,
            **kwargs,  # type: ignore[arg-type]
        )

    def record(self, region: str, value: Value, node: ast.AST, label: str) -> None:
        """A value enters a prefix region (or the tail, which is not recorded)."""
        summary = self.frame.summary
        if summary is not None and value.facts:
            key = id(self.frame.func)
            for f in value.facts:
                if f.kind is Kind.PARAM and f.fix == (key,):
                    sinks = summary.param_sinks.setdefault(f.param, [])
                    if (region, label) not in sinks:
                        sinks.append((region, label))
        if self.recording and value.facts:
            parts: tuple[tuple[ast.AST, bool, int | None, frozenset[Fact]], ...] = ()
            if region in ("system", "frozen", "session") and isinstance(
                node, (ast.JoinedStr, ast.BinOp, ast.Call)
            ):
                parts = tuple(
                    (n, v.dynamic, len(v.const) if v.const is not None else None, v.facts)
                    for n, v in self.flatten(node)
                )
            self.entries.append(
                PrefixEntry(region, value, node, label, self.frame.once, parts, self.frame.func)
            )

    def add_sink(self, sink: SinkCall) -> None:
        if self.recording:
            sink.loops = tuple(self.frame.loops)
            sink.function = self.frame.func
            sink.once = self.frame.once
            self.sinks.append(sink)

    def runtime_test(self, test: ast.expr, own: frozenset[str] = frozenset()) -> bool:
        """True when a condition can differ between requests (not in code that runs once).

        ``own``: names bound by the enclosing comprehension, which do not count.
        """
        if self.frame.pinned:
            return False
        frame = self.frame
        for node in ast.walk(test):
            if isinstance(node, ast.Name) and node.id not in own:
                if node.id in frame.env or node.id in frame.params:
                    return True
            elif isinstance(node, ast.Call):
                root = node.func
                while isinstance(root, ast.Attribute):
                    root = root.value
                if not (isinstance(root, ast.Name) and root.id in own):
                    return True
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == frame.self_name
            ):
                return True
        return False

    # ------------------------------------------------------------------ functions

    def summary(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> Summary:
        """The function's summary, computing it on first use (recursion yields a blank one)."""
        done = self.summaries.get(func)
        if done is not None:
            return done
        info = self.method_class.get(func)
        decorators = _decorator_names(func)
        is_static = "staticmethod" in decorators
        args = [*func.args.posonlyargs, *func.args.args]
        self_name = None
        if info is not None and not is_static and args:
            self_name = args[0].arg
            args = args[1:]
        names = [a.arg for a in args] + [a.arg for a in func.args.kwonlyargs]
        if func in self.in_progress:
            return Summary(names)
        self.in_progress.add(func)
        parent = self.closures.get(func)
        env = dict(parent.env) if parent is not None else {}
        defs = dict(parent.defs) if parent is not None else {}
        summary = Summary(names)
        pinned = (info is not None and func.name in INIT_METHODS) or bool(
            CACHE_DECORATORS & set(decorators)
        )
        frame = Frame(env, defs, func, info, self_name, pinned, summary=summary)
        annotations = {a.arg: a.annotation for a in [*args, *func.args.kwonlyargs]}
        for index, name in enumerate(names):
            frame.params[name] = index
            fact = Fact(
                Kind.PARAM, func.lineno, func.col_offset, name, param=index, fix=(id(func),)
            )
            env[name] = Value(frozenset({fact}), _annotated_shape(annotations.get(name)))
        for extra in (func.args.vararg, func.args.kwarg):
            if extra is not None:
                env[extra.arg] = CLEAN
        doc = ast.get_docstring(func, clean=False) or ""
        summary.builder = (
            is_system_prompt_name(func.name)
            or bool(_BUILDER_DOC.search(doc.split("\n\n")[0]))
            or bool({"system_prompt", "instructions"} & set(decorators))
        )
        saved = self.frame
        self.frame = frame
        try:
            self.exec_block(func.body)
        finally:
            self.frame = saved
            self.in_progress.discard(func)
        if summary.returns:
            summary.ret = join(*(v for _, v in summary.returns))
            if len(summary.returns) == 1:
                summary.ret = summary.returns[0][1]
        self.summaries[func] = summary
        return summary

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
        return CLEAN

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
