"""Call evaluation for the taint engine: dispatch, same-module summaries, methods, attributes.

``CallsMixin`` is mixed into ``taint.Analyzer``; it reads the analyzer's state (frames, imports,
summaries) through the declarations on ``frames.EngineState``. Calls to known library functions
are in ``library.py``.
"""

from __future__ import annotations

import ast
import datetime
import pathlib
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import sinks
from .conversations import held_appends, held_contents
from .facts import (
    ASSUMED,
    CLEAN,
    MAX_VALUE_FACTS,
    MESSAGE_ROLES,
    ONCE,
    ONE_SERVER,
    OVERRIDE,
    SAMPLED,
    SELF,
    SPLATTED,
    AnalysisBoundError,
    Fact,
    Kind,
    Shape,
    Step,
    Value,
    When,
    any_key_read,
    branch_only,
    canonical,
    entry_key,
    entry_path,
    entry_suffix,
    field_keyed,
    field_read,
    fields_read,
    held_once,
    into_fields,
    join,
    joined_servers,
    key_read,
    keyed_field,
    map_facts,
    method_result,
    narrowed,
    other_keys_dropped,
    param_entry,
    param_path,
    passed_role,
    replace,
    sampled,
    stable_set,
    unfielded,
)
from .frames import (
    Bound,
    Choice,
    ClassInfo,
    EngineState,
    ExternalClass,
    KeyedBy,
    Summary,
    Table,
    Texts,
    element_fields,
    fields_known,
    held_inside,
    is_abstract,
    keys_kept,
    known_elem,
    listed_elem,
    merge,
    merge_elem,
    set_values_birth,
    str_valued,
)
from .library import (
    FEW_DETAIL,
    imported_modules,
    range_draw_unique,
    sample_of,
    source_text,
    span,
    substituted,
)
from .nodes import all_nodes, name_text
from .regions import (
    later_history_turns,
    measured_messages,
    tail_system_turns,
    unread_messages,
    yielded_turns,
)
from .sources import (
    DATETIME_ATTR_GRANULARITY,
    ENV_ATTRS,
    PASS_THROUGH_FUNCTIONS,
    PASS_THROUGH_METHODS,
    TOOL_PRODUCERS_METHODS,
    UNORDERED_PATH_METHODS,
    ZONE_ATTRS,
    format_granularity,
)
from .toolnames import mutated_key

_GRAIN_RANK = {"subday": 0, "day": 1, "": 2}
_STR_KEEP_CONST = {"strip", "lstrip", "rstrip", "lower", "upper", "title", "expandtabs"}
#: methods that return a file's contents (pathlib.Path, zipfile.Path, importlib.resources
#: Traversable: https://docs.python.org/3/library/pathlib.html#pathlib.Path.read_text, checked
#: 2026-12-03)
FILE_CONTENT_METHODS = frozenset({"read_text", "read_bytes"})
#: methods that read a stream's data: a file object, ``asyncio.StreamReader``, a socket
#: (https://docs.python.org/3/library/io.html#io.RawIOBase.read,
#: https://docs.python.org/3/library/asyncio-stream.html#asyncio.StreamReader,
#: https://docs.python.org/3/library/socket.html#socket.socket.recv, checked 2026-12-03);
#: their arguments (a size, a separator) are not in what they return
STREAM_READ_METHODS = frozenset(
    {"read", "read1", "readline", "readlines", "readexactly", "readuntil", "recv"}
)
#: streams whose data is the initial value they are built with
#: (https://docs.python.org/3/library/io.html#io.StringIO, checked 2026-12-04)
IN_MEMORY_STREAMS = frozenset({"io.StringIO", "io.BytesIO"})
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
#: methods of the value types a parameter may hold (str, bytes, numbers, containers, dates and
#: times, paths, ``string.Template``): such a method of an element of a parameter's container
#: returns what that element holds (``line.strip()``). Any other method of such an element
#: whose class the analysis cannot see (``mw.on_prompt(prompt)`` on an element of a list of
#: middlewares) need not return any of what the objects hold in their fields.
_VALUE_TYPE_METHODS = frozenset(
    name
    for kind in (
        str,
        bytes,
        int,
        float,
        list,
        dict,
        set,
        tuple,
        datetime.datetime,
        datetime.timedelta,
        datetime.time,
        pathlib.PurePath,
        string.Template,
    )
    for name in dir(kind)
    if not name.startswith("_")
)
#: list methods after which an index no longer names the element it named
_REORDERING = frozenset({"pop", "remove", "reverse", "clear"})
#: a datetime's methods that give its time zone's name, offset or summer-time shift, no part of
#: the moment (https://docs.python.org/3/library/datetime.html#datetime.datetime.utcoffset,
#: checked 2026-12-07)
_ZONE_METHODS = frozenset({"tzname", "utcoffset", "dst"})
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

    #: ``unproven(fact, steps)`` by (fact, steps), for one analysis (``unproven_all``)
    unproven_memo: dict[tuple[Fact, tuple[Step, ...]], Fact]
    #: ``passed``'s results by its arguments, for one analysis
    passed_memo: dict[tuple[frozenset[Fact], str, tuple[Step, ...], str], frozenset[Fact]]

    def unproven_all(self, facts: frozenset[Fact], steps: tuple[Step, ...]) -> frozenset[Fact]:
        """``frozenset(unproven(f, steps) for f in facts)``, each found in ``unproven_memo``
        when it was made before (``unproven`` depends on nothing else): the same argument facts
        meet the same unproven steps at call after call of one module (87% of the calls in a
        serial cold run of vectorize-io/hindsight, which spent about 8% of its CPU time on
        them: 17.9 -> 17.0 s with the memo, deepagents 22.9 -> 21.6 s, 2 shared cores)."""
        memo = self.unproven_memo
        out = []
        for f in facts:
            key = (f, steps)
            done = memo.get(key)
            if done is None:
                done = memo[key] = unproven(f, steps)
            out.append(done)
        return frozenset(out)

    def passed(
        self, given: frozenset[Fact], grain: str, steps: tuple[Step, ...], role: str
    ) -> frozenset[Fact]:
        """What a caller's argument facts ``given`` become where the callee's PARAM fact has
        granularity ``grain``, the unproven ``steps`` (``unseen_steps``) and ``role``; each
        found in ``passed_memo`` when it was made before in this analysis (it depends on
        nothing else): the same argument facts meet the same parameter facts at call after
        call, a summary's return value and stores name them again and again, and each is a
        map over every one of the argument's facts."""
        key = (given, grain, steps, role)
        done = self.passed_memo.get(key)
        if done is None:
            out = with_grain(given, grain)
            if steps:
                # the callee passes this parameter on only through a call it cannot see: so
                # is the argument, here
                out = self.unproven_all(out, steps)
            done = self.passed_memo[key] = passed_role(out, role)
        return done

    def eval_call(self, node: ast.Call) -> Value:
        func = node.func
        for kw in node.keywords:
            if kw.arg == "arguments" and isinstance(kw.value, ast.Call):
                self.argument_calls.add(kw.value)
        chain = sinks.call_chain(func)
        qual = self.qualify(func)
        if qual == "asyncio.to_thread":
            handed = _handed_call(node)
            if handed is not None:
                # ``await asyncio.to_thread(f, *args, **kwargs)`` runs ``f(*args, **kwargs)`` in
                # a worker thread: that call is made, with those arguments, and a keyword named
                # like a system prompt is ``f``'s (a helper that saves a prompt revision is no
                # sink; ``to_thread(client.messages.create, system=...)`` is a request)
                return self.eval_call(handed)
        spec = sinks.match(node, chain, qual, self.extra_sinks)
        if spec is not None:
            return self.handle_sink(spec, node)
        if chain[-1] in sinks.HTTP_POSTS:
            posted = self.http_post(node)
            if posted is not None:
                return posted
        # a message object of a literal system role, whatever builds it (a class of this or
        # another module, or one the analysis cannot see)
        self.message_object(node, chain)
        if qual == "builtins.getattr":
            field = self.getattr_field(node)
            if field is not None:
                return field
        frame = self.frame
        receiver: Value | None = None
        made: ClassInfo | None = None
        # the arguments' values, once evaluated for the summaries of methods that may run
        memo: dict[int, Value] = {}
        if isinstance(func, ast.Attribute) and qual is None:
            receiver = self.eval(func.value)
            if isinstance(receiver.ref, Choice):
                if self.recording:
                    # an object of one of several classes: what each class's method sends of
                    # the arguments is sent; the result is an unknown call's, below
                    self.call_choices(receiver, func, node, memo)
                else:
                    # not in the class pre-pass, whose summaries are dropped
                    self.skipped_unrecorded()
            target = self.method_of(receiver, func.attr)
            if target is not None:
                called = self.call_bound(Bound(target, receiver, func.value), node, memo=memo)
                self.call_overrides(receiver, func, node, memo)
                return called
        if isinstance(func, ast.Name):
            local = frame.env.get(func.id)
            if local is not None and local.shape is Shape.FUNC:
                return self.call_value(local, node)
            if (
                local is not None
                and func.id == frame.self_name
                and isinstance(frame.cls, ClassInfo)
                and isinstance(frame.func, (ast.FunctionDef, ast.AsyncFunctionDef))
                and any(
                    isinstance(d, ast.Name) and d.id == "classmethod"
                    for d in frame.func.decorator_list
                )
            ):
                # ``cls(...)`` in a classmethod (``Config.load_from_env()`` returning
                # ``cls(**kwargs)``): an instance of the class (or of a subclass), so its
                # methods resolve; what it holds stays an unknown call's (unproven)
                made = frame.cls
            if local is None and func.id in self.functions:
                return self.apply_summary(self.functions[func.id], node)
        elif not isinstance(func, ast.Attribute):
            callee = self.eval(func)
            if callee.shape is Shape.FUNC:
                return self.call_value(callee, node)
        if qual is not None and not (isinstance(func, ast.Name) and func.id in frame.env):
            found = self.external(qual)
            if isinstance(found, Summary):
                return self.call_bound(Bound(found), node)
            if isinstance(found, ExternalClass):
                return self.construct(found, node)
        args = [memo.get(id(a)) or self.eval(a) for a in node.args]
        kwargs: dict[str | None, Value] = {}
        # a ``@dataclass`` record of this module, built of nothing but this module's classes,
        # is read where it is built (``construct``), as another module's class is: its
        # ``system_prompt=`` is no sink by its name alone, only the field it is stored in
        # where that reaches a sink (a record dumped to a report file sends nothing); a plain
        # class of the program (an agent-like ``Agent(system_message=)``) stays a sink
        own_record = (
            isinstance(func, ast.Name)
            and func.id not in frame.env
            and func.id in self.classes
            and _record_of_this_module(self.classes[func.id], self.classes)
        )
        # a live session's setup (``types.LiveConnectConfig``), sent once per connection
        setup = qual in sinks.SESSION_SETUPS
        for kw in node.keywords:
            value = memo.get(id(kw.value)) or self.eval(kw.value)
            kwargs[kw.arg] = join(kwargs[kw.arg], value) if kw.arg in kwargs else value
            if (
                kw.arg is not None
                and kw.arg != "system"
                and sinks.is_system_prompt_name(kw.arg)
                and not own_record
                and not setup
            ):
                self.record("system", value, kw.value, f"{chain[-1]}({kw.arg}=)")
        # a keyword named like a system prompt makes the call a sink where the callee is not
        # seen: another module's function or class of the program is read on the next round
        # even when what it is given has no facts here (a parameter), so that a helper that
        # only puts its ``system_instructions=`` on a tracing span is no sink
        named = not setup and any(
            k is not None and k != "system" and sinks.is_system_prompt_name(k) for k in kwargs
        )
        if qual is not None:
            result = self.qualified_call(qual, node, args, kwargs)
            if result is not None:
                return self.pin_if_once(result)
            if named or any(
                f.kind not in (Kind.PARAM, Kind.LOOP)
                for v in (*args, *kwargs.values())
                for f in v.facts
            ):
                self.external(qual, carries=True)
        if isinstance(func, ast.Name) and func.id not in frame.env and func.id in self.classes:
            return self.construct(self.classes[func.id], node, args, kwargs)
        if isinstance(func, ast.Attribute) and receiver is not None:
            result = self.method_call(receiver, func, node, args, kwargs)
            if result is not None:
                return result
            if isinstance(receiver.ref, Unresolved) and (
                named
                or any(
                    f.kind not in (Kind.PARAM, Kind.LOOP)
                    for v in (*args, *kwargs.values())
                    for f in v.facts
                )
                or any(self.frame.mutation_facts)
            ):
                # a method of an object built by another module's callable, given a value
                # with facts: the driver supplies that class on the next round
                self.external(receiver.ref.qual, carries=True)
        # a function we cannot see: its result carries its arguments' facts, except those of
        # whole objects (a project class's instance, ``self``): what the object holds in its
        # fields does not flow into every result computed from it
        parts = [_unobjected(v) for v in (*args, *kwargs.values())]
        if receiver is not None:
            parts.append(_unobjected(self.called_on_param(receiver, func)))
        tag: object = (
            Unresolved(qual) if qual is not None and not qual.startswith("builtins.") else None
        )
        if made is not None:
            tag = made
        if not parts:
            return CLEAN if tag is None else Value(ref=tag)
        joined = join(*parts)
        if not joined.facts:
            return CLEAN if tag is None else Value(ref=tag)
        own = parts[-1].facts if receiver is not None else frozenset()
        return Value(self.assumed(joined.facts, node, own), ref=tag)

    def called_on_param(self, receiver: Value, func: ast.expr) -> Value:
        """``receiver`` as the receiver of a method the analysis cannot resolve
        (``sheet.inventory_list()``): where it is a parameter of ours whose class is not known,
        its PARAM fact names that method's result (``method_result``), so a caller whose
        argument is an object of a project class whose fields are known passes only what that
        class's method returns of them (``method_result_of``), not a time stamped in another
        field; any other caller passes the whole argument, as before. A method that a str,
        a container, a number, a date or a path has (``text.strip()``) keeps the parameter."""
        if not isinstance(func, ast.Attribute):
            return receiver
        return self.method_named(receiver, func.attr)

    def method_named(self, receiver: Value, name: str) -> Value:
        """``receiver`` with its PARAM facts of a whole parameter of ours naming the result of
        its method ``name`` (``called_on_param``)."""
        frame = self.frame
        if (
            frame.func is None
            or receiver.ref is not None
            or receiver.items is not None
            or receiver.shape is not Shape.UNKNOWN
            or name.startswith("__")
            or name in _VALUE_TYPE_METHODS
        ):
            return receiver
        ours = (id(frame.func),)

        def whole(f: Fact) -> bool:
            return (
                f.kind is Kind.PARAM and f.param >= 0 and f.fix == ours and f.detail.isidentifier()
            )

        if not any(whole(f) for f in receiver.facts):
            return receiver
        return receiver.with_facts(
            frozenset(
                replace(f, detail=f"{f.detail}.{name}()") if whole(f) else f for f in receiver.facts
            )
        )

    def method_result_of(self, argument: Value, name: str, line: int) -> frozenset[Fact]:
        """What the method ``name`` returns of ``argument``, a caller's argument (at ``line``)
        for a parameter whose method result a callee returns or sends (``called_on_param``):
        where the argument is an object of a project class whose fields are known, and that
        class's method returns only fields of its receiver (``return
        json.loads(self.inventory)``), what the argument holds in those fields; otherwise all
        it holds. Where the argument's class is not known here either, that is a method the
        analysis cannot see, as the same call written here would be (``assumed``): a whole
        parameter of ours names that method's result again (``method_named``), so our caller
        decides, and any other value it holds is passed on unproven, unless the method is
        documented to return what its receiver holds (``PASS_THROUGH_METHODS``)."""
        if name in _ZONE_METHODS and _timeish(argument):
            # a time's zone name or offset, not the moment (``_ZONE_METHODS``)
            return frozenset(f for f in argument.facts if f.kind is not Kind.TIME)
        if not isinstance(argument.ref, (ClassInfo, ExternalClass)):
            facts = self.method_named(argument, name).facts
            if name in PASS_THROUGH_METHODS:
                return facts
            step = (f"{ASSUMED} {name}()", line, name, "")
            return frozenset(
                f.passed_on(step) if f.kind not in _UNCHAINED and f.kind is not Kind.PARAM else f
                for f in facts
            )
        if argument.items is None:
            return argument.facts
        target = self.method_of(argument, name)
        if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if target.decorator_list:
                # a property, a static or class method, or one a decorator wraps
                return argument.facts
            summary = self.summary(target)
        elif isinstance(target, Summary):
            summary = target
        else:
            return argument.facts
        fields = dict(argument.items)
        out: set[Fact] = set()
        for g in summary.ret.facts:
            if g.kind is not Kind.PARAM or g.fix != (summary.key,) or g.when:
                # a value the method makes itself: all the argument holds, as before
                return argument.facts
            if g.param != SELF:
                # an argument of the method: the callee's own, already in its result
                continue
            held = (
                fields.get(g.detail[len("self.") :].split(".")[0], CLEAN).facts
                if g.detail.startswith("self.")
                else argument.facts
            )
            # through a call the method cannot see (``json.loads(self.inventory)``): unproven
            out |= self.passed(held, g.granularity, unseen_steps(g), g.role)
        return frozenset(out)

    def getattr_field(self, node: ast.Call) -> Value | None:
        """``getattr(obj, "name")`` read as ``obj.name`` (joined with the default of
        ``getattr(obj, "name", default)``); None when the name is not a constant identifier or
        the call has keywords or starred arguments (then it is an unknown call)."""
        if node.keywords or not 2 <= len(node.args) <= 3:
            return None
        if any(isinstance(a, ast.Starred) for a in node.args):
            return None
        name = node.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return None
        if not name.value.isidentifier():
            return None
        # one Attribute node per call, kept on the call: analyses key values by node
        field = node.__dict__.get("_field_read")
        if not isinstance(field, ast.Attribute):
            field = ast.copy_location(
                ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load()), node
            )
            field.end_lineno = node.end_lineno
            field.end_col_offset = node.end_col_offset
            node.__dict__["_field_read"] = field
        value = self.eval(field)
        if len(node.args) == 3:
            value = join(value, self.eval(node.args[2]))
        return value

    def assumed(
        self, facts: frozenset[Fact], node: ast.Call, receiver: frozenset[Fact] = frozenset()
    ) -> frozenset[Fact]:
        """Facts carried through a call the analysis cannot see: its result is assumed to
        carry its arguments' volatile or order-unstable values (it might as well sort or drop
        them), so their chain gains an ``ASSUMED`` step (an unproven flow: no finding, shown
        by ``--explain``). A parameter's fact is marked too, so that the caller's argument is
        unproven there as well, unless it is one of the ``receiver``'s facts: a method of the
        parameter's own value (``moment.astimezone(zone)``, ``text.title()``) returns what
        that value holds. For an element of the parameter's container (a receiver with a
        ``LOOP`` fact, ``for mw in self.middlewares``) only a value type's method
        (``_VALUE_TYPE_METHODS``) does: ``mw.on_prompt(text)`` need not return what the
        middlewares hold in their fields, which is what the caller's container carries."""
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in PASS_THROUGH_METHODS
            and not self.module_function(func)
        ) or self.qualify(func) in PASS_THROUGH_FUNCTIONS:
            return facts  # documented to return what its arguments hold
        name, line = called_name(node)
        step = (f"{ASSUMED} {name}()", line, name, "")
        if any(f.kind is Kind.LOOP for f in receiver) and not (
            isinstance(func, ast.Attribute) and func.attr in _VALUE_TYPE_METHODS
        ):
            # an element of what the parameter holds (``for mw in self.middlewares``): the
            # caller's argument is the whole container, each element's fields included
            receiver = frozenset()
        return frozenset(
            f.passed_on(step)
            if f.kind not in _UNCHAINED and not (f.kind is Kind.PARAM and f in receiver)
            else f
            for f in facts
        )

    def module_function(self, func: ast.Attribute) -> bool:
        """Whether ``func`` is a function of a module imported whole (``import chevron``, then
        ``chevron.render(template=..., data=..., partials_ext=...)``), not a method of a
        template object (Jinja's ``Template.render``, LangChain's ``format``): a library's own
        function, whose arguments need not all be in what it returns (a file extension to look
        partials up by, a delimiter)."""
        base = func.value
        return (
            isinstance(base, ast.Name)
            and base.id in imported_modules(self.tree)
            and base.id not in self.frame.env
            and base.id not in self.module_frame.env
        )

    def message_object(self, node: ast.Call, chain: tuple[str, ...]) -> None:
        """A message object built with a literal system role, ``Message(role="system",
        content=...)`` or ``Message("system", text)`` (a project's own class, LlamaIndex
        ``ChatMessage``, ...): its content is system text. The literal role is the evidence;
        the class name alone is not. A class of the linted program counts only where some
        module is seen to turn such objects into request messages (``converted_classes``):
        the program driver names the others in ``unsent`` (a terminal's display records)."""
        if not chain[-1][:1].isupper():
            return  # not a class's name: no message object, whatever its role
        role = next((kw.value for kw in node.keywords if kw.arg == "role"), None)
        positional = role is None and bool(node.args)
        if positional:
            role = node.args[0]
        func = node.func
        own = (
            isinstance(func, ast.Name) and func.id in self.classes and func.id not in self.frame.env
        )
        if isinstance(func, ast.Name) and own:
            qual: str | None = f"{self.module}.{func.id}"
        else:
            qual = self.qualify(func)
        if role is None and chain[-1][:1].isupper():
            # a class of the program whose body fixes the role (``class SystemMessage:
            # role: Literal["system"] = "system"``), built with its content by keyword
            cls = self.classes[func.id] if isinstance(func, ast.Name) and own else None
            fixed = cls.fixed_role() if cls is not None else ""
            if cls is None and qual is not None:
                found = self.externals.get(qual)
                fixed = found.role if isinstance(found, ExternalClass) else ""
            if fixed:
                role = ast.Constant(value=fixed)
        if not (isinstance(role, ast.Constant) and role.value in ("system", "developer")):
            return
        if qual is not None and not qual.startswith("builtins."):
            self.message_classes.add(qual)
            if qual in self.unsent:
                return
        label = f"{chain[-1]}(role={role.value!r})"
        if positional and len(node.args) > 1:
            self.record_message_content(node.args[1], label)
        for kw in node.keywords:
            if kw.arg in ("content", "text", "blocks"):
                self.record_message_content(kw.value, label)

    def self_attr_facts(self, self_name: str, attr: str) -> frozenset[Fact]:
        """The SELF facts standing for ``self.<attr>`` of the caller's object: one per SELF
        fact of the receiver, with ``detail`` naming the attribute."""
        holder = self.frame.env.get(self_name)
        if holder is None:
            return frozenset()
        return frozenset(
            replace(f, detail=f"self.{attr}")
            if f.kind is Kind.PARAM and f.param == SELF and f.detail == self_name
            else f
            for f in holder.facts
        )

    def own_fields(self, value: Value, path: list[str]) -> frozenset[Fact] | None:
        """What ``value.<path>`` holds when ``value`` is this method's own object, passed
        whole into a helper its class built (``self.writer = ReportGenerator(self)``, whose
        methods read ``self.researcher.cfg.role``): the field of ``self`` that the path names,
        read as ``self.<path>`` here, not every field of it. None for any other value."""
        frame = self.frame
        if frame.cls is None or frame.self_name is None or value.ref is not frame.cls:
            return None
        if not any(
            f.kind is Kind.PARAM and f.param == SELF and "." not in f.detail for f in value.facts
        ):
            return None
        node: ast.expr = ast.Name(id=frame.self_name, ctx=ast.Load())
        for part in path:
            node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
        return self.eval(node).facts

    def pin_if_once(self, value: Value) -> Value:
        return value.pinned() if self.frame.made_once else value

    # ------------------------------------------------------------------ project functions

    def method_of(self, receiver: Value, name: str) -> object:
        """The method ``name`` of the project class ``receiver`` is an instance of (an AST node
        or an external summary), or None."""
        cls = receiver.ref
        if isinstance(cls, ClassInfo):
            return cls.find_method(name)
        if isinstance(cls, ExternalClass):
            return cls.methods.get(name)
        return None

    def own_method(self, receiver: Value, holder: ast.expr, name: str) -> bool:
        """Whether ``receiver`` (the value of ``holder``) is, or may be, an instance of a
        project class that defines its own method ``name`` (an API client's ``list_tools()``,
        not MCP's): one of the classes of a ``Choice`` that does, or the class a parameter is
        annotated with where the module takes that name from another module's ``import *``.
        An object of another module's class not known yet (``Unresolved``, or such an
        annotation) asks the driver for that class, so that on the next pass its method is
        found where it defines one (``method_of``, or here)."""
        ref = receiver.ref
        if isinstance(ref, Choice):
            return any(
                self.method_of(replace(receiver, ref=cls), name) is not None for cls in ref.classes
            )
        if isinstance(ref, Unresolved):
            self.external(ref.qual, carries=True)
            return False
        if ref is not None:
            return False
        for qual in self.star_imported_class(holder):
            found = self.external(qual, carries=True)
            if isinstance(found, ExternalClass) and found.methods.get(name) is not None:
                return True
        return False

    def star_imported_class(self, holder: ast.expr) -> list[str]:
        """The qualified names the class a parameter ``holder`` is annotated with may have
        (``def f(api: ApiRequest)``) when that name is neither defined nor imported by name
        here: ``<module>.<name>`` for each module this one imports ``*`` from."""
        func = self.frame.func
        if not isinstance(holder, ast.Name) or func is None:
            return []
        args = func.args
        annotation = next(
            (
                a.annotation
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if a.arg == holder.id
            ),
            None,
        )
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = ast.Name(id=annotation.value)
        if (
            not isinstance(annotation, ast.Name)
            or annotation.id in self.classes
            or annotation.id in self.imports
        ):
            return []
        found = []
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                module = self.absolute_module(stmt.module, stmt.level)
                if module is not None:
                    found.append(f"{module}.{annotation.id}")
        return found

    def call_choices(
        self, receiver: Value, func: ast.Attribute, node: ast.Call, memo: dict[int, Value]
    ) -> None:
        """A method called on an object that is one of several project classes' instances,
        or may be (``Choice``): which runs is chosen at run time, so an argument that one
        class's method (or an override of an abstract one) passes to a sink reaches it, with
        a step naming that method's call. The object's fields are not known, so what the
        methods send of them, return or store is not taken."""
        assert isinstance(receiver.ref, Choice)
        for cls in receiver.ref.classes:
            one = replace(receiver, ref=cls, items=None)
            target = self.method_of(one, func.attr)
            if target is None:
                continue
            if self.may_send(target):
                self.call_bound(
                    Bound(target, one, func.value),
                    node,
                    via="its class chosen at run time",
                    sinks_only=True,
                    memo=memo,
                )
            self.call_overrides(one, func, node, memo)

    def may_send(self, target: object) -> bool:
        """Whether a method that may run at a call can send an argument to a sink: another
        module's with a sink in its summary, or one of this module's whose text holds a
        trigger word or a call of a sink function (``relevant``; the others' summaries are
        not computed for this)."""
        if isinstance(target, Summary):
            return bool(target.param_sinks) or any(a[:1].isdigit() for a in target.attr_sinks)
        return isinstance(target, ast.AST) and self.relevant(target)

    def call_overrides(
        self, receiver: Value, func: ast.Attribute, node: ast.Call, memo: dict[int, Value]
    ) -> None:
        """An abstract method called on an object of a project base class (``is_abstract``):
        the methods that override it in the program's subclasses (class hierarchy analysis;
        of this module's classes, or those the driver found in other modules) may run, so an
        argument one of them passes to a sink reaches it, with a step naming the override's
        call. What they return or store is not taken."""
        cls, name = receiver.ref, func.attr
        if not self.recording:
            # the class pre-pass: its summaries are dropped
            if (isinstance(cls, ExternalClass) and name in cls.abstract) or (
                isinstance(cls, ClassInfo)
                and (method := cls.find_method(name)) is not None
                and is_abstract(method)
            ):
                self.skipped_unrecorded()
            return
        overrides: list[object] = []
        if isinstance(cls, ExternalClass):
            if name not in cls.abstract:
                return
            base = f"{cls.qualname.rsplit('.', 1)[-1]}.{name}"
            overrides.extend(cls.overrides.get(name, ()))
        elif isinstance(cls, ClassInfo):
            method = cls.find_method(name)
            if method is None or not is_abstract(method):
                return
            base = f"{cls.node.name}.{name}"
            for info in self.classes.values():
                own = info.methods.get(name)
                if (
                    own is not None
                    and own is not method
                    and self.may_send(own)
                    and _inherits(info, cls)
                ):
                    overrides.append(own)
        for target in overrides:
            self.call_bound(
                Bound(target, receiver, func.value),
                node,
                via=f"which overrides {base}",
                sinks_only=True,
                memo=memo,
            )

    def construct(
        self,
        cls: ClassInfo | ExternalClass,
        node: ast.Call,
        args: list[Value] | None = None,
        kwargs: dict[str | None, Value] | None = None,
    ) -> Value:
        """An instance of a project class: it holds what its ``__init__`` stores into
        ``self`` (with this call's arguments), and its methods resolve through ``ref``."""
        init = self.method_of(Value(ref=cls), "__init__")
        default_repr = cls.default_repr
        if init is None:
            if args is None:
                args = [self.eval(a) for a in node.args]
                kwargs = {kw.arg: self.eval(kw.value) for kw in node.keywords}
            parts = [*args, *(kwargs or {}).values()]
            facts = join(*parts).facts if parts else frozenset()
            # a dataclass or a pydantic model: keyword arguments are its fields
            fields = None
            named = dict(kwargs or {})
            if node.args and isinstance(cls, ClassInfo) and not cls.bases:
                # a dataclass given its fields by position: in the order the class declares them
                order = _dataclass_fields(cls.node)
                if len(node.args) <= len(order) and not any(
                    isinstance(a, ast.Starred) for a in node.args
                ):
                    named.update(zip(order, args, strict=False))
                else:
                    named = {}
            if isinstance(cls, ClassInfo) and not (node.args and not named):
                # a field left to its ``default_factory`` gets what the factory makes, per
                # instance (``created_at: str = field(default_factory=lambda: now())``)
                for name, factory in _default_factories(cls.node).items():
                    if name not in named:
                        made = self.factory_value(factory)
                        if made.facts:
                            named[name] = made
                            # the object's own, as that field's: where its fields are no
                            # longer known (kept in a dict, read back with ``.get``), a read
                            # of another field does not take it (``field_read``)
                            facts = facts | field_keyed(made.facts, name)
            if named and None not in named and (not node.args or len(named) >= len(node.args)):
                fields = tuple(sorted((str(k), v) for k, v in named.items()))
            shape = Shape.OBJECT if default_repr else Shape.UNKNOWN
            return Value(facts, shape, ref=cls, items=fields)
        instance = Value(shape=Shape.OBJECT if default_repr else Shape.UNKNOWN, ref=cls, items=())
        stored = self.call_bound(Bound(init, instance, None), node, stores_only=True)
        facts, items = stored.facts, stored.items
        if isinstance(cls, ClassInfo) and items is not None:
            # a pydantic model whose own ``__init__`` hands its fields to pydantic's: a field
            # neither given here, nor by that ``__init__``, gets what its factory makes
            kept = dict(items)
            for name, factory in _handed_factories(cls.node, init, node).items():
                if name not in kept:
                    made = self.factory_value(factory)
                    if made.facts:
                        kept[name] = made
                        facts = facts | made.facts
            if len(kept) > len(items):
                items = tuple(sorted(kept.items()))
        return Value(facts, instance.shape, ref=cls, items=items)

    def factory_value(self, factory: ast.expr) -> Value:
        """What a field's ``default_factory`` makes when an instance is built here: the body of
        a lambda, or a call of a named callable (``datetime.now``, ``uuid.uuid4``); anything
        else (a class, ``list``) makes nothing followed."""
        if isinstance(factory, ast.Lambda):
            if factory.args.args or factory.args.posonlyargs or factory.args.kwonlyargs:
                return CLEAN
            return self.eval(factory.body)
        if isinstance(factory, (ast.Name, ast.Attribute)):
            return self.eval(_bare_call(factory))
        return CLEAN

    def call_value(self, callee: Value, node: ast.Call) -> Value:
        """Call a callable value (a nested function, a bound method, a table of them)."""
        ref = callee.ref.targets if isinstance(callee.ref, Table) else callee.ref
        targets = ref if isinstance(ref, tuple) else (ref,)
        results = []
        for target in targets:
            if isinstance(target, Bound):
                results.append(self.call_bound(target, node))
            elif isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
                results.append(self.apply_summary(target, node))
        if not results:
            return CLEAN
        return results[0] if len(results) == 1 else join(*results)

    def apply_summary(self, func: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.Call) -> Value:
        """The value of calling a same-module function; arguments flow through its summary.
        A function nested in a method is called on the method's own object: what it stores
        into ``self`` is stored into the caller's ``self``."""
        closure = self.closures.get(func)
        self_name = self.frame.self_name
        if (
            closure is not None
            and closure.self_name is not None
            and closure.self_name == self_name
            and closure.cls is self.frame.cls
        ):
            receiver = ast.copy_location(ast.Name(id=self_name, ctx=ast.Load()), node.func)
            return self.call_bound(Bound(func, self.lookup(self_name), receiver), node)
        return self.call_bound(Bound(func), node)

    def call_bound(
        self,
        bound: Bound,
        node: ast.Call,
        stores_only: bool = False,
        via: str = "",
        sinks_only: bool = False,
        memo: dict[int, Value] | None = None,
        returned: str = "returned by",
    ) -> Value:
        """Apply a summary at a call: PARAM facts of its return value become the arguments'
        facts (``SELF`` the receiver's), arguments reaching a sink inside are recorded here,
        and what it stores into an argument or the receiver is added to that object.

        With ``stores_only`` the value returned is what was stored into the receiver (for a
        constructor call). With ``via`` (why this method runs: "which overrides
        Base.method", "its class chosen at run time"), each argument that
        reaches a sink carries a step at the method's call that sends it (none is recorded
        where that call is not known); with ``sinks_only``, only those sinks are recorded and
        CLEAN is returned.
        ``memo``: the arguments' values by node id, evaluated once for several summaries of
        one call. ``returned``: the step the facts the callee makes gain where its value is
        returned ("read from the property" for a property read)."""
        target = bound.target
        if isinstance(target, Summary):
            summary = target
        elif isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)):
            summary = self.summary(target)
        else:
            return CLEAN

        def evaluated(arg: ast.expr) -> Value:
            if memo is None:
                return self.eval(arg)
            known = memo.get(id(arg))
            if known is None:
                known = memo[id(arg)] = self.eval(arg)
            return known

        positional_offset = 0
        arg_values: dict[int, tuple[Value, ast.expr | None]] = {}
        extra: list[Value] = []
        for index, arg in enumerate(node.args):
            value = evaluated(arg)
            if isinstance(arg, ast.Starred):
                extra.append(value)
            else:
                arg_values[index + positional_offset] = (value, arg)
        for kw in node.keywords:
            value = evaluated(kw.value)
            if kw.arg is not None and kw.arg in summary.params:
                arg_values[summary.params.index(kw.arg)] = (value, kw.value)
            else:
                extra.append(value)
        receiver = bound.receiver
        if receiver is not None:
            arg_values[SELF] = (receiver, bound.receiver_expr)
        called, call_line = called_name(node)
        fields = (
            dict(receiver.items) if receiver is not None and receiver.items is not None else None
        )

        receiver_text = (
            name_text(bound.receiver_expr)
            if isinstance(bound.receiver_expr, (ast.Name, ast.Attribute))
            else None
        )

        def receiver_attr(path: str, sunk: bool = False) -> frozenset[Fact]:
            """``held_at(path, sunk)`` and what calls in this function stored into that field
            of the receiver (``session.touch()`` -> ``session.last_seen``)."""
            held = held_at(path, sunk)
            if (
                receiver is not None
                and isinstance(receiver.ref, ExternalClass)
                and receiver.items is None
            ):
                # an instance whose fields are not known may be one that other code stored
                # into; one the program built here (a constructor's own, or its result) holds
                # only what was stored into it here
                held = held | receiver.ref.field_facts.get(path.split(".")[0], frozenset())
            if receiver_text is not None:
                parts = path.split(".")
                stored = self.frame.env.get(f"{receiver_text}.{parts[0]}")
                if stored is not None:
                    facts = stored.facts
                    if (
                        len(parts) > 1
                        and stored.items is not None
                        and isinstance(stored.ref, (ClassInfo, ExternalClass))
                    ):
                        # an instance of a project class stored there by a method we called
                        # (``api.start()`` storing ``Chat(chat_id=...)`` into ``api.last``):
                        # the callee's read of one field takes that field's facts alone
                        facts = dict(stored.items).get(parts[1], CLEAN).facts
                    elif len(parts) > 1:
                        # the callee reads fields of what was stored there (``self._entries
                        # .get(name).content``): a time or id a factory stamped into another
                        # field (``created_at``) is not what it reads
                        facts = fields_read(facts, (p.split("[", 1)[0] for p in parts[1:]))
                        if self.frame.func is not None:
                            # (``self.base_agent.system_message``): a parameter of ours stored
                            # whole passes only that field
                            facts = param_entry(
                                facts, parts[1], id(self.frame.func), attribute=True
                            )
                    held = held | facts
            return held

        def held_at(path: str, sunk: bool = False) -> frozenset[Fact]:
            """What the receiver holds at ``path`` (``state.tool_context``): the field of an
            object we built, as deep as its fields are known, else all of what it holds
            (field-insensitive). Our own receiver passes the path on; so does a parameter of
            ours, or one entry or field of it (``variant.agent``), for a field that reaches a
            sink (``sunk``: ``variant.agent.builder``, see ``param_path``)."""
            assert receiver is not None
            value = receiver
            parts = path.split(".")
            for depth, part in enumerate(parts):
                if value.items is None or not isinstance(value.ref, (ClassInfo, ExternalClass)):
                    if depth == 0:
                        break
                    own = self.own_fields(value, parts[depth:])
                    return value.facts if own is None else own
                value = dict(value.items).get(part, CLEAN)
            else:
                return value.facts
            out: set[Fact] = set()
            ours = id(self.frame.func) if self.frame.func is not None else -1
            for g in receiver.facts:
                if g.kind is Kind.PARAM and g.param == SELF and "." not in g.detail:
                    g = replace(g, detail=f"self.{path}")  # our own receiver: keep the path
                elif (
                    g.kind is Kind.PARAM
                    and g.param == SELF
                    and g.detail.count(".") == 1
                    and g.detail.startswith("self.")
                    and "." not in path
                ):
                    # a field of our own receiver as the receiver (``self.base_agent.clone()``
                    # reading ``system_message``): the summary names the field of that field
                    # the method reads, not the whole object stored there
                    g = replace(g, detail=f"{g.detail}.{parts[0]}")
                elif g.kind is Kind.PARAM and g.param >= 0 and g.fix == (ours,):
                    # a parameter of ours as the receiver: our summary names the field its
                    # method reads (``handler.tool``), so a caller passes only that field
                    if sunk:
                        suffix = "".join(f".{part}" for part in parts)
                        (g,) = param_path(frozenset({g}), suffix, ours)
                    else:
                        (g,) = param_entry(frozenset({g}), parts[0], ours, attribute=True)
                out.add(g)
            return frozenset(out)

        #: what the argument facts become for a PARAM fact of the callee that does not read
        #: a field of the receiver, by what that depends on: the summary's return value, its
        #: stores and their fields name the same parameters again and again
        by_param: dict[tuple[int, str, str, tuple[Step, ...], str, bool], frozenset[Fact]] = {}

        #: the step a fact the callee creates gains, by verb (``substitute``)
        steps_by_verb: dict[str, Step | None] = {}
        own_fix = (summary.key,)

        def substitute(facts: frozenset[Fact], verb: str = returned) -> frozenset[Fact]:
            """PARAM facts become the arguments' facts; facts the callee creates gain the
            step "<verb> <callee>" at this call."""
            if verb in steps_by_verb:
                step = steps_by_verb[verb]
            else:
                step = steps_by_verb[verb] = (
                    (f"{verb} {summary.name}", call_line, called, "") if summary.name else None
                )
            out: set[Fact] = set()
            for f in facts:
                if f.when:
                    # made by one branch of a condition on a parameter: not where this call
                    # takes the other one (``branch_taken``)
                    if branch_taken(f.when) is False:
                        continue
                    f = replace(f, when=())
                if f.kind is Kind.PARAM and f.fix == own_fix:
                    if f.param == SELF and f.detail.startswith("self.") and receiver is not None:
                        # what the receiver's field holds may change between substitutions
                        # (a store of this call into it): not kept in ``by_param``
                        given = receiver_attr(f.detail[len("self.") :])
                        out |= self.passed(given, f.granularity, unseen_steps(f), f.role)
                        continue
                    steps = unseen_steps(f)
                    # the call's value: a dict of known keys passed whole keeps each time or id
                    # under its key (``return action`` on one path beside a dict built of it)
                    kept = verb == returned
                    key = (f.param, f.detail, f.granularity, steps, f.role, kept)
                    done = by_param.get(key)
                    if done is None:
                        given = argument_facts(f, kept)
                        done = by_param[key] = self.passed(given, f.granularity, steps, f.role)
                    out |= done
                elif step is not None and f.kind is not Kind.PARAM:
                    out.add(f.passed_on(step))
                else:
                    out.add(f)
            if len(out) > MAX_VALUE_FACTS:
                raise AnalysisBoundError(
                    f"a value passed through {summary.name or 'a call'} at line {call_line}"
                    f" carries {len(out)} facts (more than {MAX_VALUE_FACTS})"
                )
            return canonical(frozenset(out))

        def branch_taken(when: When) -> bool | None:
            """Whether this call takes the branch ``when`` (``Fact.when``) needs: the truth of
            the constant argument given for that parameter, or of the default it leaves; None
            when that is not known (an argument that is not a literal, a splat)."""
            if not when:
                return True
            index, needed, default = when[0], when[1], when[2]
            if index in arg_values:
                given = arg_values[index][1]
                if not isinstance(given, ast.Constant):
                    return None
                if len(when) > 3:
                    # a test against a constant (``kind == 0``): whether the argument equals it
                    return (given.value == when[3]) is needed
                return bool(given.value) is needed
            if extra or default < 0:
                return None
            return bool(default) is needed

        def argument_facts(f: Fact, kept: bool = False) -> frozenset[Fact]:
            """The facts of the argument the callee's PARAM fact ``f`` names, at the entry
            or field it reads (not a field of the receiver: ``receiver_attr``); ``kept``: a
            dict of known keys there gives its times and ids under their keys (``keys_kept``)."""
            given: frozenset[Fact] = frozenset()
            called = method_result(f.detail) if f.param >= 0 else None
            if called is not None and f.param in arg_values:
                return self.method_result_of(arg_values[f.param][0], called[1], call_line)
            if f.param >= 0 and f.param in arg_values:
                argument = arg_values[f.param][0]
                held, rest = entry_and_rest(argument, f.detail, call_line)
                given = keys_kept(held) if kept and not rest else held.facts
                base = f.detail[: -len(rest)] if rest else f.detail
                unfollowed = entry_path(f"_{rest}") if rest else None
                if unfollowed and unfollowed[0][0] in ZONE_ATTRS and _timeish(held):
                    # a time's zone (``now.tzinfo`` of a parameter), not the moment
                    given = frozenset(f for f in given if f.kind is not Kind.TIME)
                elif unfollowed and not unfollowed[0][1] and isinstance(unfollowed[0][0], str):
                    # the elements' structure is not known, but a time or id the argument
                    # holds under another constant key of them (``created_at`` beside the
                    # ``content`` read) is not what the callee reads (``key_read``)
                    given = key_read(given, unfollowed[0][0])
                if rest and held is not argument and keyed_field(f.detail):
                    # the field was followed, not the key read below it: all the
                    # field holds is passed, its other keys too (an unproven step)
                    given = self.unproven_all(
                        given,
                        (
                            (
                                f"{ASSUMED} {f.detail}, read below {base}",
                                call_line,
                                f.detail,
                                "",
                            ),
                        ),
                    )
                parsed = entry_key(f.detail)
                if (
                    (held is argument or rest == entry_suffix(f.detail))
                    and parsed is not None
                    and self.frame.func
                ):
                    # one field of a parameter of ours passed whole: our summary
                    # names that field (``sdk.notifications``), not all of ``sdk``
                    fields = param_entry(given, parsed[0], id(self.frame.func), attribute=parsed[1])
                    if keyed_field(f.detail):
                        # and the key it reads of that field (``tools.parameters``
                        # read at ``['properties']``): only a fact that became that
                        # field; one already naming an entry of a parameter of ours
                        # (``body.title``) is kept, as by the field read, not taken
                        # one level deeper as if ``body.title`` were the object read
                        key = (entry_path(f.detail) or ())[1][0]
                        made = fields - given
                        fields = (fields - made) | param_entry(
                            made, key, id(self.frame.func), line=call_line
                        )
                    given = fields
            elif f.param in arg_values:
                given = arg_values[f.param][0].facts
            return given

        if summary.marks and not self.recording:
            self.skipped_unrecorded()  # the breakpoints this call marks are not recorded
        elif self.recording:
            for index in summary.marks:
                where = arg_values.get(index, (CLEAN, None))[1]
                if where is not None:
                    self.breakpoint_calls.append((node, where, summary.name))
        outer_call, self.sink_call = self.sink_call, node
        try:
            self.record_param_sinks(summary, arg_values, via)
            if summary.turn_histories and self.recording:
                self.note_handed_turns(summary, arg_values, node)
            for fact, region, label in summary.outer:
                # a nested function sending a parameter of ours (or of a function we are
                # nested in) to a prefix region: called here, so do we
                self.record(region, Value(frozenset({fact})), node, f"{summary.name}() -> {label}")
        finally:
            self.sink_call = outer_call
        if sinks_only:
            return CLEAN
        if receiver is not None:
            where = bound.receiver_expr if bound.receiver_expr is not None else node
            for attr, targets in summary.attr_sinks.items():
                if attr[:1].isdigit():
                    continue
                attr, grain = split_grain(attr)
                held = Value(with_grain(receiver_attr(attr, sunk=True), grain))
                for region, label, unseen in targets:
                    self.record(
                        region, _unproven(held, unseen), where, f"{summary.name}() -> {label}"
                    )

        def stored_object(attr: str, facts: frozenset[Fact]) -> Value:
            """What the callee stored into ``<receiver>.<attr>``, substituted: an instance of
            a project class keeps its class and each field's facts (``summary.attr_objects``),
            anything else is its facts alone."""
            added = substitute(facts, "stored by")
            made = summary.attr_objects.get(attr)
            if made is None or made.items is None:
                return Value(added)
            items = tuple(
                (name, Value(substitute(part.facts, "stored by"))) for name, part in made.items
            )
            return Value(added, made.shape, ref=made.ref, items=items)

        stored_self: frozenset[Fact] = frozenset()
        frame = self.frame
        own_receiver = (
            isinstance(bound.receiver_expr, ast.Name)
            and bound.receiver_expr.id == frame.self_name
            and frame.cls is not None
        )
        for index, facts in summary.stores.items():
            if index == SELF and own_receiver and summary.attr_stores:
                # a method of our own object stores into named fields (``self.next_warm =
                # time.time()``): those fields hold it, not every field of ``self``
                by_attr: frozenset[Fact] = frozenset()
                for attr_facts in summary.attr_stores.values():
                    by_attr |= attr_facts
                facts = facts - by_attr
                self.store_own_fields(summary, substitute, arg_values)
            elif index == SELF and receiver_text is not None and summary.attr_stores:
                # likewise for another object (``session.touch()`` stores the time into
                # ``session.last_seen``): that field holds it, read back by
                # ``session.last_seen`` or by its methods, not ``session.prompt()``
                by_attr = frozenset()
                for attr, attr_facts in summary.attr_stores.items():
                    by_attr |= attr_facts
                    new = self.with_mutation_facts(stored_object(attr, attr_facts))
                    if new.items is not None and new.facts:
                        # the loop and condition facts of this call reach each field too
                        new = replace(
                            new,
                            items=tuple(
                                (name, self.with_mutation_facts(part)) for name, part in new.items
                            ),
                        )
                    if bound.receiver_expr is not None:
                        # a registry filled in a loop over servers joins their tool lists
                        new = self.joined(new, bound.receiver_expr)
                    if new.facts:
                        key = f"{receiver_text}.{attr}"
                        old = self.frame.env.get(key)
                        self.frame.env[key] = new if old is None else merge(old, new)
                        self.note_field_store(receiver, attr, new.facts)
                facts = facts - by_attr
            added = substitute(facts, "stored by")
            if not added:
                continue
            if index == SELF and bound.receiver_expr is None:
                stored_self |= added
                continue
            holder = arg_values.get(index, (CLEAN, None))[1]
            if holder is not None:
                self.mutate(holder, Value(added))
                kept = frame.env.get(holder.id) if isinstance(holder, ast.Name) else None
                if (
                    isinstance(holder, ast.Name)
                    and kept is not None
                    and kept.items is not None
                    and isinstance(kept.ref, (ClassInfo, ExternalClass))
                ):
                    # an object of known fields: what the callee stored into one field of it
                    # (``touch(member)`` setting ``member.since``) is that field's
                    frame.env[holder.id] = replace(kept, items=into_fields(kept.items, added))
        attrs: dict[str, Value] = dict(fields) if fields is not None else {}
        for attr, facts in summary.attr_stores.items():
            params = {f.param for f in facts if f.kind is Kind.PARAM and f.fix == (summary.key,)}
            if (
                len(params) == 1
                and len(facts) == 1
                and next(iter(facts)).granularity != "sorted"
                and entry_key(next(iter(facts)).detail) is None
                and (index := params.pop()) in arg_values
            ):
                # the argument itself is stored (``self.state = state``): keep its value,
                # an object's fields included
                old = attrs.get(attr)
                given = arg_values[index][0]
                attrs[attr] = given if old is None else old.with_facts(old.facts | given.facts)
                continue
            added = substitute(facts, "stored by")
            if added:
                old = attrs.get(attr)
                new_object = stored_object(attr, facts)
                if old is None and new_object.items is not None:
                    attrs[attr] = new_object
                elif (
                    old is not None
                    and new_object.items is not None
                    and old.items is not None
                    and old.ref == new_object.ref
                ):
                    attrs[attr] = merge(old, new_object)
                else:
                    attrs[attr] = Value((old or CLEAN).facts | added)
        if stores_only:
            return Value(stored_self, items=tuple(sorted(attrs.items())))
        if (
            receiver is not None
            and summary.attr_stores
            and isinstance(bound.receiver_expr, ast.Name)
        ):
            kept = self.frame.env.get(bound.receiver_expr.id)
            if kept is not None and kept.items is not None:
                # a tool list in an unstable order stored into a field (``toolset.setup()``
                # filling ``toolset.tools`` from ``list_tools()``) is carried by the object
                # too: a list of such objects flattened into tools has that order, the tool
                # lists of several sources (each toolset may be another server's) joined
                listed = joined_servers(
                    frozenset(
                        f for v in attrs.values() for f in v.facts if f.kind is Kind.TOOLS_UNSTABLE
                    ),
                    lambda f: True,
                )
                self.frame.env[bound.receiver_expr.id] = replace(
                    kept, facts=kept.facts | listed, items=tuple(sorted(attrs.items()))
                )

        result = _substituted(summary.ret, substitute)
        handed = _handed_back(summary, arg_values)
        if handed is not None:
            # the callee returns its argument itself (``return mood`` after saving it): the
            # caller gets that object back, its fields kept apart as before the call, with
            # what the callee stored into one of them (``m.since = now; return m``) there
            index = next(iter(summary.ret.facts)).param
            stored = substitute(summary.stores.get(index, frozenset()), "stored by")
            assert handed.items is not None
            result = replace(
                handed, facts=result.facts | stored, items=into_fields(handed.items, stored)
            )
        return self.pin_if_once(result)

    def record_param_sinks(
        self,
        summary: Summary,
        arg_values: dict[int, tuple[Value, ast.expr | None]],
        via: str = "",
    ) -> None:
        """The arguments of a call of ``summary`` that reach a sink inside it (its
        ``param_sinks``, and the entries or fields of them in ``attr_sinks``), recorded at
        the argument. With ``via`` (``call_bound``), each carries the step of the method's
        call that sends it."""

        def sent(value: Value, key: str) -> Value | None:
            if not via:
                return value
            at = summary.sink_lines.get(key)
            if at is None:
                return None
            line, name, path = at
            step = (f"{OVERRIDE} {summary.name}, {via}", line, name, path)
            return map_facts(
                value,
                lambda facts: frozenset(
                    f.passed_on(step) if f.kind not in _UNCHAINED else f for f in facts
                ),
            )

        for index, targets in summary.param_sinks.items():
            if index in arg_values:
                value, where = arg_values[index]
                if where is not None:
                    passed = sent(value, str(index))
                    if passed is None:
                        continue
                    for region, label, unseen in targets:
                        sent_value = passed
                        if any(s[0].startswith(SPLATTED) for s in unseen):
                            # one entry of a dict of keys not known here: as below
                            sent_value = passed.without(*_UNCHAINED)
                        self.record(
                            region,
                            _unproven(sent_value, unseen),
                            where,
                            f"{summary.name}() -> {label}",
                        )
        for key, targets in summary.attr_sinks.items():
            if not key[:1].isdigit():
                continue
            attr, grain = split_grain(key)
            called = _METHOD_SINK.match(attr)
            if called is not None:
                # what a method of the argument returns reaches the sink (``taint.record``)
                index = int(called[1])
                if index in arg_values:
                    value, where = arg_values[index]
                    if where is None:
                        continue
                    held = Value(self.method_result_of(value, called[2], where.lineno))
                    if grain:
                        held = Value(with_grain(held.facts, grain))
                    for region, label, unseen in targets:
                        found = sent(_unproven(held, unseen), key)
                        if found is not None:
                            self.record(region, found, where, f"{summary.name}() -> {label}")
                continue
            attr, _, role = attr.partition("@")
            # with a role: only the argument's messages of that role reach the sink (the callee
            # reads them under a test of that role); what the caller put in others does not
            # one entry of a dict argument (``page['body']``) or one field of an object
            # (``data.instructions``) reaches the sink: what the caller stored there, when
            # its keys or fields are known
            index = int(attr[: len(attr) - len(entry_suffix(attr))])
            parsed = entry_key(attr)
            if index in arg_values:
                value, where = arg_values[index]
                if where is not None:
                    for region, label, unseen in targets:
                        held, rest = entry_and_rest(value, attr, where.lineno)
                        followed = held
                        if (
                            unseen
                            and parsed is not None
                            and unseen[-1][0] == f"{SPLATTED}{unseen[-1][2]}[{parsed[0]!r}]"
                            and value.shape is Shape.DICT
                            and value.items is not None
                            and held is not value
                        ):
                            # the dict the callee splats into the sink (``create(**payload)``)
                            # is this argument, and it holds that key: sent as that keyword
                            unseen = unseen[:-1]
                        if any(s[0].startswith(SPLATTED) for s in unseen):
                            # a dict of keys not known here: what it holds may be under any
                            # key, so a condition or loop around it does not choose this one
                            # (those facts cannot be marked unproven)
                            held = held.without(*_UNCHAINED)
                        field = parsed[0] if parsed is not None and parsed[1] else None
                        # the field was not followed: the object's fields are not known, so
                        # ``held`` is the whole object, less only what another field's key
                        # marks as that field's (``field_read``): not a copy of one field
                        whole = held is value or (
                            isinstance(field, str)
                            and value.items is None
                            and value.shape is not Shape.LIST
                        )
                        if whole and isinstance(field, str):
                            left = self.other_fields_left(held, where, field)
                            whole = left is held
                            held = left
                        if whole and isinstance(field, str):
                            # our own object handed on whole (``send(self, q)`` reading
                            # ``agent.prompt``): what ``self.prompt`` holds here, not every
                            # field of it
                            own = self.own_fields(value, [field])
                            if own is not None:
                                held = Value(own)
                        if held is followed and rest and self.frame.func:
                            # one entry of a parameter of ours passed whole (a message list
                            # handed on, read by the callee at ``m["content"]``), or passed
                            # under a known key: our summary names that entry, not the whole
                            # parameter
                            held = held.with_facts(
                                param_path(held.facts, rest, id(self.frame.func))
                            )
                        if rest and followed is not value and keyed_field(attr):
                            # the field was followed, not the key read below it: all the
                            # field holds is sent, its other keys too (an unproven step)
                            base = attr[: -len(rest)]
                            unseen = (
                                *unseen,
                                (f"{ASSUMED} {attr}, read below {base}", where.lineno, attr, ""),
                            )
                        held = _unproven(held, unseen)
                        if grain:
                            held = Value(with_grain(held.facts, grain))
                        if role:
                            held = narrowed(held, role)
                        found = sent(held, key)
                        if found is not None:
                            self.record(region, found, where, f"{summary.name}() -> {label}")

    def other_fields_left(self, whole: Value, where: ast.expr, attr: str) -> Value:
        """``whole``, the value of the local object ``where`` passed to a callee that reads
        its field ``attr``, without what was stored into its other fields here
        (``Frame.field_added``) and with what was stored into ``attr``; ``whole`` itself
        when nothing was stored into its fields."""
        if not isinstance(where, ast.Name) or where.id not in self.frame.field_added:
            return whole
        facts = whole.facts - self.frame.field_added[where.id]
        stored = self.frame.env.get(f"{where.id}.{attr}")
        if stored is not None:
            facts |= stored.facts
        return Value(facts)

    def note_field_store(self, receiver: Value | None, attr: str, facts: frozenset[Fact]) -> None:
        """Order facts stored into a field of another module's class instance: exported, so
        that every reader of that class's field sees them (``ExternalClass.field_facts``)."""
        if receiver is None or not isinstance(receiver.ref, ExternalClass):
            return
        order = frozenset(
            f for f in facts if f.kind in (Kind.TOOLS_UNSTABLE, Kind.UNORDERED) and not f.pinned
        )
        if order:
            fields = self.field_stores.setdefault(receiver.ref.qualname, {})
            fields[attr] = canonical(fields.get(attr, frozenset()) | order)

    def store_own_fields(
        self,
        summary: Summary,
        substitute: Callable[[frozenset[Fact], str], frozenset[Fact]],
        arg_values: Mapping[int, tuple[Value, ast.expr | None]],
    ) -> None:
        """A method called on our own ``self`` stored into fields of it: each field of this
        class now also holds what was stored there, and this function's summary notes it. An
        argument stored whole that is a dict of known constant keys (``self._append(
        {"role": "user", "content": text, "created_at": now()})`` appending its parameter to
        ``self.history``) keeps each time or id under its key (``keys_kept``), so a read of
        another key of the field's elements (``item.get("content")``) leaves it out."""
        frame = self.frame
        cls = frame.cls
        assert cls is not None and frame.self_name is not None
        for attr, facts in summary.attr_stores.items():
            added = substitute(facts, "stored by")
            if not added:
                continue
            whole = [f for f in facts if f.kind is Kind.PARAM and f.fix == (summary.key,)]
            if (
                len(facts) == 1
                and len(whole) == 1
                and entry_key(whole[0].detail) is None
                and whole[0].granularity == ""
                and whole[0].param in arg_values
            ):
                given = arg_values[whole[0].param][0]
                if given.shape is Shape.DICT and given.items is not None:
                    keyed = keys_kept(given)
                    # the steps of the call stay on what it stored (``stored by``)
                    by_birth = {(f.kind, f.line, f.col, f.path, f.detail): f for f in added}
                    added = frozenset(
                        replace(f, via=by_birth[(f.kind, f.line, f.col, f.path, f.detail)].via)
                        if (f.kind, f.line, f.col, f.path, f.detail) in by_birth
                        else f
                        for f in keyed
                    )
            old = cls.attrs.get(attr, CLEAN)
            cls.attrs[attr] = old.with_facts(old.facts | Value(added).without(Kind.PARAM).facts)
            self.note_store(ast.Name(id=frame.self_name), Value(added), attr)

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
        timeish = _timeish(receiver)
        if method in _ZONE_METHODS and not node.args and not node.keywords:
            # a time's zone name or offset (``now.tzname()``, ``now.utcoffset()``): it changes
            # with the zone's rules (summer time), not with the moment; a parameter's names that
            # method's result, so a caller's time is left out too (``method_result_of``)
            ours = (id(self.frame.func),) if self.frame.func is not None else None
            return Value(
                frozenset(
                    replace(f, detail=f"{f.detail}.{method}()")
                    if f.kind is Kind.PARAM
                    and f.param >= 0
                    and f.fix == ours
                    and f.detail.isidentifier()
                    else f
                    for f in receiver.facts
                    if f.kind is not Kind.TIME
                ),
                Shape.STR if method == "tzname" else Shape.UNKNOWN,
            )
        if timeish:
            if method == "strftime":
                return self.formatted_as(receiver, first)
            if method == "date":
                value = self.regranulate(receiver, "%d")
                return Value(value.facts, Shape.DATE)
            if method == "replace" and {"hour", "minute"} <= set(kwargs):
                return Value(self.regranulate(receiver, "%d").facts, Shape.DATE)
            if method == "replace" and receiver.shape in (Shape.DATETIME, Shape.DATE):
                # another field set (``tzinfo=timezone.utc``, ``microsecond=0``): the same
                # moment, or one as fine as the hour it keeps
                return Value(receiver.facts, receiver.shape)
            if method in DATETIME_ATTR_GRANULARITY:
                return self.attribute_of(receiver, func)
            if method in ("isoformat", "ctime", "astimezone", "isoweekday", "weekday"):
                return Value(
                    receiver.facts, Shape.STR if method != "astimezone" else receiver.shape
                )
        if receiver.shape is Shape.RNG:
            if method == "sample":
                drawn = sample_of(
                    node,
                    first,
                    self.fact(Kind.UNIQUE, node, f"{receiver.ref}.{method}()", granularity=SAMPLED),
                )
                if drawn is not None:
                    return drawn
            if method == "choice":
                few = self.few_choice(node, first)
                if few is not None:
                    return Value(frozenset({self.fact(Kind.VARIES, node, FEW_DETAIL)}), few)
                picked = self.picked_whole(node, first)
                if picked is not None:
                    return picked
            if (
                method in ("randint", "randrange")
                and not self.drawn_again(node)
                and not range_draw_unique(node, method)
            ):
                varies = self.fact(Kind.VARIES, node, f"{receiver.ref}.{method}()")
                return Value(frozenset({varies}) | join(*args).facts)
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
        if method in TOOL_PRODUCERS_METHODS and not self.own_method(receiver, func.value, method):
            # one server's list, in its own order (``ONE_SERVER``) until joined with others'
            fact = self.fact(
                Kind.TOOLS_UNSTABLE, node, f"{source_text(func)}()", granularity=ONE_SERVER
            )
            return Value(frozenset({fact}), Shape.TOOL_RESULT)
        if method in UNORDERED_PATH_METHODS:
            return Value(
                receiver.facts,
                Shape.UNORDERED_LIST,
                elem_str=True,
                ref=(node.lineno, node.col_offset, f".{method}()"),
            )
        if method in FILE_CONTENT_METHODS and self.method_of(receiver, method) is None:
            # a file's contents, not its path: an id or a time that names a file or a folder
            # is not in the text read from it
            return Value(shape=Shape.STR)
        if method in STREAM_READ_METHODS and self.method_of(receiver, method) is None:
            # a stream's data: what the stream holds (``io.StringIO(text).read()``), not the
            # size or the separator it is read with (``stdout.read(chunk_size)``)
            stream = _unobjected(receiver)
            if not stream.facts:
                return CLEAN
            if isinstance(receiver.ref, Unresolved) and receiver.ref.qual in IN_MEMORY_STREAMS:
                # an in-memory stream's data is the text it was built with
                return Value(stream.facts)
            return Value(self.assumed(stream.facts, node, stream.facts))
        if (
            method in ("sub", "subn")
            and isinstance(receiver.ref, Unresolved)
            and receiver.ref.qual == "re.compile"
        ):
            # a compiled pattern's ``.sub(repl, string)``: as ``re.sub``
            return substituted(args, kwargs, method == "subn")
        if receiver.shape is Shape.STR:
            if method == "join":
                # ``str.join`` raises TypeError at an element that is not a str: what it
                # iterates holds strings, so wrapping it in ``sorted(...)`` is a safe fix
                iterated = first
                if first.shape in (Shape.SET, Shape.UNORDERED_LIST) and not first.elem_str:
                    iterated = replace(first, elem_str=True)
                unordered = self.iteration_fact(iterated, node.args[0]) if node.args else None
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
            v = self.lookup(target.id).ordered()
            ordered = Shape.LIST if v.shape is Shape.UNORDERED_LIST else v.shape
            ref = v.ref if ordered is v.shape else None
            # each element keeps its fields (``elem``): a sort only moves them, so reading one
            # field of each (``[e["id"] for e in entries]`` after a sort by a rolled
            # ``e["total"]``) takes only that field, as before the sort
            frame.env[target.id] = Value(
                v.facts, ordered, None, v.elem_str, v.name_key, ref, elem=v.elem
            )
            return CLEAN
        if (
            method in _MUTATORS
            and isinstance(target, (ast.Attribute, ast.Subscript))
            and not isinstance(target, ast.Name)
        ):
            holder = target.value if isinstance(target, ast.Attribute) else None
            own_attr = (
                isinstance(holder, ast.Name)
                and holder.id == frame.self_name
                and frame.cls is not None
            )
            before = (
                frame.cls.attrs.get(target.attr, CLEAN)
                if own_attr and frame.cls is not None and isinstance(target, ast.Attribute)
                else CLEAN
            )
            self.mutate(target, join(*args, *kwargs.values()))
            if own_attr and frame.cls is not None and isinstance(target, ast.Attribute):
                old = frame.cls.attrs.get(target.attr, CLEAN)
                name_key = mutated_key(old.name_key, method, node, [a.name_key for a in args])
                # a list field that only ever gets objects of known fields appended
                # (``self.turns.append(Turn(text=..., sent_at=now))``) keeps their fields, so
                # that a method reading one field of each element takes only that field
                # (not chat messages, objects with a ``role`` field: a ``message.role ==
                # "system"`` test picks their contents by the role the whole element holds)
                elem = (
                    added_elem(before, method, args, bool(kwargs))
                    if old.shape is Shape.LIST
                    and before.shape in (Shape.LIST, Shape.UNKNOWN)
                    and not any(key == "role" for a in args for key, _ in a.items or ())
                    else None
                )
                frame.cls.attrs[target.attr] = replace(
                    old,
                    name_key=name_key,
                    ref=added_to_set(old, method, args, kwargs),
                    elem=elem,
                )
            return CLEAN
        if method in _MUTATORS and isinstance(target, ast.Name):
            name = target.id
            old = self.lookup(name)
            added = join(*args, *kwargs.values())
            if isinstance(frame.func, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                id(n) in held_appends(frame.func) for n in (node, *node.args[:1])
            ):
                # a message written once into a conversation this function holds, before
                # the loop that sends it (``conversations.held_appends``)
                added = map_facts(added, held_once)
            if method == "add" or old.shape is Shape.SET:
                shape = old.shape
            else:
                shape = Shape.LIST if old.shape in (Shape.LIST, Shape.UNKNOWN) else old.shape
            elem_str = old.elem_str and all(a.shape is Shape.STR for a in args)
            name_key = mutated_key(old.name_key, method, node, [a.name_key for a in args])
            elts, more = None, False
            if old.elts is not None and old.shape is Shape.LIST and method in ("append", "extend"):
                if (
                    method == "append"
                    and not old.more
                    and len(args) == 1
                    and not kwargs
                    and not frame.loops
                    and not frame.mutation_facts
                ):
                    # an append run once, unconditionally: the list's next element is known
                    elts = (*old.elts, args[0])
                else:
                    # elements added after the known ones: those keep their indexes
                    elts, more = old.elts, True
            new = Value(
                old.facts | added.facts,
                shape,
                None,
                elem_str,
                name_key,
                added_to_set(old, method, args, kwargs),
                elts,
                None,
                more,
                added_elem(old, method, args, bool(kwargs)),
            )
            self.frame.env[name] = self.joined(self.with_mutation_facts(new), target)
            self.note_store(target, self.joined(self.with_mutation_facts(added), target))
            return CLEAN
        if method in _REORDERING and isinstance(target, ast.Name):
            # elements removed or moved: which element is at which index is no longer known
            v = self.lookup(target.id)
            if v.elts is not None and v.shape is Shape.LIST:
                frame.env[target.id] = replace(v, elts=None)
        if method in ("keys", "values", "items", "copy"):
            # a copy of a set of one order in every process (``{1, 2}.copy()``) keeps that order
            return Value(
                receiver.facts,
                Shape.LIST if method != "copy" else receiver.shape,
                ref=receiver.ref if method == "copy" and stable_set(receiver) else None,
            )
        if (
            method in _MODEL_DUMPS
            and not node.args
            and not any(kw.arg in (None, "include", "exclude") for kw in node.keywords)
            and isinstance(receiver.ref, (ClassInfo, ExternalClass))
            and receiver.items is not None
        ):
            # a project class's model built here, dumped whole by the library's method (not
            # overridden, or method_of would have found it): a dict of its fields, each
            # holding what was stored into it
            return Value(receiver.facts, Shape.DICT, items=receiver.items)
        if (
            method in _MODEL_JSON_DUMPS
            and not node.args
            and not any(kw.arg in (None, "include", "exclude") for kw in node.keywords)
            and isinstance(receiver.ref, (ClassInfo, ExternalClass))
            and receiver.items is not None
        ):
            # the same model dumped to JSON text (``model_dump_json()``): its fields' text, in
            # the order the class declares them
            return Value(receiver.facts, Shape.STR)
        if (
            method in ("get", "pop", "setdefault")
            and node.args
            and not isinstance(receiver.ref, (ClassInfo, ExternalClass))
            # an object of known fields (``client.tools``, a field holding an instance its
            # constructor built) is no container: its ``get()`` is its class's method
            and not (receiver.items is not None and receiver.shape is not Shape.DICT)
        ):
            # one entry of a container (``d.get("k", default)``): as ``d["k"]``, what the
            # container's entries hold, or the field of a dict literal; not its order
            entry_value = self.container_entry(node, receiver, args)
            holder = node.func.value if isinstance(node.func, ast.Attribute) else None
            birth = set_values_birth(holder, self.frame) if holder is not None else None
            if birth is not None:
                # one value of a dict whose values are sets (``by_scope.get(scope, ())``)
                return Value(entry_value.facts, Shape.SET, ref=birth)
            return entry_value
        return None

    def container_entry(self, node: ast.Call, receiver: Value, args: list[Value]) -> Value:
        """``receiver.get(key, ...)`` (or ``pop``, ``setdefault``) of a container: what its
        entries hold (``library_method``)."""
        key = node.args[0]
        if (
            len(args) > 1
            and any(arg.facts for arg in args[1:])
            and not (
                fields_known(receiver)
                and receiver.shape is Shape.DICT
                and isinstance(key, ast.Constant)
                and str(key.value) not in dict(receiver.items or ())
            )
        ):
            # the default is used only where the key is missing (``doc.get("id", uuid4())`` of
            # data that holds an id): unproven, unless the container is a dict of known keys
            # that lacks it
            what = f"the default of {ast.unparse(node.func)[:60]}({ast.unparse(key)[:40]}, ...)"
            args = [args[0], *(arg.with_facts(fallback(arg.facts, node, what)) for arg in args[1:])]
        if receiver.items is not None and isinstance(key, ast.Constant):
            held = dict(receiver.items).get(str(key.value))
            if held is not None:
                return join(held, *args[1:]) if len(args) > 1 else held
        entry = receiver.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            entry = entry.with_facts(other_keys_dropped(entry.facts, key.value))
        elif not isinstance(key, ast.Constant):
            entry = entry.with_facts(any_key_read(entry.facts))
        if isinstance(receiver.ref, KeyedBy):
            entry = entry.with_facts(entry.facts - receiver.ref.facts)
        if isinstance(key, ast.Constant) and self.frame.func is not None:
            entry = entry.with_facts(param_entry(entry.facts, str(key.value), id(self.frame.func)))
        # a dict whose values are all str gives a str: the entry, or a str default (``pop``
        # with no default raises where the key is missing); ``get`` with none may give None
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        shape = (
            Shape.STR
            if str_valued(receiver)
            and (
                all(arg.shape is Shape.STR for arg in args[1:2])
                if len(args) > 1
                else method == "pop"
            )
            else Shape.UNKNOWN
        )
        return (
            Value(join(Value(entry.facts), *args[1:]).facts, shape)
            if len(args) > 1
            else Value(entry.facts, shape)
        )

    # ------------------------------------------------------------------ attributes

    def attribute_source(self, node: ast.Attribute, qual: str) -> Value:
        if qual in ENV_ATTRS:
            fact = self.fact(Kind.ENV, node, qual)
            return Value(frozenset({fact}), Shape.DICT)
        return CLEAN

    def attribute_of(self, base: Value, node: ast.Attribute) -> Value:
        """What ``base.<attr>`` holds; for an instance of another module's class whose
        fields are not known (a parameter, a global), also what code anywhere in the program
        stores into that field (``ExternalClass.field_facts``); an instance built here holds
        only what was stored into it here."""
        value = self._attribute_of(base, node)
        if isinstance(base.ref, ExternalClass) and base.items is None:
            extra = base.ref.field_facts.get(node.attr)
            if extra:
                value = value.with_facts(value.facts | extra)
        return value

    def property_read(self, value: Value, node: ast.Attribute) -> Value:
        """Reading a method decorated ``@property`` (or ``@functools.cached_property``) of a
        project class runs it: ``self.system_prompt`` is what the method returns, as the call
        ``self.system_prompt()`` would be (a cached property's value is computed once per
        object, as a cached function's). Any other method read is the method itself."""
        bound = value.ref
        if value.shape is not Shape.FUNC or not isinstance(bound, Bound):
            return value
        target = bound.target
        if not isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(
            (isinstance(d, ast.Name) and d.id in _PROPERTIES)
            or (isinstance(d, ast.Attribute) and d.attr in _PROPERTIES)
            for d in target.decorator_list
        ):
            return value
        if getattr(node, "lineno", None) is None:
            return value  # a read the analysis made up (a field path), not one in the code
        return self.call_bound(bound, _bare_call(node), returned="read from the property")

    def _attribute_of(self, base: Value, node: ast.Attribute) -> Value:
        attr = node.attr
        method = self.method_of(base, attr)
        if method is not None:
            return Value(shape=Shape.FUNC, ref=Bound(method, base, node.value))
        if (
            isinstance(base.ref, (ClassInfo, ExternalClass, Choice))
            and base.items is not None
            and not (isinstance(base.ref, Choice) and _has_method(base.ref, attr))
        ):
            # an object we built (or, a ``Choice`` with items, one of several such objects or
            # dicts of known keys, none of whose classes has a method or property of that name):
            # its field holds what was stored there, nothing else
            return dict(base.items).get(attr, CLEAN)
        # a time or id a field's factory made is that field's, not its siblings' (``construct``)
        read = field_read(base.facts, attr)
        if read is not base.facts:
            base = base.with_facts(read)
        if any(f.kind is Kind.PARAM and f.param == SELF and "." in f.detail for f in base.facts):
            # a field of a field of the receiver: the summary names the path
            return Value(
                frozenset(
                    replace(f, detail=f"{f.detail}.{attr}")
                    if f.kind is Kind.PARAM
                    and f.param == SELF
                    and "." in f.detail
                    and f.detail.count(".") < 4
                    else f
                    for f in base.facts
                )
            )
        if base.shape is Shape.TOOL_RESULT and attr == "tools":
            return Value(base.facts, Shape.LIST, name_key="elem")
        if _timeish(base):
            if attr in ZONE_ATTRS:
                # the moment's zone (``now.tzinfo``), not the moment (``_ZONE_METHODS``)
                return Value(frozenset(f for f in base.facts if f.kind is not Kind.TIME))
            grain = DATETIME_ATTR_GRANULARITY.get(attr)
            if grain is not None:
                fmt = {"subday": "%H", "day": "%d", "": "%Y"}[grain]
                value = self.regranulate(base, fmt)
                return Value(value.facts, Shape.DATE if grain == "day" else Shape.NUM)
        if base.shape is Shape.OBJECT:
            return CLEAN
        if base.facts and self.frame.func is not None:
            # a field of a parameter: the summary names it, so a caller whose object's fields
            # are known passes only what that field holds
            line = getattr(node, "lineno", None)
            return Value(
                param_entry(base.facts, attr, id(self.frame.func), attribute=True, line=line)
            )
        return Value(base.facts) if base.facts else CLEAN

    # ------------------------------------------------------------------ helpers

    def formatted_as(self, value: Value, fmt: Value) -> Value:
        """``value.strftime(fmt)``: its TIME facts as ``fmt`` formats them. A format that is one
        of a few constants (``Texts``: ``"%H:%M" if precise else "%Y-%m-%d"``) formats them as
        each of its texts does, what one text alone makes marked with the condition that text
        needs (``Fact.when``), so a call that fixes the condition gets its text's precision."""
        texts = fmt.ref.texts if fmt.const is None and isinstance(fmt.ref, Texts) else None
        if texts is None:
            return self.regranulate(value, fmt.const)
        made = [self.regranulate(value, text).facts for text, _ in texts]
        facts: set[Fact] = set()
        for index, ((_, when), own) in enumerate(zip(texts, made, strict=True)):
            if when:
                others = frozenset().union(*made[:index], *made[index + 1 :])
                own = branch_only(Value(own), Value(others), when).facts
            facts |= own
        return Value(frozenset(facts), Shape.STR)

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
                    f = replace(f, granularity=new)
            facts.add(f)
        return Value(frozenset(facts), Shape.STR)

    def stringify(self, value: Value, node: ast.AST) -> Value:
        """``str(value)`` / f-string / ``%s`` / ``.format``: the repr problems of PC015/PC004."""
        shape = value.shape
        # the text has no fields: a time or id of one of the object's fields is the text's
        facts = unfielded(value.facts)
        if shape is Shape.SET:
            facts = facts | {self.fact(Kind.REPR, node, "the repr of a set", granularity="error")}
        elif shape is Shape.UNORDERED_LIST:
            unordered = self.iteration_fact(value, node)  # type: ignore[arg-type]
            if unordered is not None:
                facts = facts | {unordered}
        elif shape is Shape.DICT and value.ref != "literal":
            # as PC003: a dict keeps its insertion order, so only a key order shown to vary
            # between requests (``varying_key_order``) makes its repr change
            if self.varying_key_order(node, value) is not None:
                fact = self.fact(Kind.REPR, node, "the repr of a dict", granularity="warning")
                # the dict's order is the one problem: one finding, PC015
                facts = unfielded(value.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts) | {fact}
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
        if stable_set(iterable):
            # a set of numbers or of one element: the same order in every process
            return None
        return Fact(
            Kind.UNORDERED,
            node.lineno,
            node.col_offset,
            str(birth[2]),
            # a directory listing is stable on one machine; a set's order changes per process;
            # tasks come in the order they finish
            (str(birth[3]) if len(birth) > 3 else "filesystem")
            if iterable.shape is Shape.UNORDERED_LIST
            else "",
            site=(int(birth[0]), int(birth[1])),
            fix=(*span(node), iterable.elem_str),
        )

    def element_of(self, iterable: Value) -> Value:
        """The loop variable's value when iterating ``iterable``."""
        # one element of a sample is one of the pool's values, whichever was drawn
        facts = iterable.without(Kind.UNORDERED, Kind.TOOLS_UNSTABLE).facts
        facts -= sampled(facts)
        shape = Shape.STR if iterable.elem_str else Shape.UNKNOWN
        name_key = "elem" if iterable.name_key in ("elem", "attr") else ""
        if iterable.shape is Shape.TOOL_RESULT:
            name_key = ""
        known = element_fields(iterable)
        if known is not None:
            # each element a dict of known keys or an object of known fields: what is read
            # at one key takes only what the elements hold there (and an order one of its
            # fields holds stays the element's, not the list's)
            inside = held_inside(known)
            return known.with_facts(
                frozenset(
                    f
                    for f in known.facts - sampled(iterable.facts)
                    if f in inside or f.kind not in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
                )
            )
        return Value(facts, shape, name_key=name_key)

    def record_message_content(self, content: ast.expr, label: str) -> None:
        """The content of a system/developer message dict is system prompt text, unless the
        message is appended to a history after the model's reply (``later_history_turns``):
        a turn of the history, written there once; or unless the message is only given to a
        call that measures it (``measured_messages``: its tokens counted), which sends
        nothing; or unless it is bound to a local name nothing reads (``unread_messages``: a
        message list built and never sent); or unless it is appended last to a list of the
        request's messages
        (``tail_system_turns``): the newest message, after all that a cache holds; or unless
        it is a tool's, hook's or command's result handed one at a time to the loop that
        writes it into the history (``yielded_turns``), frozen there."""
        func = self.frame.func
        if func is not None and (
            id(content) in later_history_turns(func)
            or id(content) in measured_messages(func)
            or id(content) in unread_messages(func)
            or id(content) in tail_system_turns(func)
            or id(content) in yielded_turns(func, self.tree)
        ):
            self.eval(content)
            return
        # a system message a conversation this function holds starts with: written there once
        # (``conversations.held_contents``)
        held = func is not None and id(content) in held_contents(func)
        if isinstance(content, (ast.List, ast.Tuple)):
            for block in content.elts:
                text = _dict_get(block, "text") if isinstance(block, ast.Dict) else None
                target = text if text is not None else block
                value = self.eval(target)
                self.record("system", map_facts(value, held_once) if held else value, target, label)
        else:
            value = self.eval(content)
            self.record("system", map_facts(value, held_once) if held else value, content, label)


def converted_classes(
    tree: ast.Module, module: str, classes: Mapping[str, ClassInfo], imports: Mapping[str, str]
) -> list[str]:
    """Qualified names of the message classes this module is seen to turn into request
    messages: a role dict built from an object's role field (``{"role": m.role, ...}``,
    ``m.role.value``), or an object dumped into a dict of its fields (pydantic's
    ``model_dump()``, ``dataclasses.asdict()``), counts for every class the module defines or
    imports (the objects' class is not known there); a role dict built from ``self.role`` in
    a method of one of the module's classes counts for that class. Only capitalised names
    (``message_object``'s)."""
    kept: dict[str, list[str]] = tree.__dict__.setdefault("_converted", {})
    known = kept.get(module)
    if known is not None:
        return list(known)
    role_dicts: set[int] = set()
    dumped = False
    for node in all_nodes(tree):
        if isinstance(node, ast.Dict):
            if _role_field(node) is not None:
                role_dicts.add(id(node))
        elif isinstance(node, ast.Call) and not dumped:
            dumped = _dumped(node)
    own: set[str] = set()
    if role_dicts:
        for name, info in classes.items():
            for method in info.methods.values():
                args = method.args.posonlyargs + method.args.args
                if not args:
                    continue
                for node in ast.walk(method):
                    if isinstance(node, ast.Dict) and id(node) in role_dicts:
                        base = _role_field(node)
                        if isinstance(base, ast.Name) and base.id == args[0].arg:
                            own.add(f"{module}.{name}")
                            role_dicts.discard(id(node))
    if role_dicts or dumped:
        own.update(f"{module}.{name}" for name in classes)
        own.update(qual for qual in imports.values() if qual.rsplit(".", 1)[-1][:1].isupper())
    kept[module] = sorted(own)
    return list(kept[module])


def _dumped(node: ast.Call) -> bool:
    """``x.model_dump(...)`` (pydantic, https://docs.pydantic.dev/latest/concepts/serialization/)
    or ``asdict(x)`` / ``dataclasses.asdict(x)``
    (https://docs.python.org/3/library/dataclasses.html#dataclasses.asdict): an object's fields
    as a dict."""
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "model_dump" or (
            func.attr == "asdict" and isinstance(func.value, ast.Name)
        )
    return isinstance(func, ast.Name) and func.id == "asdict"


def _role_field(node: ast.Dict) -> ast.expr | None:
    """The object whose ``role`` field gives this dict's "role" entry (``m`` of
    ``{"role": m.role}`` or ``{"role": m.role.value}``), or None."""
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "role":
            for part in ast.walk(value):
                if isinstance(part, ast.Attribute) and part.attr == "role":
                    return part.value
    return None


@dataclass(frozen=True)
class Unresolved:
    """``Value.ref`` of what a call to another module's callable returned while that module's
    summary is not known (yet): ``qual`` is the callable's qualified name, so that calling a
    method of the result with a value that has facts asks the driver for it."""

    qual: str


#: fact kinds that are the analysis's own bookkeeping, not findings' values
_BOOKKEEPING = frozenset({Kind.PARAM, Kind.LOOP, Kind.VARIES})
#: fact kinds whose chain is not kept (a PARAM fact keeps its unproven steps: ``unproven``)
_UNCHAINED = frozenset({Kind.LOOP, Kind.VARIES})


def fallback(facts: frozenset[Fact], node: ast.expr, what: str) -> frozenset[Fact]:
    """``facts`` of a fallback used only where the value read first is missing (the default of
    ``d.get(k, default)``, the right of ``d.get(k) or default``) with an ``ASSUMED`` step:
    data that normally holds the key never uses it, so the flow is unproven (``--explain``)."""
    step = (f"{ASSUMED} {what}, used only where that is missing", node.lineno, what, "")
    return frozenset(f if f.kind in _UNCHAINED else f.passed_on(step) for f in facts)


def _substituted(
    value: Value, substitute: Callable[[frozenset[Fact]], frozenset[Fact]], depth: int = 0
) -> Value:
    """``value`` with its facts substituted (``substitute``: ``call_bound``'s, for one call),
    and those of its tuple elements, fields and list elements' fields (an object, a dict or a
    list of messages returned whole keeps its structure). A module function, not a closure
    in ``call_bound``: a closure that calls itself is a reference cycle, which would keep
    every closure of the call (and what they hold) alive until the cyclic collector traced
    it."""
    elts = items = elem = None
    if depth < 3 and value.elts is not None:
        elts = tuple(_substituted(e, substitute, depth + 1) for e in value.elts)
    if depth < 3 and value.items is not None:
        items = tuple((k, _substituted(v, substitute, depth + 1)) for k, v in value.items)
    if value.elem is not None:
        # not a level of its own: the fields of a returned tuple's message list
        elem = _substituted(value.elem, substitute, depth)
    return replace(value, facts=substitute(value.facts), elts=elts, items=items, elem=elem)


def _handed_back(
    summary: Summary, arg_values: dict[int, tuple[Value, ast.expr | None]]
) -> Value | None:
    """The argument a function returns unchanged on every path (``def save(obj): ...;
    return obj``), when it is an object or dict whose fields are known: its return value is
    the one PARAM fact of that whole parameter (its name alone: no field or entry of it, no
    sorting, no branch, no unproven step), and it stores nothing into that parameter but into
    its fields (``field_keyed``: ``m.since = now``). None otherwise."""
    ret = summary.ret
    if len(ret.facts) != 1 or ret.items is not None or ret.elts is not None:
        return None
    (f,) = ret.facts
    if (
        f.kind is not Kind.PARAM
        or f.fix != (summary.key,)
        or not 0 <= f.param < len(summary.params)
        or f.detail != summary.params[f.param]
        or f.granularity
        or f.when
        or f.via
        or f.role
        or not all(g.key and g.key[0].startswith(".") for g in summary.stores.get(f.param, ()))
        or f.param not in arg_values
    ):
        return None
    argument = arg_values[f.param][0]
    return argument if argument.items is not None else None


def unproven(fact: Fact, via: tuple[tuple[str, int, str, str], ...]) -> Fact:
    """``fact`` (an argument's) carrying the unproven steps of ``via`` (the chain of the
    callee's parameter fact it stands for), so a finding made of it is shown only by
    ``--explain``; facts of the kinds in ``_UNCHAINED`` stay as they are. A pinned fact (a
    value computed once, an environment value) is unproven too: what reaches the prompt
    through an unseen call need not be it (``os.getenv(KEY)`` given to a client constructor)."""
    if fact.kind in _UNCHAINED:
        return fact
    for step in via:
        if step[0].startswith((ASSUMED, OVERRIDE)):
            fact = fact.passed_on(step)
    return fact


#: a summary's sink key of what a method of a parameter returns (``"2.generate()"``)
_METHOD_SINK = re.compile(r"^(\d+)\.(\w+)\(\)$")


def _unproven(value: Value, unseen: tuple[Step, ...]) -> Value:
    """``value`` passed to a parameter that reaches a sink only through the calls the analysis
    cannot see in ``unseen`` (``Summary.param_sinks``): each of its facts carries those steps
    (``unproven``), so a finding made of it is an unproven flow."""
    if not unseen:
        return value
    return map_facts(value, lambda facts: frozenset(unproven(f, unseen) for f in facts))


def called_name(node: ast.Call) -> tuple[str, int]:
    """The name written for a call's callee and its line: ``now_text`` for
    ``self.clock.now_text()``, ``factories`` for ``factories["now"]()``."""
    callee: ast.expr = node.func
    while isinstance(callee, (ast.Subscript, ast.Call)):
        callee = callee.value if isinstance(callee, ast.Subscript) else callee.func
    if isinstance(callee, ast.Attribute):
        return callee.attr, getattr(callee, "end_lineno", None) or node.lineno
    if isinstance(callee, ast.Name):
        return callee.id, callee.lineno
    return ast.unparse(callee)[:40], node.lineno


#: decorators that make a method read as an attribute: reading it runs the method
_PROPERTIES = frozenset({"property", "cached_property"})


#: the methods of value types (a str, bytes, a container, a number, a date or a time, a
#: path): called on a parameter whose class is not known, what they return is that value's
#: (``called_on_param``)
_VALUE_TYPE_METHODS = frozenset(
    name
    for kind in (
        str,
        bytes,
        list,
        dict,
        set,
        tuple,
        int,
        float,
        datetime.datetime,
        datetime.timedelta,
        pathlib.PurePath,
    )
    for name in dir(kind)
)


#: pydantic's methods that return a model's fields as a dict (``dict()`` in pydantic 1)
_MODEL_DUMPS = frozenset({"model_dump", "dict"})
#: pydantic's methods that return a model's fields as JSON text (``json()`` in pydantic 1)
_MODEL_JSON_DUMPS = frozenset({"model_dump_json", "json"})


def _unobjected(value: Value) -> Value:
    """``value`` without what it holds as a whole object: nothing for a project class's
    instance, and no SELF facts for the whole receiver (a field's SELF fact names it)."""
    if isinstance(value.ref, (ClassInfo, ExternalClass)):
        return CLEAN
    if any(f.kind is Kind.PARAM and f.param == SELF and "." not in f.detail for f in value.facts):
        return value.with_facts(
            frozenset(
                f
                for f in value.facts
                if not (f.kind is Kind.PARAM and f.param == SELF and "." not in f.detail)
            )
        )
    return value


def _dict_get(node: ast.Dict, key: str) -> ast.expr | None:
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


__all__ = ["BUILDER_METHODS", "CallsMixin"]


def entry_of(argument: Value, detail: str) -> Value:
    """What a summary's PARAM fact ``detail`` takes of ``argument``: for one entry of a
    parameter (``page['body']``) the value stored under that key when the argument is a dict
    whose keys are known; for one field (``data.instructions``) what an object we built holds
    in that field (not what code elsewhere stores into that field of other instances),
    nothing for a field of it that nothing stored into, nor for a key that a dict of known
    keys does not hold; else the whole argument (a key of a value of unknown keys, a method,
    an argument of unknown shape). A path of several (``variant.agent.llm``) is followed
    as deep as the values met are known: an agent stored in a variant we built passes only
    what its ``llm`` field holds, not its other fields."""
    return entry_and_rest(argument, detail)[0]


def unseen_steps(f: Fact) -> tuple[Step, ...]:
    """The steps of ``f``'s chain through a call the analysis cannot see (empty when
    ``f.proven``); computed once per fact (copies with another ``via`` drop it:
    ``Fact._with_via``, ``facts.replace``)."""
    known: tuple[Step, ...] | None = f.__dict__.get("_unseen")
    if known is None:
        known = () if f.proven else tuple(s for s in f.via if s[0].startswith(ASSUMED))
        f.__dict__["_unseen"] = known
    return known


def entry_and_rest(argument: Value, detail: str, line: int = 0) -> tuple[Value, str]:
    """``entry_of(argument, detail)`` and the part of the path it did not follow, as a
    suffix (``.llm``: the value returned is what the argument holds at ``variant.agent``,
    whose ``llm`` field is not known); "" where it followed all of it, or where ``detail``
    names a whole parameter."""
    path = entry_path(detail)
    if path is None:
        return argument, ""
    held = argument
    #: the first of the positions met last that were not followed (``messages[0]`` of a list
    #: whose first elements are not known), None where there is none
    unfollowed: int | None = None
    for depth, (key, attribute) in enumerate(path):
        inner = _entry_at(held, key, attribute)
        if inner is held and isinstance(key, int):
            # any of its elements: what they hold below is read on (``['content']``)
            if key == 0 and line:
                held = _first_unknown(held, line)
            if unfollowed is None:
                unfollowed = depth
            continue
        if inner is held:
            start = depth if unfollowed is None else unfollowed
            return held, "".join(f".{k}" if a else f"[{k!r}]" for k, a in path[start:])
        held, unfollowed = inner, None
    if unfollowed is not None:
        return held, "".join(f".{k}" if a else f"[{k!r}]" for k, a in path[unfollowed:])
    return held, ""


def _first_unknown(argument: Value, line: int) -> Value:
    """``argument[0]`` where the list's first elements are not known (a history loaded, or
    ``[system, *history, question]``): any of its elements, but what it holds in a chat
    message of a constant role other than ``system`` or ``developer`` is not shown to be
    there (a user turn a caller appended after the system message a list begins with): an
    unproven step at the call on ``line`` (``--explain``). ``argument`` itself where it holds
    no such fact."""
    if not any(f.role in _LATER_ROLES for f in argument.facts):
        return argument
    step = (f"{ASSUMED} [0] of a list whose first message is not known", line, "[0]", "")
    return map_facts(
        argument,
        lambda facts: frozenset(f.passed_on(step) if f.role in _LATER_ROLES else f for f in facts),
    )


#: roles of a chat message that a list of messages does not begin with where it has a system
#: message (``_first_unknown``)
_LATER_ROLES = MESSAGE_ROLES - {"system", "developer"}


def _entry_at(argument: Value, key: str | int, attribute: bool) -> Value:
    """What ``argument[key]`` (``argument.key`` with ``attribute``) holds (``entry_of``, one
    step); ``argument`` itself where that is not known. An ``int`` key is a position: the
    element there of a list or tuple whose first elements are known (``[system]``, then
    appends)."""
    if isinstance(key, int):
        if argument.elts is not None and key < len(argument.elts):
            return argument.elts[key]
        return argument
    if argument.items is None and argument.shape is Shape.LIST:
        # a list whose elements are dicts of known keys or objects of known fields: a
        # callee that reads one key of its elements (``m["content"] for m in messages``,
        # ``r.response for r in results``) takes what each holds under that key
        element = element_fields(argument)
        if element is None:
            return argument
        from_element = _entry_at(element, key, attribute)
        return argument if from_element is element else from_element
    if argument.items is None:
        facts = (
            field_read(argument.facts, key)
            if attribute
            else other_keys_dropped(argument.facts, key)
        )
        if facts is not argument.facts:
            # a time or id a field's factory made is in that field only (``construct``), and
            # one the caller stored under another constant key of a dict whose keys are not
            # all known (``settings["trace_id"] = uuid4()``) is not in this entry (``keyed``)
            return argument.with_facts(facts)
        return argument
    # an object we built, or (a field read) one of several such objects or dicts of known
    # keys (``Choice``): a dict's field read raises, so the objects' fields are what is sent
    is_object = isinstance(argument.ref, (ClassInfo, ExternalClass)) or (
        attribute and isinstance(argument.ref, Choice)
    )
    if attribute and not is_object and argument.shape is Shape.DICT and not hasattr(dict, key):
        # a field of a dict of known keys (``config.tool`` of ``{"configurable": ...}``): a
        # dict has no such attribute, so the callee's read raises and sends nothing of it
        return CLEAN
    if attribute != is_object:
        return argument
    if isinstance(argument.ref, Choice) and _has_method(argument.ref, key):
        # one of the classes computes it (a property): not a field of the known fields
        return argument
    held = dict(argument.items).get(key)
    if held is None:
        if not is_object and argument.shape is Shape.DICT:
            # a dict of known keys (``Value.items`` lists all of them) without this one: the
            # callee's ``page["k"]`` raises and ``page.get("k")`` gives its own default, so
            # nothing the caller put under its other keys is sent there
            return CLEAN
        if not is_object or _has_method(argument.ref, key):
            return argument
        # a field of an object we built that nothing stored into holds nothing, as
        # ``obj.field`` read where the object is built (``CallsMixin.attribute_of``)
        held = CLEAN
    return held


def added_elem(old: Value, method: str, args: list[Value], keywords: bool) -> Value | None:
    """``Value.elem`` of the list ``old`` after ``old.<method>(*args)``: its elements' fields
    merged with those of what ``append``/``insert`` adds or of the elements ``extend`` adds;
    None once an element of unknown fields may be in it."""
    if keywords:
        return None
    if method == "append" and len(args) == 1:
        added = known_elem(args[0])
    elif method == "insert" and len(args) == 2:
        added = known_elem(args[1])
    elif method == "extend" and len(args) == 1:
        added = listed_elem(args[0])
    else:
        return None
    return merge_elem(listed_elem(old), added)


def _inherits(info: ClassInfo, base: ClassInfo) -> bool:
    """Whether ``base`` is among the same-module base classes of ``info``, at any depth."""
    seen: set[int] = set()
    todo = list(info.bases)
    while todo:
        cls = todo.pop()
        if cls is base:
            return True
        if id(cls) not in seen:
            seen.add(id(cls))
            todo.extend(cls.bases)
    return False


def _has_method(cls: object, name: str) -> bool:
    """True when ``cls`` (a ``ClassInfo`` or ``ExternalClass``, or a ``Choice``: one of its
    classes) has a method ``name``."""
    if isinstance(cls, Choice):
        return any(_has_method(one, name) for one in cls.classes)
    if isinstance(cls, ClassInfo):
        return cls.find_method(name) is not None
    return isinstance(cls, ExternalClass) and name in cls.methods


def _timeish(value: Value) -> bool:
    """A datetime or date, or a value holding a time (``datetime.now().astimezone()``)."""
    return value.shape in (Shape.DATETIME, Shape.DATE) or any(
        f.kind is Kind.TIME for f in value.facts
    )


def with_grain(given: frozenset[Fact], grain: str) -> frozenset[Fact]:
    """What a caller's argument facts ``given`` become where the callee's PARAM fact has
    granularity ``grain``: "sorted" (the callee sorted it, or read one element by a computed
    key): its contents without its order; "order" (the callee built a list by iterating it):
    its order alone; "" all of it."""
    if grain == "sorted":
        return Value(given).ordered().facts
    if grain == "order":
        return order_of(given)
    if grain == ONCE:
        return held_once(given)
    return given


def order_of(facts: frozenset[Fact]) -> frozenset[Fact]:
    """The order part of ``facts``: its unstable tool order (a list from ``list_tools()``;
    a set's order in a value may be that of the text of one of its elements, a user message
    that joins a set, so it is not taken), and each parameter's fact (not sorted) as a fact of
    that parameter's order (granularity "order")."""
    out = set()
    for f in facts:
        if f.kind is Kind.TOOLS_UNSTABLE:
            out.add(f)
        elif f.kind is Kind.PARAM and f.granularity in ("", "order"):
            out.add(f if f.granularity == "order" else replace(f, granularity="order"))
    return frozenset(out)


def split_grain(key: str) -> tuple[str, str]:
    """A summary's sink key and its granularity suffix (``"0~sorted"`` -> ("0", "sorted"))."""
    base, sep, grain = key.rpartition("~")
    if sep and grain in ("sorted", "order", ONCE):
        return base, grain
    return key, ""


def _bare_call(func: ast.expr) -> ast.Call:
    """``func()``, made up at ``func``'s place (a field's factory run, a property read)."""
    call = ast.copy_location(ast.Call(func=func, args=[], keywords=[]), func)
    call.end_lineno, call.end_col_offset = func.end_lineno, func.end_col_offset
    return call


def _default_factories(
    cls: ast.ClassDef, makers: tuple[str, ...] = ("field", "Field")
) -> dict[str, ast.expr]:
    """The fields of ``cls`` declared with a default factory (``x: T =
    field(default_factory=f)``, pydantic's ``Field(default_factory=f)``; ``makers``: the
    names of the calls that count): name -> ``f``."""
    found: dict[str, ast.expr] = {}
    for stmt in cls.body:
        if not (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        func = stmt.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in makers:
            continue
        for kw in stmt.value.keywords:
            if kw.arg == "default_factory":
                found[stmt.target.id] = kw.value
    return found


def _handed_factories(cls: ast.ClassDef, init: object, node: ast.Call) -> dict[str, ast.expr]:
    """The fields of pydantic model ``cls`` declared ``Field(default_factory=f)`` that its own
    ``init`` (``def __init__(self, goal, **kwargs): super().__init__(goal=goal, **kwargs)``)
    leaves to that factory when the class is called as ``node``: not a parameter of ``init``,
    not a keyword of its ``super().__init__(...)`` call, not a keyword of ``node`` (nothing
    where ``node`` or that call splats a dict of its own). A dataclass's factory does not run
    under an ``__init__`` of its own; {} for any other ``init``."""
    if not isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)) or init not in cls.body:
        return {}
    handed = [
        call
        for call in ast.walk(init)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "__init__"
        and isinstance(call.func.value, ast.Call)
        and isinstance(call.func.value.func, ast.Name)
        and call.func.value.func.id == "super"
    ]
    if len(handed) != 1:
        return {}
    given = {kw.arg for kw in (*handed[0].keywords, *node.keywords)}
    kwargs = init.args.kwarg.arg if init.args.kwarg is not None else None
    splats = [kw.value for kw in handed[0].keywords if kw.arg is None]
    if None in {kw.arg for kw in node.keywords} or any(
        not (isinstance(v, ast.Name) and v.id == kwargs) for v in splats
    ):
        return {}
    args = [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs]
    params = {a.arg for a in args}
    self_name = args[0].arg if args else None
    # what ``init`` stores itself (``self.key = "kept"``) is its own, whatever the value
    stored = {
        target.attr
        for stmt in ast.walk(init)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == self_name
    }
    return {
        name: factory
        for name, factory in _default_factories(cls, ("Field",)).items()
        if name not in given and name not in params and name not in stored
    }


def _record_of_this_module(info: ClassInfo, classes: Mapping[str, ClassInfo]) -> bool:
    """True when ``info`` is a ``@dataclass`` of this module that writes no ``__init__`` or
    ``__post_init__`` of its own, and it and each of its bases is a class of this module whose
    bases are written as names of this module's classes (or ``object``), with no metaclass
    or other class keyword: a record whose building only stores its fields, nothing of a
    library's class running when one is built."""
    if not _is_dataclass(info.node):
        return False
    for each in info.lineage():
        if each.node.keywords or "__init__" in each.methods or "__post_init__" in each.methods:
            return False
        for base in each.node.bases:
            if not (isinstance(base, ast.Name) and (base.id == "object" or base.id in classes)):
                return False
    return True


def _is_dataclass(cls: ast.ClassDef) -> bool:
    """True when ``cls`` is decorated ``@dataclass`` (``dataclasses.dataclass(...)``)."""
    decorated = False
    for dec in cls.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        decorated = decorated or name == "dataclass"
    return decorated


def _dataclass_fields(cls: ast.ClassDef) -> list[str]:
    """The fields of a class decorated ``@dataclass`` (``dataclasses.dataclass(...)``), in
    declaration order (``ClassVar`` annotations are not fields); [] for any other class."""
    if not _is_dataclass(cls):
        return []
    return [
        stmt.target.id
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and "ClassVar" not in ast.unparse(stmt.annotation)
    ]


def added_to_set(
    old: Value, method: str, args: list[Value], kwargs: Mapping[str | None, Value]
) -> object:
    """The ``ref`` of ``old`` after ``old.<method>(*args)`` adds to it: a set literal's mark of
    an order that is the same in every process (``facts.STABLE_SETS``) stays only when the set
    still holds numbers only (``add`` of a number, ``update`` from sets of numbers); a string
    added, or a second element added to a set of one, leaves a set whose order follows the
    per-process hash seed."""
    ref = old.ref
    if not stable_set(old) or not isinstance(ref, tuple):
        return ref
    if ref[3:] == ("numbers",) and not kwargs and args:
        if method == "add" and len(args) == 1 and args[0].shape is Shape.NUM:
            return ref
        if method == "update" and all(
            a.shape is Shape.SET and isinstance(a.ref, tuple) and a.ref[3:] == ("numbers",)
            for a in args
        ):
            return ref
    return ref[:3]


def _handed_call(node: ast.Call) -> ast.Call | None:
    """The call ``asyncio.to_thread(f, *args, **kwargs)`` makes (``f(*args, **kwargs)``), made
    once per node (kept on it, so each evaluation meets the same node), at the place of
    ``node``; None when the callable is a starred argument."""
    if not node.args or isinstance(node.args[0], ast.Starred):
        return None
    made: ast.Call | None = node.__dict__.get("_promptcache_handed")
    if made is None:
        made = ast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords)
        ast.copy_location(made, node)
        made.end_lineno, made.end_col_offset = node.end_lineno, node.end_col_offset
        node.__dict__["_promptcache_handed"] = made
    return made
