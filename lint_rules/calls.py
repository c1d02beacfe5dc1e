"""Call evaluation for the taint engine: dispatch, same-module summaries, methods, attributes.

``CallsMixin`` is mixed into ``taint.Analyzer``; it reads the analyzer's state (frames, imports,
summaries) through the declarations on ``frames.EngineState``. Calls to known library functions
are in ``library.py``.
"""

from __future__ import annotations

import ast

from . import sinks
from .facts import CLEAN, Fact, Kind, Shape, Value, join
from .frames import EngineState
from .library import source_text, span
from .sources import (
    DATETIME_ATTR_GRANULARITY,
    ENV_ATTRS,
    TOOL_PRODUCERS_METHODS,
    UNORDERED_PATH_METHODS,
    format_granularity,
)
from .toolnames import mutated_key

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
        if isinstance(func, ast.Name) and func.id not in frame.env and func.id in self.classes:
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
        if method == "sort" and isinstance(target, ast.Name):  # sorted in place: ordered now
            v = self.lookup(target.id).without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
            ordered = Shape.LIST if v.shape is Shape.UNORDERED_LIST else v.shape
            ref = v.ref if ordered is v.shape else None
            frame.env[target.id] = Value(v.facts, ordered, None, v.elem_str, v.name_key, ref)
            return CLEAN
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
            name_key = mutated_key(old.name_key, method, node, [a.name_key for a in args])
            frame.cls.attrs[target.attr] = self.with_mutation_facts(
                Value(old.facts | added.facts, kept, None, old.elem_str, name_key, old.ref)
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
            name_key = mutated_key(old.name_key, method, node, [a.name_key for a in args])
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
            fix=(*span(node), iterable.elem_str),
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


def _dict_get(node: ast.Dict, key: str) -> ast.expr | None:
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


__all__ = ["BUILDER_METHODS", "CallsMixin"]
