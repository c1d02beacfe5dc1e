"""A module's summaries as JSON (what other modules of the program see), and back.

Exported per symbol of the module (``"func"``, ``"Class"``, ``"NAME"``):

- ``functions``: a function's ``Summary``: which parameters reach its return value (PARAM
  facts), which facts it creates there, which parameters reach a sink inside it, what it stores
  into its arguments or receiver;
- ``classes``: each method's summary (``__init__`` included) and whether instances have the
  default repr;
- ``values``: a module-level value with facts or an unordered shape (``SKILLS = {...}``);
- ``aliases``: what the module's imports bind (``from .context import current_context`` in a
  package ``__init__``), so a name re-exported by a package resolves to its definition.

Facts keep the file they were born in (``Fact.path``) and the steps that passed them on,
each with its file (``Fact.via``); autofix data stays behind (a fix edits the file the fact
was born in, which is not the file a finding in another module reports).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..events import HandedHistory
from ..facts import ASSUMED, OVERRIDE, PINNABLE, Fact, Kind, Shape, Value, When
from ..frames import ClassInfo, ExternalClass, SinkTarget, Summary
from .reads import InputReads, ReadFields

JSON = dict[str, Any]
#: value shapes worth exporting for a module-level value even without facts
_EXPORTED_SHAPES = frozenset({Shape.SET, Shape.UNORDERED_LIST, Shape.TOOL_RESULT})


def exported(fact: Fact, own: Callable[[int], bool]) -> bool:
    """Whether a fact means anything to another module. Not exported: loop-variable
    bookkeeping and "chosen per request" facts (the rules that read those want them born in
    the sink's own function), time and unique values computed once (they no longer vary), and
    PARAM facts of an enclosing scope."""
    if fact.kind is Kind.PARAM:
        return own(_key(fact))
    if fact.kind in (Kind.LOOP, Kind.VARIES):
        return False
    return not (fact.pinned and fact.kind in PINNABLE)


def fact_to_json(fact: Fact, path: str) -> list[Any]:
    param_key = fact.kind is Kind.PARAM
    out: list[Any] = [
        fact.kind.value,
        fact.line,
        fact.col,
        fact.detail,
        fact.granularity,
        fact.pinned,
        fact.param,
        "" if param_key else (fact.path or path),
        # the chain's steps keep the file they are in; a parameter's fact keeps only its
        # unproven steps (``calls.unproven``)
        [
            [text, line, name, step_path or path]
            for text, line, name, step_path in fact.via
            if not param_key or text.startswith((ASSUMED, OVERRIDE))
        ],
        fact.role,
    ]
    if fact.key or fact.when:
        # the constant keys it was stored under (``Fact.key``), only where there are some,
        # or where the branch of a parameter it needs (``Fact.when``) follows
        out.append(list(fact.key))
    if fact.when:
        out.append(list(fact.when))
    return out


def fact_from_json(item: list[Any], key: int) -> Fact:
    kind = Kind(item[0])
    return Fact(
        kind,
        item[1],
        item[2],
        item[3],
        item[4],
        item[5],
        item[6],
        (key,) if kind is Kind.PARAM else (),
        path=item[7],
        via=tuple((str(s[0]), int(s[1]), str(s[2]), str(s[3])) for s in item[8]),
        role=str(item[9]) if len(item) > 9 else "",
        key=tuple(str(k) for k in item[10]) if len(item) > 10 else (),
        when=_when_from_json(item[11]) if len(item) > 11 else (),
    )


def _when_from_json(item: list[Any]) -> When:
    """A ``Fact.when`` read back: three items, or four with the constant its test compares
    the parameter with (an int or a str)."""
    head = (int(item[0]), bool(item[1]), int(item[2]))
    if len(item) > 3:
        const = item[3]
        return (*head, const if isinstance(const, str) else int(const))
    return head


def value_to_json(value: Value, path: str, own: Callable[[int], bool]) -> JSON:
    """``own(key)``: whether a PARAM fact belongs to the function being exported (others, of
    an enclosing scope, mean nothing elsewhere and are dropped)."""
    facts = sorted(
        (fact_to_json(f, path) for f in value.facts if exported(f, own)),
        key=repr,
    )
    out: JSON = {"facts": facts, "shape": value.shape.value}
    if value.const is not None and len(value.const) <= 2000:
        out["const"] = value.const
    if value.elem_str:
        out["elem_str"] = True
    if value.name_key:
        out["name_key"] = value.name_key
    if value.ref == "literal":
        out["ref"] = "literal"
    elif isinstance(value.ref, (ClassInfo, ExternalClass)):
        out["class"] = _class_name(value.ref)
    if value.elts is not None:
        out["elts"] = [value_to_json(e, path, own) for e in value.elts]
        if value.more:
            out["more"] = True
    if value.items is not None:
        out["items"] = [[k, value_to_json(v, path, own)] for k, v in value.items]
    if value.elem is not None:
        out["elem"] = value_to_json(value.elem, path, own)
    return out


def value_from_json(data: JSON, key: int, classes: Callable[[str], object]) -> Value:
    ref: object = data.get("ref")
    if "class" in data:
        ref = classes(data["class"])
    elts = data.get("elts")
    items = data.get("items")
    return Value(
        frozenset(fact_from_json(f, key) for f in data["facts"]),
        Shape(data["shape"]),
        data.get("const"),
        data.get("elem_str", False),
        data.get("name_key", ""),
        ref,
        tuple(value_from_json(e, key, classes) for e in elts) if elts is not None else None,
        tuple((k, value_from_json(v, key, classes)) for k, v in items)
        if items is not None
        else None,
        data.get("more", False),
        value_from_json(data["elem"], key, classes) if "elem" in data else None,
    )


def summary_to_json(summary: Summary, path: str) -> JSON:
    def own(key: int) -> bool:
        return key == summary.key

    return {
        "name": summary.name,
        "params": summary.params,
        "ret": value_to_json(summary.ret, path, own),
        "param_sinks": {
            str(i): [_target_to_json(t, path) for t in ts] for i, ts in summary.param_sinks.items()
        },
        "stores": {
            str(i): sorted(
                (fact_to_json(f, path) for f in facts if exported(f, own)),
                key=repr,
            )
            for i, facts in summary.stores.items()
        },
        "attr_stores": {
            attr: sorted((fact_to_json(f, path) for f in facts if exported(f, own)), key=repr)
            for attr, facts in sorted(summary.attr_stores.items())
        },
        "attr_objects": {
            attr: None if made is None else value_to_json(made, path, own)
            for attr, made in sorted(summary.attr_objects.items())
        },
        "attr_sinks": {
            a: [_target_to_json(t, path) for t in ts]
            for a, ts in sorted(summary.attr_sinks.items())
        },
        "builder": summary.builder,
        "marks": sorted(summary.marks),
        **(
            {
                "turn_histories": [
                    [
                        h.param,
                        h.content,
                        h.line,
                        h.col,
                        h.path or path,
                        h.history,
                        h.newest,
                        h.name,
                        [[t, line, n, p or path] for t, line, n, p in h.steps],
                    ]
                    for h in summary.turn_histories
                ]
            }
            if summary.turn_histories
            else {}
        ),
        **(
            {
                "sink_lines": {
                    k: [line, name, p or path]
                    for k, (line, name, p) in sorted(summary.sink_lines.items())
                }
            }
            if summary.sink_lines
            else {}
        ),
    }


def _target_to_json(target: SinkTarget, path: str) -> list[Any]:
    """A sink target as [region, label], with its unproven steps (each keeping its file) as a
    third item only when there are some."""
    region, label, unseen = target
    if not unseen:
        return [region, label]
    return [region, label, [[text, line, name, p or path] for text, line, name, p in unseen]]


def _target_from_json(item: list[Any]) -> SinkTarget:
    steps = item[2] if len(item) > 2 else []
    unseen = tuple((str(s[0]), int(s[1]), str(s[2]), str(s[3])) for s in steps)
    return (str(item[0]), str(item[1]), unseen)


def summary_from_json(data: JSON, classes: Callable[[str], object]) -> Summary:
    summary = Summary(list(data["params"]), name=data["name"], builder=data["builder"])
    summary.marks = frozenset(data.get("marks", ()))
    key = summary.key = id(summary)
    summary.ret = value_from_json(data["ret"], key, classes)
    summary.param_sinks = {
        int(i): [_target_from_json(t) for t in ts] for i, ts in data["param_sinks"].items()
    }
    summary.stores = {
        int(i): frozenset(fact_from_json(f, key) for f in facts)
        for i, facts in data["stores"].items()
    }
    summary.attr_sinks = {
        a: [_target_from_json(t) for t in ts] for a, ts in data.get("attr_sinks", {}).items()
    }
    summary.attr_stores = {
        attr: frozenset(fact_from_json(f, key) for f in facts)
        for attr, facts in data.get("attr_stores", {}).items()
    }
    summary.attr_objects = {
        attr: None if made is None else value_from_json(made, key, classes)
        for attr, made in data.get("attr_objects", {}).items()
    }
    summary.sink_lines = {
        k: (int(v[0]), str(v[1]), str(v[2])) for k, v in data.get("sink_lines", {}).items()
    }
    summary.turn_histories = [
        HandedHistory(
            int(h[0]),
            str(h[1]),
            int(h[2]),
            int(h[3]),
            str(h[4]),
            str(h[5]),
            int(h[6]),
            str(h[7]),
            tuple((str(t), int(line), str(n), str(p)) for t, line, n, p in h[8]),
        )
        for h in data.get("turn_histories", ())
    ]
    return summary


def interesting(data: JSON) -> bool:
    """Whether an exported symbol can change a caller's findings beyond the default for an
    unknown callee (its result carries its arguments' facts): it creates facts of its own
    (in its return value or in what it stores), returns a set or a project class, or passes
    an argument to a sink. Flows of parameters alone matter only to a caller that passes a
    value with facts (the driver's ``carried``)."""
    if "methods" in data:
        return bool(data.get("overrides")) or any(interesting(m) for m in data["methods"].values())
    if "params" in data:
        ret = data["ret"]
        return bool(
            _own_facts(ret)
            or ret["shape"] in _SHAPE_NAMES
            or "class" in ret
            or data["param_sinks"]
            or data.get("attr_sinks")
            or any(f[0] != Kind.PARAM.value for facts in data["stores"].values() for f in facts)
            or data["builder"]
            or data.get("marks")
            or data.get("turn_histories")
        )
    return True


def _own_facts(value: JSON) -> bool:
    return any(f[0] != Kind.PARAM.value for f in value["facts"]) or any(
        _own_facts(e) for e in value.get("elts") or ()
    )


_SHAPE_NAMES = frozenset(s.value for s in _EXPORTED_SHAPES)


def local_class_names(value: JSON) -> list[str]:
    """The names of the exporting module's own classes (``"@Store"`` -> ``Store``) that an
    exported value (``value_to_json``), its elements, fields or list element are instances
    of."""
    out = []
    name = value.get("class")
    if isinstance(name, str) and name.startswith("@"):
        out.append(name[1:])
    for e in value.get("elts") or ():
        out.extend(local_class_names(e))
    for _, v in value.get("items") or ():
        out.extend(local_class_names(v))
    if "elem" in value:
        out.extend(local_class_names(value["elem"]))
    return out


def _class_name(cls: ClassInfo | ExternalClass) -> str:
    if isinstance(cls, ExternalClass):
        return cls.qualname
    return f"@{cls.node.name}"  # a class of the exporting module, qualified by the driver


def _key(f: Fact) -> int:
    """The function a PARAM fact belongs to (``Fact.fix == (key,)``)."""
    return f.fix[0] if f.fix and isinstance(f.fix[0], int) else 0


def exportable_value(value: Value) -> bool:
    return bool(value.without(Kind.PARAM, Kind.LOOP).facts) or value.shape in _EXPORTED_SHAPES


class LazySummaries(Mapping[str, Summary]):
    """An external class's methods: name -> ``Summary``, each read from its JSON on first
    use (a module that calls a large class uses few of its methods; reading them all took
    about a fifth of the analyses' time on browser-use). Each method's summary is read once,
    so its PARAM facts keep one key (``Summary.key``). ``reads``: where each method name
    looked up (found or not) is noted, under the class's qualified name ``qual``, and a
    listing of them all."""

    def __init__(
        self,
        data: dict[str, JSON],
        classes: Callable[[str], object],
        qual: str = "",
        reads: InputReads | None = None,
    ) -> None:
        self._data = data
        self._classes = classes
        self._read: dict[str, Summary] = {}
        self._qual = qual
        self._reads = reads

    def __getitem__(self, name: str) -> Summary:
        if self._reads is not None:
            self._reads.methods.setdefault(self._qual, set()).add(name)
        summary = self._read.get(name)
        if summary is None:
            summary = self._read[name] = summary_from_json(self._data[name], self._classes)
        return summary

    def __iter__(self) -> Iterator[str]:
        if self._reads is not None:
            self._reads.listed.add(self._qual)
        return iter(self._data)

    def __len__(self) -> int:
        if self._reads is not None:
            self._reads.listed.add(self._qual)
        return len(self._data)


def _override(data: JSON) -> Summary:
    """An overriding method's summary (``ExternalClass.overrides``): only where its arguments
    reach a sink is read (the driver sends no more), so no class it names is looked up."""
    return summary_from_json(data, lambda name: None)


def load_externals(
    blobs: dict[str, Any], reads: InputReads | None = None
) -> dict[str, Summary | ExternalClass | Value]:
    """The ``externals`` of an analysis, from the driver's blobs (qualified name -> export).
    ``reads``: where the classes a summary names, the methods read and the fields whose facts
    are read are noted (``reads.InputReads``)."""
    loaded: dict[str, Summary | ExternalClass | Value] = {}

    def classes_in(module: str) -> Callable[[str], object]:
        def find(name: str) -> object:
            qual = f"{module}.{name[1:]}" if name.startswith("@") else name
            if reads is not None:
                reads.found.add(qual)
            return load(qual)

        return find

    def load(qual: str) -> Summary | ExternalClass | Value | None:
        if qual in loaded:
            return loaded[qual]
        blob = blobs.get(qual)
        if blob is None:
            return None
        kind, data, module = blob["kind"], blob["data"], blob["module"]
        find = classes_in(module)
        if kind == "class":
            methods = LazySummaries(data["methods"], find, qual, reads)
            overrides = {
                method: tuple(_override(entry["summary"]) for entry in entries)
                for method, entries in data.get("overrides", {}).items()
            }
            field_facts = {} if reads is None else ReadFields(qual, reads)
            for attr, facts in data.get("field_facts", {}).items():
                field_facts[attr] = frozenset(fact_from_json(f, 0) for f in facts)
            cls = ExternalClass(
                f"{module}.{blob['name']}",
                methods,
                data["default_repr"],
                field_facts,
                abstract=frozenset(data.get("abstract", ())),
                overrides=overrides,
                role=data.get("role", ""),
            )
            loaded[qual] = cls
            return cls
        if kind == "function":
            loaded[qual] = summary_from_json(data, find)
        elif kind == "value":
            loaded[qual] = value_from_json(data, 0, find)
        else:
            return None
        return loaded[qual]

    for qual in blobs:
        load(qual)
    return loaded
