"""Call evaluation for the taint engine: sources, builtins, string methods, summaries.

``CallsMixin`` is mixed into ``taint.Analyzer``; it reads the analyzer's state (frames, imports,
summaries) through the attributes declared on ``_Engine``.
"""

from __future__ import annotations

import ast
import textwrap

from . import sinks
from .events import SinkCall
from .facts import CLEAN, Fact, Kind, Shape, Value, concat, join
from .frames import EngineState
from .sources import (
    CALL_SOURCES,
    DATETIME_ATTR_GRANULARITY,
    ENV_ATTRS,
    NO_ARG_TIME_SOURCES,
    SANITIZERS,
    TOOL_PRODUCERS,
    TOOL_PRODUCERS_METHODS,
    UNORDERED_PATH_METHODS,
    UNORDERED_SOURCES,
    format_granularity,
)

_GRAIN_RANK = {"subday": 0, "day": 1, "": 2}
_STR_KEEP_CONST = {"strip", "lstrip", "rstrip", "lower", "upper", "title", "expandtabs"}
_STR_METHODS = {
    *_STR_KEEP_CONST,
    "replace",
    "removeprefix",
    "removesuffix",
    "encode",
    "decode",
    "casefold",
    "capitalize",
    "center",
    "ljust",
    "rjust",
    "zfill",
    "format_map",
    "substitute",
    "safe_substitute",
    "translate",
}
_MUTATORS = {"append", "extend", "insert", "add", "update", "appendleft", "extendleft"}
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
_BUILDER_QUALS = frozenset({"promptcache.PromptBuilder", "promptcache.prompt.PromptBuilder"})
#: ``promptcache.PromptBuilder`` methods -> region ("" = the tail, not part of the cached prefix):
#: frozen layer (system, rules, knowledge, example, tool), session layer, then the dynamic layer
#: and the append-only history, which render last.
BUILDER_METHODS = {
    "system": "frozen",
    "rules": "frozen",
    "knowledge": "frozen",
    "example": "frozen",
    "tool": "tools",
    "session": "session",
    "dynamic": "",
    "add_user": "",
    "add_assistant": "",
}


def source_text(node: ast.AST) -> str:
    """Short source form of a call for messages: ``datetime.now()``."""
    if isinstance(node, ast.Call):
        return f"{source_text(node.func)}()"
    if isinstance(node, ast.Attribute):
        return f"{source_text(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return "<expr>"


class CallsMixin(EngineState):
    """Evaluation of ``ast.Call`` nodes and of attribute reads on known values."""

    def eval_call(self, node: ast.Call) -> Value:
        func = node.func
        chain = sinks.call_chain(func)
        qual = self.qualify(func)
        spec = sinks.match(node, chain, qual, self.extra_sinks)
        if spec is not None:
            return self.handle_sink(spec, node)
        frame = self.frame
        receiver: Value | None = None
        if isinstance(func, ast.Attribute) and qual is None:
            if (
                isinstance(func.value, ast.Name)
                and func.value.id == frame.self_name
                and frame.cls is not None
                and func.attr in frame.cls.methods
            ):
                return self.apply_summary(frame.cls.methods[func.attr], node)
            receiver = self.eval(func.value)
        args = [self.eval(a) for a in node.args]
        kwargs: dict[str | None, Value] = {}
        for kw in node.keywords:
            value = self.eval(kw.value)
            kwargs[kw.arg] = join(kwargs[kw.arg], value) if kw.arg in kwargs else value
            if kw.arg is not None and kw.arg != "system" and sinks.is_system_prompt_name(kw.arg):
                self.record("system", value, kw.value, f"{chain[-1]}({kw.arg}=)")
        if qual is not None:
            result = self.qualified_call(qual, node, args, kwargs)
            if result is not None:
                return self.pin_if_once(result)
        if isinstance(func, ast.Name):
            local = frame.env.get(func.id)
            if (
                local is not None
                and local.shape is Shape.FUNC
                and isinstance(local.ref, (ast.FunctionDef, ast.AsyncFunctionDef))
            ):
                return self.apply_summary(local.ref, node)
            if local is None and func.id in self.functions:
                return self.apply_summary(self.functions[func.id], node)
            if local is None and func.id in self.classes:
                info = self.classes[func.id]
                return Value(
                    join(*args, *kwargs.values()).facts,
                    Shape.OBJECT if info.default_repr else Shape.UNKNOWN,
                    ref=info,
                )
        if isinstance(func, ast.Attribute) and receiver is not None:
            result = self.method_call(receiver, func, node, args, kwargs)
            if result is not None:
                return result
        parts = [*args, *kwargs.values()]
        if receiver is not None:
            parts.append(receiver)
        if not parts:
            return CLEAN
        joined = join(*parts)
        return Value(joined.facts) if joined.facts else CLEAN

    def pin_if_once(self, value: Value) -> Value:
        return value.pinned() if self.frame.once else value

    # ------------------------------------------------------------------ same-module functions

    def apply_summary(self, func: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.Call) -> Value:
        """The value of calling a same-module function; arguments flow through its summary."""
        summary = self.summary(func)
        arg_values: dict[int, tuple[Value, ast.expr]] = {}
        extra: list[Value] = []
        for index, arg in enumerate(node.args):
            value = self.eval(arg)
            if isinstance(arg, ast.Starred):
                extra.append(value)
            else:
                arg_values[index] = (value, arg)
        for kw in node.keywords:
            value = self.eval(kw.value)
            if kw.arg is not None and kw.arg in summary.params:
                arg_values[summary.params.index(kw.arg)] = (value, kw.value)
            else:
                extra.append(value)
        facts: set[Fact] = set()
        for f in summary.ret.facts:
            if f.kind is Kind.PARAM:
                if f.param in arg_values:
                    facts |= arg_values[f.param][0].facts
            else:
                facts.add(f)
        for index, targets in summary.param_sinks.items():
            if index in arg_values:
                value, arg = arg_values[index]
                for region, label in targets:
                    self.record(region, value, arg, f"{func.name}() -> {label}")
        ret = summary.ret
        result = Value(frozenset(facts), ret.shape, ret.const, ret.elem_str, ret.name_key, ret.ref)
        return self.pin_if_once(result)

    # ------------------------------------------------------------------ qualified calls

    def qualified_call(
        self,
        qual: str,
        node: ast.Call,
        args: list[Value],
        kwargs: dict[str | None, Value],
    ) -> Value | None:
        first = args[0] if args else CLEAN
        source = CALL_SOURCES.get(qual)
        if source is not None:
            kind, granularity, shape = source
            if qual == "random.shuffle" and node.args and isinstance(node.args[0], ast.Name):
                name = node.args[0].id
                old = self.lookup(name)
                self.frame.env[name] = old.with_facts(
                    old.facts | {self.fact(kind, node, source_text(node))}
                )
                return CLEAN
            if qual == "os.getenv" or qual == "os.environ.get":
                shape = Shape.STR
            fact = self.fact(kind, node, source_text(node), granularity=granularity)
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
            if len(node.args) == 1:
                fmt = first.const
                grain = format_granularity(fmt) if fmt is not None else "subday"
                if not grain:
                    return Value(first.facts, Shape.STR)
                fact = self.fact(Kind.TIME, node, source_text(node), granularity=grain)
                return Value(first.facts | {fact}, Shape.STR)
            return self.regranulate(join(*args[1:]), first.const)
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
            value = first.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
            return Value(value.facts, Shape.LIST, elem_str=first.elem_str, name_key=first.name_key)
        if qual in ("builtins.set", "builtins.frozenset"):
            return Value(
                first.without(Kind.UNORDERED).facts,
                Shape.SET,
                elem_str=first.elem_str,
                ref=(node.lineno, node.col_offset, f"{qual[9:]}()"),
            )
        if qual in ("builtins.list", "builtins.tuple"):
            if not node.args:
                return Value(shape=Shape.LIST)
            unordered = self.iteration_fact(first, node.args[0])
            facts = first.facts | {unordered} if unordered else first.facts
            return Value(facts, Shape.LIST, elem_str=first.elem_str, name_key=first.name_key)
        if qual == "builtins.dict":
            role = next((kw.value for kw in node.keywords if kw.arg == "role"), None)
            content = next((kw.value for kw in node.keywords if kw.arg == "content"), None)
            if (
                isinstance(role, ast.Constant)
                and role.value in ("system", "developer")
                and content is not None
            ):
                self.record_message_content(content, f"dict(role={role.value!r})")
            return Value(join(*args, *kwargs.values()).facts, Shape.DICT)
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
                    fix = ("replace", *_span(kw.value), "True")
                    fact = self.fact(
                        Kind.JSON_UNSORTED,
                        node,
                        f"{source_text(node)} with sort_keys=False",
                        fix=fix,
                    )
                    return Value(first.facts | {fact}, Shape.STR)
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
                ref=(node.lineno, node.col_offset, source_text(node)),
            )
        if qual in TOOL_PRODUCERS:
            fact = self.fact(Kind.TOOLS_UNSTABLE, node, source_text(node))
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
            return Value(join(*args).facts, Shape.LIST) if args else CLEAN
        return None

    def json_dumps(self, node: ast.Call, first: Value) -> Value:
        """``json.dumps``: JSON_UNSORTED unless sort_keys=True or the value's order is fixed."""
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
                cleaned = cleaned.without(Kind.UNORDERED)
            return Value(cleaned.facts, Shape.STR)
        if first.shape in (Shape.STR, Shape.NUM) or first.ref == "literal" or not node.args:
            return Value(first.facts, Shape.STR)
        if sort_keys is not None:
            fix: tuple[int | str | bool, ...] = ("replace", *_span(sort_keys.value), "True")
        else:
            last = node.args[-1] if not node.keywords else node.keywords[-1].value
            assert last.end_lineno is not None and last.end_col_offset is not None
            fix = ("insert", last.end_lineno, last.end_col_offset, ", sort_keys=True")
        fact = self.fact(
            Kind.JSON_UNSORTED, node, f"{source_text(node)} without sort_keys", fix=fix
        )
        return Value(first.facts | {fact}, Shape.STR)

    # ------------------------------------------------------------------ methods

    def method_call(
        self,
        receiver: Value,
        func: ast.Attribute,
        node: ast.Call,
        args: list[Value],
        kwargs: dict[str | None, Value],
    ) -> Value | None:
        method = func.attr
        first = args[0] if args else CLEAN
        timeish = receiver.shape in (Shape.DATETIME, Shape.DATE) or any(
            f.kind is Kind.TIME for f in receiver.facts
        )
        if timeish:
            if method == "strftime":
                return self.regranulate(receiver, first.const)
            if method == "date":
                value = self.regranulate(receiver, "%d")
                return Value(value.facts, Shape.DATE)
            if method == "replace" and {"hour", "minute"} <= set(kwargs):
                return Value(self.regranulate(receiver, "%d").facts, Shape.DATE)
            if method in DATETIME_ATTR_GRANULARITY:
                return self.attribute_of(receiver, func)
            if method in ("isoformat", "ctime", "astimezone", "isoweekday", "weekday"):
                return Value(
                    receiver.facts, Shape.STR if method != "astimezone" else receiver.shape
                )
        if receiver.shape is Shape.RNG:
            fact = self.fact(Kind.UNIQUE, node, f"{receiver.ref}.{method}()")
            return Value(frozenset({fact}))
        if receiver.shape is Shape.BUILDER:
            region = BUILDER_METHODS.get(method)
            if region is not None:
                for arg, value in zip(node.args, args, strict=True):
                    if region:
                        self.record(region, value, arg, f"PromptBuilder.{method}()")
                for kw in node.keywords:
                    if region and kw.arg is not None:
                        self.record(region, kwargs[kw.arg], kw.value, f"PromptBuilder.{method}()")
            return receiver
        if method in TOOL_PRODUCERS_METHODS:
            fact = self.fact(Kind.TOOLS_UNSTABLE, node, f"{source_text(func)}()")
            return Value(frozenset({fact}), Shape.TOOL_RESULT)
        if method in UNORDERED_PATH_METHODS:
            return Value(
                receiver.facts,
                Shape.UNORDERED_LIST,
                elem_str=True,
                ref=(node.lineno, node.col_offset, f".{method}()"),
            )
        if receiver.shape is Shape.STR:
            if method == "join":
                unordered = self.iteration_fact(first, node.args[0]) if node.args else None
                facts = receiver.facts | first.facts
                if unordered is not None:
                    facts = facts | {unordered}
                return Value(facts, Shape.STR)
            if method == "format":
                parts = [receiver] + [self.stringify(a, node) for a in args]
                parts += [self.stringify(v, node) for v in kwargs.values()]
                return Value(join(*parts).facts, Shape.STR)
            if method in _STR_METHODS:
                const = None
                if method in _STR_KEEP_CONST and receiver.const is not None and not node.args:
                    const = getattr(receiver.const, method)()
                return Value(join(receiver, *args, *kwargs.values()).facts, Shape.STR, const)
            if method in ("split", "splitlines"):
                return Value(receiver.facts, Shape.LIST, elem_str=True)
        target = func.value
        frame = self.frame
        if (
            method in _MUTATORS
            and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == frame.self_name
            and frame.cls is not None
        ):
            old = frame.cls.attrs.get(target.attr, CLEAN)
            added = join(*args, *kwargs.values())
            kept = old.shape if old.shape is not Shape.UNKNOWN else Shape.LIST
            frame.cls.attrs[target.attr] = self.with_mutation_facts(
                Value(old.facts | added.facts, kept, None, old.elem_str, old.name_key, old.ref)
            )
            return CLEAN
        if method in _MUTATORS and isinstance(target, ast.Name):
            name = target.id
            old = self.lookup(name)
            added = join(*args, *kwargs.values())
            if method == "add" or old.shape is Shape.SET:
                shape = old.shape
            else:
                shape = Shape.LIST if old.shape in (Shape.LIST, Shape.UNKNOWN) else old.shape
            elem_str = old.elem_str and all(a.shape is Shape.STR for a in args)
            name_key = old.name_key
            if (
                method == "append"
                and node.args
                and isinstance(node.args[0], ast.Dict)
                and not any(
                    isinstance(k, ast.Constant) and k.value == "name" for k in node.args[0].keys
                )
            ):
                name_key = ""
            new = Value(old.facts | added.facts, shape, None, elem_str, name_key, old.ref)
            self.frame.env[name] = self.with_mutation_facts(new)
            return CLEAN
        if method in ("keys", "values", "items", "copy"):
            return Value(receiver.facts, Shape.LIST if method != "copy" else receiver.shape)
        return None

    # ------------------------------------------------------------------ attributes

    def attribute_source(self, node: ast.Attribute, qual: str) -> Value:
        if qual in ENV_ATTRS:
            fact = self.fact(Kind.ENV, node, qual)
            return Value(frozenset({fact}), Shape.DICT)
        return CLEAN

    def attribute_of(self, base: Value, node: ast.Attribute) -> Value:
        attr = node.attr
        if base.shape is Shape.TOOL_RESULT and attr == "tools":
            return Value(base.facts, Shape.LIST, name_key="elem")
        if base.shape in (Shape.DATETIME, Shape.DATE) or any(
            f.kind is Kind.TIME for f in base.facts
        ):
            grain = DATETIME_ATTR_GRANULARITY.get(attr)
            if grain is not None:
                fmt = {"subday": "%H", "day": "%d", "": "%Y"}[grain]
                value = self.regranulate(base, fmt)
                return Value(value.facts, Shape.DATE if grain == "day" else Shape.NUM)
        if base.shape is Shape.OBJECT:
            return CLEAN
        return Value(base.facts) if base.facts else CLEAN

    # ------------------------------------------------------------------ helpers

    def regranulate(self, value: Value, fmt: str | None) -> Value:
        """TIME facts as formatted by ``fmt`` (None: unknown format, keep as is)."""
        if fmt is None:
            return Value(value.facts, Shape.STR)
        grain = format_granularity(fmt)
        facts = set()
        for f in value.facts:
            if f.kind is Kind.TIME:
                new = max(grain, f.granularity, key=_GRAIN_RANK.__getitem__)
                if not new:
                    continue
                if new != f.granularity:
                    f = Fact(f.kind, f.line, f.col, f.detail, new, f.pinned)
            facts.add(f)
        return Value(frozenset(facts), Shape.STR)

    def stringify(self, value: Value, node: ast.AST) -> Value:
        """``str(value)`` / f-string / ``%s`` / ``.format``: the repr problems of PC015/PC004."""
        shape = value.shape
        facts = value.facts
        if shape is Shape.SET:
            facts = facts | {self.fact(Kind.REPR, node, "the repr of a set", granularity="error")}
        elif shape is Shape.UNORDERED_LIST:
            unordered = self.iteration_fact(value, node)  # type: ignore[arg-type]
            if unordered is not None:
                facts = facts | {unordered}
        elif shape is Shape.DICT and value.ref != "literal":
            facts = facts | {
                self.fact(Kind.REPR, node, "the repr of a dict", granularity="warning")
            }
        elif shape is Shape.OBJECT and value.ref is not None:
            cls = getattr(value.ref, "node", None)
            name = cls.name if isinstance(cls, ast.ClassDef) else "an object"
            facts = facts | {
                self.fact(
                    Kind.REPR,
                    node,
                    f"the default repr of {name} (it contains the object's memory address)",
                    granularity="error",
                )
            }
        return Value(facts, Shape.STR, value.const if shape is Shape.STR else None)

    def iteration_fact(self, iterable: Value, node: ast.expr) -> Fact | None:
        """Iterating ``iterable`` at ``node``: an UNORDERED fact when its order is unstable."""
        if iterable.shape not in (Shape.SET, Shape.UNORDERED_LIST):
            return None
        birth = iterable.ref if isinstance(iterable.ref, tuple) else (0, 0, "a set")
        return Fact(
            Kind.UNORDERED,
            node.lineno,
            node.col_offset,
            str(birth[2]),
            site=(int(birth[0]), int(birth[1])),
            fix=(*_span(node), iterable.elem_str),
        )

    def element_of(self, iterable: Value) -> Value:
        """The loop variable's value when iterating ``iterable``."""
        facts = iterable.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts
        shape = Shape.STR if iterable.elem_str else Shape.UNKNOWN
        name_key = "elem" if iterable.name_key in ("elem", "attr") else ""
        if iterable.shape is Shape.TOOL_RESULT:
            name_key = ""
        return Value(facts, shape, name_key=name_key)

    def record_message_content(self, content: ast.expr, label: str) -> None:
        """The content of a system/developer message dict is system prompt text."""
        if isinstance(content, (ast.List, ast.Tuple)):
            for block in content.elts:
                text = _dict_get(block, "text") if isinstance(block, ast.Dict) else None
                target = text if text is not None else block
                self.record("system", self.eval(target), target, label)
        else:
            self.record("system", self.eval(content), content, label)


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        getattr(node, "end_lineno", 0) or 0,
        getattr(node, "end_col_offset", 0) or 0,
    )


def _dict_get(node: ast.Dict, key: str) -> ast.expr | None:
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


__all__ = ["BUILDER_METHODS", "CallsMixin", "concat", "source_text"]
