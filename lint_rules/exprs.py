"""Expression evaluation for the taint engine (mixed into ``taint.Analyzer``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from .calls import fallback, order_of
from .facts import (
    CLEAN,
    MESSAGE_ROLES,
    SPLAT_KEYED_KINDS,
    SPLATTED,
    Fact,
    Kind,
    Shape,
    Value,
    When,
    any_key_read,
    branch_only,
    concat,
    join,
    joined_servers,
    keyed,
    made_within,
    narrowed,
    other_keys_dropped,
    param_entry,
    replace,
    sampled,
    stable_set,
    wrapped,
)
from .frames import (
    Bound,
    ClassInfo,
    EngineState,
    ExternalClass,
    KeyedBy,
    Table,
    Texts,
    fields_known,
    keys_kept,
    list_elem,
    listed_elem,
    merge,
    merge_elem,
    set_values_birth,
    str_valued,
)
from .nodes import name_text, tested_subject
from .session import kept_from_session
from .sinks import is_system_prompt_name, live_setup_dicts, logged_dicts, written_dicts
from .statements import constant_truth, picked_from
from .toolnames import combine, literal_key

#: node type -> (the analyzer class, its ``expr_<NodeType>`` method or None), for ``eval``
_EXPR_HANDLERS: dict[type, tuple[type, Callable[..., Value] | None]] = {}


#: a strftime directive in a format spec (``%Y``, ``%-d``); a number's spec (``.0f``, ``.1%``)
#: holds none
_STRFTIME = re.compile(r"%[-_0^#]?[a-zA-Z]")


class ExprsMixin(EngineState):
    """``eval()`` and one ``expr_<NodeType>`` method per expression node type."""

    def flatten(
        self, node: ast.expr, depth: int = 0, known: Value | None = None
    ) -> list[tuple[ast.AST, Value]]:
        """The pieces of text built by f-strings, ``+`` and ``sep.join([...])``, in order (a
        constant ``sep`` is a piece between each two elements).

        ``known``: the value of ``node`` itself, already evaluated by the caller: a node that
        is not split into pieces is not evaluated again (evaluating a constructor call again
        would record its sinks again, and so on without end)."""
        if depth > 3:
            return [(node, self.eval(node))]
        if isinstance(node, ast.JoinedStr):
            out: list[tuple[ast.AST, Value]] = []
            for piece in node.values:
                if isinstance(piece, ast.FormattedValue):
                    inner = piece.value
                    target = self.frame.defs.get(inner.id) if isinstance(inner, ast.Name) else None
                    if isinstance(target, (ast.JoinedStr, ast.BinOp)):
                        out.extend(self.flatten(target, depth + 1))
                    else:
                        out.append((inner, self.formatted(piece)))
                else:
                    out.append((piece, self.eval(piece)))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.flatten(node.left, depth + 1) + self.flatten(node.right, depth + 1)
        if isinstance(node, ast.Name):
            target = self.frame.defs.get(node.id)
            if isinstance(target, (ast.JoinedStr, ast.BinOp)) and node.id in self.frame.env:
                return self.flatten(target, depth + 1)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
        ):
            separator = node.func.value
            out = []
            for index, elt in enumerate(node.args[0].elts):
                if (
                    index
                    and isinstance(separator, ast.Constant)
                    and isinstance(separator.value, str)
                    and separator.value
                ):
                    # the separator's text is a piece too, between each two elements
                    out.append((separator, self.eval(separator)))
                out.extend(self.flatten(elt, depth + 1))
            return out
        return [(node, known if known is not None else self.eval(node))]

    # ------------------------------------------------------------------ expressions

    def eval(self, node: ast.expr) -> Value:
        # the ``expr_<NodeType>`` method of this class, found once per node type
        found = _EXPR_HANDLERS.get(node.__class__)
        if found is None or found[0] is not self.__class__:
            found = _EXPR_HANDLERS[node.__class__] = (
                self.__class__,
                getattr(self.__class__, f"expr_{type(node).__name__}", None),
            )
        handler = found[1]
        if handler is None:
            return CLEAN
        result: Value = handler(self, node)
        if self.frame.narrowed and isinstance(node, (ast.Subscript, ast.Attribute)):
            role = self.frame.narrowed.get(ast.dump(node))
            if role is not None:
                result = narrowed(result, role)
        return result

    def expr_Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, str):
            return Value(shape=Shape.STR, const=node.value)
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Value(shape=Shape.NUM)
        if node.value is None or isinstance(node.value, bool):
            return Value(ref="literal")  # True/False/None: fixed JSON and repr, like a number
        return CLEAN

    def expr_Name(self, node: ast.Name) -> Value:
        return self.lookup(node.id)

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        frame = self.frame
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == frame.self_name
            and frame.cls is not None
        ):
            value = frame.cls.attr(node.attr)
            if value is None:
                method = frame.cls.find_method(node.attr)
                if method is not None:
                    receiver = self.lookup(node.value.id)
                    bound = Value(shape=Shape.FUNC, ref=Bound(method, receiver, node.value))
                    return self.property_read(bound, node)
                return CLEAN
            if frame.func is not None and self.method_class.get(frame.func) is frame.cls:
                # what only another entry point stored there is the session's (session.py)
                value = kept_from_session(value, frame.cls, frame.func)
            # what the caller's object holds in this attribute (a SELF fact for the summary)
            return value.with_facts(value.facts | self.self_attr_facts(node.value.id, node.attr))
        qual = self.qualify(node)
        if qual is not None:
            return self.attribute_source(node, qual)
        base = self.eval(node.value)
        if isinstance(node.value, ast.Name) and node.value.id in frame.field_added:
            # what was stored into another field of this object is not in this one
            base = base.with_facts(base.facts - frame.field_added[node.value.id])
        value = self.property_read(self.attribute_of(base, node), node)
        if isinstance(node.value, (ast.Name, ast.Attribute)):
            # a field this function stored into (``ctx.started = ...``, ``session.touch()``)
            stored = frame.env.get(f"{name_text(node.value)}.{node.attr}")
            if stored is not None:
                return merge(value, stored)
        return value

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        value = self._subscript(node)
        birth = set_values_birth(node.value, self.frame)
        if birth is not None and isinstance(node.ctx, ast.Load):
            # one value of a dict whose values are sets (``by_scope[scope]``): a set
            return Value(value.facts, Shape.SET, ref=birth)
        return value

    def _subscript(self, node: ast.Subscript) -> Value:
        base = self.eval(node.value)
        self.eval(node.slice)
        if isinstance(base.ref, Table):
            return Value(shape=Shape.FUNC, ref=base.ref.targets)
        if (
            base.elts is not None
            and isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is int
            and -len(base.elts) <= node.slice.value < len(base.elts)
            # a list's known elements are its first ones: appends elsewhere keep them in place
            and (base.shape is not Shape.LIST or node.slice.value >= 0)
        ):
            return base.elts[node.slice.value]
        if isinstance(node.slice, ast.Slice):
            if base.elts is not None:
                # the elements a slice keeps at the places they take there (``[1:]``,
                # ``[:-1]``); a reversed or computed slice, none known
                return replace(base, elts=_sliced(base, node.slice))
            return base
        if (
            base.items is not None
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and not isinstance(base.ref, (ClassInfo, ExternalClass))
        ):
            # a field of a dict whose keys are known (a literal, here or returned by a
            # helper): it holds what was put under that key, not the other fields
            held = dict(base.items).get(node.slice.value)
            if held is not None:
                return held
        # one element: the container's order is not the element's (and an element read by a
        # computed key, ``tools[name]``, takes nothing of a parameter's order either)
        if isinstance(node.slice, ast.Constant):
            facts = base.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts
            if isinstance(node.slice.value, str):
                facts = other_keys_dropped(facts, node.slice.value)
            made = self.frame.defs.get(node.value.id) if isinstance(node.value, ast.Name) else None
            if isinstance(made, ast.DictComp) and not _gathers(made.value):
                # one value of a dict built by a comprehension over a parameter, looked up by
                # key: that element's contents, not the parameter's order
                facts = picked_from(
                    facts,
                    frozenset(
                        f for f in facts if f.kind is Kind.PARAM and f.granularity == "order"
                    ),
                )
            # but the element at a fixed place of a shuffled or sampled list is drawn at random
            drawn = sampled(facts)
            facts = (facts - drawn) | {replace(f, granularity="") for f in drawn}
            facts |= {
                replace(f, kind=Kind.UNIQUE, granularity="")
                for f in base.facts
                if f.kind is Kind.UNORDERED and f.granularity == "shuffled"
            }
            if type(node.slice.value) is int and base.shape is Shape.LIST:
                # and which element sits at a fixed place of a list in a set's order
                # (``list(set(answers))[0]``) is up to the hash seed
                facts |= {f for f in base.facts if f.kind is Kind.UNORDERED and not f.granularity}
        else:
            facts = base.ordered().facts
            if not isinstance(node.slice, ast.Slice):
                # an entry at a computed key: what any entry holds under its own keys
                facts = any_key_read(facts)
        if isinstance(base.ref, KeyedBy):
            facts = facts - base.ref.facts
        if (
            isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is int
            and node.slice.value >= 0
            and self.frame.func is not None
        ):
            # an element of a parameter at a fixed place (``messages[0]``): the summary names
            # it, so a caller whose list's first elements are known passes only that element
            # (its system message, not the turns appended after it)
            facts = param_entry(facts, node.slice.value, id(self.frame.func))
        if (
            isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and self.frame.func is not None
        ):
            # an entry of a parameter: the summary names it, so a caller passes only what it
            # stored under that key
            facts = param_entry(facts, node.slice.value, id(self.frame.func), line=node.lineno)
            splatted = getattr(node, "_promptcache_splat", "")
            if splatted:
                # the entry a ``**name`` splat passes as this keyword (``regions._keywords``)
                step = (
                    f"{SPLATTED}{splatted}[{node.slice.value!r}]",
                    node.lineno,
                    splatted,
                    "",
                )
                facts = frozenset(
                    f.passed_on(step)
                    if f.kind is Kind.PARAM and f.fix == (id(self.frame.func),)
                    else f
                    for f in facts
                )
        if base.shape is Shape.DICT and isinstance(node.slice, ast.Constant):
            return Value(facts, Shape.STR if str_valued(base) else Shape.UNKNOWN)
        if str_valued(base) and not isinstance(node.slice, ast.Slice):
            # an entry of a dict whose values are all str, at a computed key: a str
            return Value(facts, Shape.STR)
        return Value(facts, name_key=base.name_key) if facts else CLEAN

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Value:
        parts = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                parts.append(self.formatted(part))
            else:
                parts.append(self.eval(part))
        return concat(*parts)

    def formatted(self, part: ast.FormattedValue) -> Value:
        value = self.eval(part.value)
        spec = part.format_spec
        if isinstance(spec, ast.JoinedStr) and all(
            isinstance(v, ast.Constant) for v in spec.values
        ):
            text = "".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))
            # a date's spec is a strftime pattern; a number's (``f"{time.time():.0f}"``,
            # ``:d``, ``:>10``) keeps its value, seconds changing every request, so only a spec
            # with a strftime directive regranulates a time of no known date shape
            if value.shape in (Shape.DATETIME, Shape.DATE) or (
                any(f.kind is Kind.TIME for f in value.facts) and _STRFTIME.search(text)
            ):
                return self.regranulate(value, text)
        if (
            isinstance(spec, ast.JoinedStr)
            and len(spec.values) == 1
            and isinstance(spec.values[0], ast.FormattedValue)
            and (value.shape in (Shape.DATETIME, Shape.DATE) or Kind.TIME in value.kinds())
        ):
            # ``f"{now:{fmt}}"`` with a format that is one of a few constants
            fmt = self.eval(spec.values[0].value)
            if fmt.const is not None or isinstance(fmt.ref, Texts):
                return self.formatted_as(value, fmt)
        return self.stringify(value, part)

    def expr_BinOp(self, node: ast.BinOp) -> Value:
        left = self.eval(node.left)
        right = self.eval(node.right)
        if isinstance(node.op, ast.Add):
            if left.shape is Shape.STR or right.shape is Shape.STR:
                return concat(left, right)
            if left.shape is Shape.LIST or right.shape is Shape.LIST:
                return Value(
                    left.facts | right.facts,
                    Shape.LIST,
                    elem_str=left.elem_str and right.elem_str,
                    name_key=combine(left.name_key, right.name_key),
                    # the elements of both lists, their fields or positions kept
                    elem=merge_elem(listed_elem(left), listed_elem(right))
                    if left.elem is not None or right.elem is not None
                    else None,
                )
            return join(left, right)
        if isinstance(node.op, ast.Mult) and Shape.STR in (left.shape, right.shape):
            text = left.const if left.shape is Shape.STR else right.const
            count = node.right if left.shape is Shape.STR else node.left
            if text is not None and isinstance(count, ast.Constant) and type(count.value) is int:
                return Value(left.facts | right.facts, Shape.STR, text * min(count.value, 10**5))
            return Value(left.facts | right.facts, Shape.STR)
        if isinstance(node.op, ast.Mod) and left.shape is Shape.STR:
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            values = [left] + [self.stringify(self.eval(a), a) for a in args]
            return Value(join(*values).facts, Shape.STR)
        if isinstance(node.op, (ast.BitOr, ast.Sub, ast.BitAnd, ast.BitXor)) and (
            left.shape is Shape.SET or right.shape is Shape.SET
        ):
            return Value(
                left.facts | right.facts,
                Shape.SET,
                elem_str=left.elem_str and right.elem_str,
                ref=_set_operation_ref(node.op, left, right),
            )
        if isinstance(node.op, ast.BitOr) and Shape.DICT in (left.shape, right.shape):
            return Value(left.facts | right.facts, Shape.DICT)
        return join(left, right)

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        values = [self.eval(v) for v in node.values]
        if isinstance(node.op, ast.Or):
            for i in range(1, len(values)):
                if not values[i].facts:
                    continue
                read = next((v for v in node.values[:i] if self.keyed_read(v)), None)
                if read is not None:
                    # ``d.get(k) or uuid4()``: a fallback used only where the read is missing
                    what = f"the fallback of {ast.unparse(read)[:60]} or ..."
                    values[i] = values[i].with_facts(fallback(values[i].facts, node, what))
        return join(*values)

    def keyed_read(self, node: ast.expr, depth: int = 0) -> bool:
        """Whether ``node`` reads a key or an attribute that may be missing and normally is
        not: ``d.get(k)``, ``getattr(o, name, None)``, a name bound to one (``rid =
        data.get("id")``), through ``str()``, ``.strip()`` and ``or``."""
        if depth > 8:
            return False
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return any(self.keyed_read(v, depth + 1) for v in node.values)
        if isinstance(node, ast.Name):
            bound = self.frame.defs.get(node.id)
            return bound is not None and self.keyed_read(bound, depth + 1)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "getattr" and len(node.args) == 3:
                return True
            return (
                func.id == "str"
                and len(node.args) == 1
                and self.keyed_read(node.args[0], depth + 1)
            )
        if isinstance(func, ast.Attribute):
            if func.attr == "get" and node.args:
                return True
            if func.attr in ("strip", "lstrip", "rstrip", "lower", "upper") and not node.args:
                return self.keyed_read(func.value, depth + 1)
        return False

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        return self.eval(node.operand)

    def expr_Compare(self, node: ast.Compare) -> Value:
        self.eval(node.left)
        for comparator in node.comparators:
            self.eval(comparator)
        return CLEAN

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        truth = constant_truth(node.test, self.frame.func)
        if truth is not None:
            # a condition of literals only (``x if 0 % 2 else y``): the other branch never runs
            self.eval(node.test)
            return self.eval(node.body if truth else node.orelse)
        test = self.eval(node.test)
        body = self.eval(node.body)
        orelse = self.eval(node.orelse)
        chosen = self._chosen_by_param(node.test, test)
        if chosen is not None:
            # the caller picks the branch (``include_hour_min=True``, or the default it
            # leaves): what one branch alone makes is marked with the truth it needs
            index, default = chosen
            body, orelse = (
                branch_only(body, orelse, (index, True, default)),
                branch_only(orelse, body, (index, False, default)),
            )
        value = merge(body, orelse)
        if chosen is not None and isinstance(value.ref, Texts) and body.const and orelse.const:
            # two constants (a format): each is the text only where the caller picks it
            index, default = chosen
            texts = ((body.const, (index, True, default)), (orelse.const, (index, False, default)))
            value = replace(value, ref=Texts(texts))
        if (
            self.runtime_test(node.test, test)
            and not (body.const is not None and body.const == orelse.const)
            and not _normalises(node)
        ):
            value = value.with_facts(
                value.facts | {self.fact(Kind.VARIES, node, "a conditional expression")}
            )
        return value

    def _chosen_by_param(self, test: ast.expr, value: Value) -> tuple[int, int] | None:
        """For a condition that is one parameter of the function being summarised, as it was
        given (``include_hour_min``, no reassignment): its index and the truth of its
        constant default (1, 0, or -1 where it has none or a default of another kind).
        None for any other condition."""
        func = self.frame.func
        if not isinstance(test, ast.Name) or func is None or self.frame.summary is None:
            return None
        index = self.frame.params.get(test.id)
        if index is None or len(value.facts) != 1 or test.id in _rebound(func):
            return None
        (fact,) = value.facts
        if not (
            fact.kind is Kind.PARAM
            and fact.param == index
            and fact.detail == test.id
            and fact.fix == (id(func),)
        ):
            return None
        return index, _default_truth(func, test.id)

    def branch_param(self, test: ast.expr) -> When | None:
        """For the condition of an ``if`` statement that is one parameter of the function
        being summarised, as it was given, or its negation (``if include_hour_min:``, ``if
        not include_hour_min:``): the ``Fact.when`` its body needs (the parameter's index,
        the truth the body needs, the truth of its default). None for any other condition."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        compared = _compared_constant(name)
        if compared is not None:
            # ``if kind == 0:`` (``!=``, or the constant first): the caller's argument, or
            # the default it leaves, picks the branch by whether it equals the constant
            name, const, equal = compared
            if self.frame.summary is None or self.frame.func is None:
                return None
            chosen = self._chosen_by_param(name, self.lookup(name.id))
            if chosen is None:
                return None
            index, _ = chosen
            default = _default_equality(self.frame.func, name.id, const)
            return (index, equal is not negated, default, const)
        if not isinstance(name, ast.Name) or self.frame.summary is None:
            return None
        chosen = self._chosen_by_param(name, self.lookup(name.id))
        if chosen is None:
            return None
        index, default = chosen
        return (index, not negated, default)

    def expr_Yield(self, node: ast.Yield | ast.YieldFrom) -> Value:
        """``yield X`` is a return for the caller that iterates the generator; the value
        sent back in is unknown."""
        if node.value is None:
            return CLEAN
        value = self.eval(node.value)
        summary = self.frame.summary
        if summary is not None:
            if isinstance(node, ast.YieldFrom):
                value = self.element_of(value)
            summary.returns.append((node.value, value))
            if summary.builder and self.frame.func is not None:
                self.record("system", value, node.value, f"{self.frame.func.name}() yield")
        return CLEAN

    expr_YieldFrom = expr_Yield

    def expr_Await(self, node: ast.Await) -> Value:
        return self.eval(node.value)

    def expr_Starred(self, node: ast.Starred) -> Value:
        return self.eval(node.value)

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value, node.value)
        return value

    def expr_List(self, node: ast.List | ast.Tuple) -> Value:
        values = [self.eval(e) for e in node.elts]
        facts: frozenset[Fact] = frozenset()
        for v in values:
            if v.facts:
                facts |= v.facts
        elem_str = bool(values) and all(v.shape is Shape.STR for v in values)
        name_key = literal_key(node.elts)
        literal = all(v.shape in (Shape.STR, Shape.NUM) or v.ref == "literal" for v in values)
        callables = [v.ref for v in values if v.shape is Shape.FUNC]
        ref: object = "literal" if literal else None
        if callables:
            ref = Table(tuple(callables))
        spread = tuple(isinstance(e, ast.Starred) for e in node.elts)
        starred = any(spread)
        # a starred list's elements of known fields count as the display's own (``[system,
        # *history]``), as both sides of ``[system] + history`` do, where one side's are known
        elem = None
        if isinstance(node, ast.List) and (
            not starred
            or not all(spread)
            or any(v.elem is not None for v, s in zip(values, spread, strict=True) if s)
        ):
            elem = list_elem(values, spread)
        return Value(
            facts,
            Shape.LIST,
            elem_str=elem_str,
            name_key=name_key,
            ref=ref,
            # a list's elements, while few (a message list, not a table of data)
            elts=None
            if starred or (isinstance(node, ast.List) and len(values) > 16)
            else tuple(values),
            elem=elem,
        )

    expr_Tuple = expr_List

    def expr_Set(self, node: ast.Set) -> Value:
        values = [self.eval(e) for e in node.elts]
        return Value(
            join(*values).facts if values else frozenset(),
            Shape.SET,
            elem_str=all(v.shape is Shape.STR for v in values),
            ref=(node.lineno, node.col_offset, "a set literal", *_stable_order(node, values)),
        )

    def expr_Dict(self, node: ast.Dict) -> Value:
        facts: frozenset[Fact] = frozenset()
        literal = True
        role = None
        marked: str | None = None
        content: ast.expr | None = None
        callables: list[object] = []
        items: list[tuple[str, Value]] | None = []
        # a log record or a file written by a serializer: never a request (no sink)
        # ... or the setup of a live session, sent once per connection (``live_setup_dicts``)
        logged = (
            id(node) in logged_dicts(self.tree)
            or id(node) in written_dicts(self.tree)
            or id(node) in live_setup_dicts(self.tree)
        )
        # the facts of each constant string key, kept apart while a ``**splat`` may follow
        under: list[tuple[str, frozenset[Fact]]] = []
        spread = False
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                literal = False
                items = None
                spread = True
                v = self.eval(item)
                # a splat dict of known constant keys (``{**state, **result, "entities": e}``)
                # keeps each time or id with the key it was under, so a read of another
                # constant key of the new dict (``.get("entities")``) leaves it out
                if v.facts:
                    facts |= keys_kept(v)
                continue
            else:
                if not isinstance(key, ast.Constant):
                    literal = False
                    self.eval(key)
                elif key.value == "role" and isinstance(item, ast.Constant):
                    role = item.value
                elif key.value == "role":
                    # a member of the module's role enum (``Role.USER``): marks what the
                    # message holds with that role, as the string does
                    marked = self.const_role(item)
                elif key.value == "content":
                    content = item
                elif key.value == "arguments" and isinstance(item, ast.Call):
                    self.argument_calls.add(item)
                v = self.eval(item)
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                    and key.value != "system"
                    and is_system_prompt_name(key.value)
                    and not logged
                ):
                    # a config entry named like a system prompt, as a keyword of that name is
                    self.record("system", v, item, f'{{"{key.value}": ...}}')
                if not (v.shape in (Shape.STR, Shape.NUM) or v.ref == "literal"):
                    literal = False
                if v.shape is Shape.FUNC:
                    callables.extend(v.ref if isinstance(v.ref, tuple) else (v.ref,))
                if items is not None:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        items.append((key.value, v))
                    else:
                        items = None
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and v.facts:
                    under.append((key.value, v.facts))
                    continue
            if v.facts:
                facts |= v.facts
        for name, held in under:
            # with a splat the keys are not all known (``items`` is None), but a constant key
            # still holds only what was written under it: a read of another constant key of
            # this dict (``request["instructions"]``) takes none of it (``key_read``)
            facts |= keyed(held, (name,), SPLAT_KEYED_KINDS) if spread else held
        if role in ("system", "developer") and content is not None and not logged:
            self.record_message_content(content, f'{{"role": "{role}"}} message')
        if callables:
            return Value(facts, Shape.DICT, ref=Table(tuple(callables)))
        # constant keys and scalar values: the key order and the repr are fixed by the source
        out = Value(
            facts,
            Shape.DICT,
            ref="literal" if literal else None,
            items=tuple(items) if items is not None else None,
        )
        # a chat message of a constant role: what it holds is marked with that role
        if role in MESSAGE_ROLES:
            return wrapped(out, role)
        return wrapped(out, marked) if marked is not None else out

    def expr_ListComp(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> Value:
        facts, saved = self.comprehension(node.generators)
        try:
            element = self.eval(node.elt)
        finally:
            self.frame.env = saved
        name_key = ""
        if isinstance(node.elt, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "name" for k in node.elt.keys
        ):
            name_key = "item"
        elif element.name_key == "elem":
            name_key = "attr"
        shape = Shape.SET if isinstance(node, ast.SetComp) else Shape.LIST
        if shape is Shape.SET:
            # a set keeps its own order, whatever order it was filled in (a listing's, the
            # order tasks finished in); what each element's text holds stays
            facts = frozenset(f for f in facts if f.kind is not Kind.UNORDERED)
        return Value(
            per_element_joined(element.facts | facts, node),
            shape,
            elem=element if shape is Shape.LIST and fields_known(element) else None,
            elem_str=element.shape is Shape.STR,
            name_key=name_key,
            ref=(node.lineno, node.col_offset, "a set comprehension")
            if shape is Shape.SET
            else None,
        )

    expr_GeneratorExp = expr_ListComp
    expr_SetComp = expr_ListComp

    def expr_DictComp(self, node: ast.DictComp) -> Value:
        facts, saved = self.comprehension(node.generators)
        try:
            key = self.eval(node.key)
            value = self.eval(node.value)
        finally:
            self.frame.env = saved
        keys_only = key.facts - value.facts - facts
        return Value(
            per_element_joined(key.facts | value.facts | facts, node),
            Shape.DICT,
            ref=KeyedBy(keys_only) if keys_only else None,
        )

    def comprehension(
        self, generators: list[ast.comprehension]
    ) -> tuple[frozenset[Fact], dict[str, Value]]:
        """Bind comprehension targets in a scratch scope.

        Returns the order and filter facts of the generators, and the saved environment.
        """
        saved = self.frame.env
        self.frame.env = dict(saved)
        facts: set[Fact] = set()
        for gen in generators:
            iterable = self.eval(gen.iter)
            unordered = self.iteration_fact(iterable, gen.iter)
            if unordered is not None:
                facts.add(unordered)
            # a list that already holds an unstable order keeps it through the iteration, and
            # what is built by iterating a parameter has that parameter's order
            facts.update(
                f for f in iterable.facts if f.kind in (Kind.TOOLS_UNSTABLE, Kind.UNORDERED)
            )
            facts.update(f for f in order_of(iterable.facts) if f.kind is Kind.PARAM)
            facts.update(sampled(iterable.facts))
            element = self.element_of(iterable)
            self.assign(gen.target, element, None)
            own = frozenset(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
            for cond in gen.ifs:
                tested = self.eval(cond)
                if self.runtime_test(cond, tested, own):
                    facts.add(self.fact(Kind.VARIES, cond, "a filter in a comprehension"))
                for subject, role in self.role_tests(cond):
                    # ``m["content"] for m in messages if m["role"] == "system"``: the element
                    # and the later filters see only the messages of that role, as in the body
                    # of ``if m["role"] == "system":`` in a loop
                    if isinstance(subject, ast.Name) and subject.id in own:
                        self.frame.env[subject.id] = narrowed(self.lookup(subject.id), role)
        return frozenset(facts), saved

    def expr_Lambda(self, node: ast.Lambda) -> Value:
        return CLEAN

    def expr_Call(self, node: ast.Call) -> Value:
        value = self.eval_call(node)
        if value.shape is not Shape.FUNC and self.qualify(node.func) == "asyncio.gather":
            # the awaitables' results, in their order: a list of what each returns
            # (https://docs.python.org/3/library/asyncio-task.html#asyncio.gather, 2026-12-03)
            if len(node.args) == 1 and isinstance(node.args[0], ast.Starred):
                elem = self.eval(node.args[0].value).elem
            else:
                elem = list_elem([self.eval(a) for a in node.args])
            if elem is not None:
                value = Value(value.facts, Shape.LIST, elem=elem)
        role = next((kw.value for kw in node.keywords if kw.arg == "role"), None)
        if role is None and node.args and _class_name(node.func):
            role = node.args[0]  # ``Message("user", text)``: the role first, by position
        constant = self.const_role(role) if role is not None else None
        if constant is not None:
            # a message object of a constant role (``ChatMessage(role="user", content=q)``,
            # ``Msg(Role.USER, text)`` with a member of the module's role enum)
            value = wrapped(value, constant)
        return value


def per_element_joined(
    facts: frozenset[Fact],
    node: ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp,
) -> frozenset[Fact]:
    """``facts`` of a comprehension with each tool list of one MCP server made after its first
    iterable (in a later ``for``, a filter or the element: once per element of that iterable,
    ``[t for s in sessions for t in (await s.list_tools()).tools]``) made a fact of several
    servers' lists joined (``joined_servers``); a list made before, or in the first iterable
    (``[t.name for t in listed.tools]``), is one server's still."""
    first = node.generators[0].iter
    start = (first.end_lineno or first.lineno, first.end_col_offset or 0)
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
    return joined_servers(facts, lambda f: made_within(f, start, end, start[0] + 1))


def _rebound(func: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The names ``func``'s body binds (assigned, deleted, a loop's or a with's target),
    found once per tree (kept on the node)."""
    known: frozenset[str] | None = func.__dict__.get("_rebound_names")
    if known is None:
        known = func.__dict__["_rebound_names"] = frozenset(
            node.id
            for stmt in func.body
            for node in ast.walk(stmt)
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
        )
    return known


def _default_truth(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> int:
    """The truth of the constant default of ``func``'s parameter ``name``: 1, 0, or -1 where
    it has no default or one that is not a constant."""
    default = _param_default(func, name)
    return int(bool(default.value)) if isinstance(default, ast.Constant) else -1


def _param_default(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    """The default of ``func``'s parameter ``name`` (positional or keyword-only), or None where
    it has none."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    given = positional[len(positional) - len(args.defaults) :]
    pairs = list(zip(given, args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    for arg, default in pairs:
        if arg.arg == name:
            return default
    return None


def _sliced(base: Value, part: ast.Slice) -> tuple[Value, ...] | None:
    """The known first elements (``Value.elts``) of ``base[part]``: those from a constant
    start of zero or more, up to a constant stop (a negative one counts from the end, known
    only where no element follows the known ones), or all of them reversed by ``[::-1]``
    where no element follows them; None where the slice has another step, or a start or
    stop that is not such a constant."""
    elts = base.elts
    if elts is None:
        return None
    if part.step is not None:
        reverse = (
            isinstance(part.step, ast.UnaryOp)
            and isinstance(part.step.op, ast.USub)
            and isinstance(part.step.operand, ast.Constant)
            and part.step.operand.value == 1
        )
        if reverse and part.lower is None and part.upper is None and not base.more:
            return elts[::-1]  # ``[::-1]`` of a list whose every element is known
        return None
    bounds: list[int | None] = []
    for bound in (part.lower, part.upper):
        if bound is None:
            bounds.append(None)
        elif isinstance(bound, ast.Constant) and type(bound.value) is int:
            bounds.append(bound.value)
        elif (
            isinstance(bound, ast.UnaryOp)
            and isinstance(bound.op, ast.USub)
            and isinstance(bound.operand, ast.Constant)
            and type(bound.operand.value) is int
        ):
            bounds.append(-bound.operand.value)
        else:
            return None
    start, stop = bounds
    if start is not None and start < 0:
        return None
    if stop is not None and stop < 0:
        # after further elements, the known ones stay first (which of them remain is not
        # known: an index past the end reads nothing)
        stop = None if base.more else len(elts) + stop
    return elts[start:stop]


def _compared_constant(test: ast.expr) -> tuple[ast.Name, int | str, bool] | None:
    """For ``name == const`` or ``name != const`` (either side first) with ``const`` an int or
    a str literal (not a bool): the name, the constant, and whether the test is ``==``. None
    for any other test."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
    ):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if not isinstance(left, ast.Name) or not isinstance(right, ast.Constant):
        return None
    const = right.value
    if isinstance(const, bool) or not isinstance(const, (int, str)):
        return None
    return left, const, isinstance(test.ops[0], ast.Eq)


def _default_equality(
    func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, const: object
) -> int:
    """Whether the constant default of ``func``'s parameter ``name`` equals ``const``: 1, 0, or
    -1 where it has no default or one that is not a constant."""
    default = _param_default(func, name)
    return int(default.value == const) if isinstance(default, ast.Constant) else -1


def _gathers(expr: ast.expr) -> bool:
    """True when ``expr`` holds a comprehension (a list of several elements, in order)."""
    return any(
        isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))
        for n in ast.walk(expr)
    )


def _class_name(func: ast.expr) -> bool:
    """True when a call's callee is written as a class name (``Message``, ``types.Content``),
    as ``CallsMixin.message_object`` requires for a role passed by position."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name[:1].isupper()


def _normalises(node: ast.IfExp) -> bool:
    """True for a conditional that only fills in or converts the value it tests, ``x if x
    else None``, ``str(x) if x is not None else "auto"``: one branch reads the tested value
    and the other is a constant, so the result changes exactly when that value does and
    chooses nothing of its own (the value's own facts are kept in the branch that reads it)."""
    subject = tested_subject(node.test)
    if subject is None:
        return False
    key = ast.dump(subject)
    for reads, other in ((node.body, node.orelse), (node.orelse, node.body)):
        if isinstance(other, ast.Constant) and any(
            isinstance(n, type(subject)) and ast.dump(n) == key for n in ast.walk(reads)
        ):
            return True
    return False


def _set_operation_ref(op: ast.operator, left: Value, right: Value) -> object:
    """The ``ref`` of ``left <op> right`` where one side is a set: the mark of an order that is
    the same in every process (``facts.STABLE_SETS``) stays where the result is a part of a
    marked set, ``left`` of ``-`` or either side of ``&`` (``words & {"a"} & {1, 2}`` is a
    part of ``{1, 2}``), or a union or symmetric difference of sets of numbers only; with
    anything else it may hold strings, and the result keeps a side's ref without the mark."""
    if isinstance(op, ast.BitAnd):
        for side in (left, right):
            if stable_set(side):
                return side.ref
    elif isinstance(op, ast.Sub):
        if stable_set(left):
            return left.ref
    elif all(
        stable_set(side) and isinstance(side.ref, tuple) and side.ref[3:] == ("numbers",)
        for side in (left, right)
    ):
        return left.ref
    ref = left.ref or right.ref
    return ref[:3] if isinstance(ref, tuple) and len(ref) > 3 else ref


def _stable_order(node: ast.Set, values: list[Value]) -> tuple[str, ...]:
    """The mark of a set literal whose order is the same in every process, else ``()`` (the
    set's ``ref`` then ends with it, ``CallsMixin.iteration_fact``): ``("numbers",)`` when
    its elements are all numbers (a number hashes to itself), ``("one element",)`` for a
    single element that is not unpacked (one element has one order). What is added to the
    set later keeps the mark only while it still holds (``calls.added_to_set``)."""
    if values and all(v.shape is Shape.NUM for v in values):
        return ("numbers",)
    if len(node.elts) == 1 and not isinstance(node.elts[0], ast.Starred):
        return ("one element",)
    return ()
