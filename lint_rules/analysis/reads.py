"""What one analysis read of the summaries it was given, and whether other summaries differ
there.

An analysis is a deterministic function of the file's text, its task's requests, ``force``,
``sink_calls`` and module name, and of the parts of its ``externals`` it reads. It reads an
external only through ``Analyzer.external(qual)`` (each such name is in its output's
``wanted``) or through a class an exported summary names (``load_externals``' ``find``,
recorded in ``found``); of an external class it reads the methods it looks up (``methods``,
or all of them when it lists them: ``listed``) and the stored field facts of the fields it
reads (``fields``); the rest of a class's export (its ``default_repr``, ``abstract`` and
``overrides``) is taken as read whenever the class is given.

So when the driver would analyse a file again with externals that equal, in every part the
last analysis read, the ones it had then (and the same task otherwise), the analysis would
read the same values, run the same way and give the same output: the driver takes that output
again (``same_where_read``) instead of running it (``Program._reuse``). On the corpus trees a
fifth of langroid's analyses are such repeats: a class it uses gained a method summary it
never calls, or field facts of a field it never reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the keys of a class's exported data whose parts are tracked one by one
_TRACKED = ("methods", "field_facts")


@dataclass
class InputReads:
    """The parts of its externals one analysis read besides the names it wanted: the
    qualified names ``find`` looked up, per class the methods read (``methods``) or whether it
    listed them all (``listed``), and per class the fields whose stored facts it read."""

    found: set[str] = field(default_factory=set)
    methods: dict[str, set[str]] = field(default_factory=dict)
    listed: set[str] = field(default_factory=set)
    fields: dict[str, set[str]] = field(default_factory=dict)


class ReadFields(dict):  # type: ignore[type-arg]
    """An external class's ``field_facts`` (attribute -> facts) that notes each attribute
    looked up with ``get`` (the only way the analysis reads it) in ``reads``."""

    __slots__ = ("qual", "reads")

    def __init__(self, qual: str, reads: InputReads) -> None:
        super().__init__()
        self.qual = qual
        self.reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.fields.setdefault(self.qual, set()).add(key)
        return dict.get(self, key, default)


def same_where_read(
    old: dict[str, Any], new: dict[str, Any], wanted: dict[str, Any], reads: InputReads
) -> bool:
    """Whether the externals ``new`` equal ``old`` in every part an analysis given ``old``
    read (``wanted``: its output's wanted names; ``reads``: what else it read)."""
    if old is new:
        return True
    for qual in old.keys() | new.keys():
        was, now = old.get(qual), new.get(qual)
        if was is now:
            continue
        if (
            was is not None
            and now is not None
            and was["kind"] == "class"
            and now["kind"] == "class"
        ):
            if not _same_class(qual, was, now, reads):
                return False
        elif (qual in wanted or qual in reads.found) and was != now:
            return False
    return True


def _same_class(qual: str, was: dict[str, Any], now: dict[str, Any], reads: InputReads) -> bool:
    """Whether two exports of one class agree in what was read of them: every key but the
    tracked ones in full, the methods read (all when listed) and the fields read."""
    if was.keys() != now.keys() or any(was[k] != now[k] for k in was if k != "data"):
        return False
    before, after = was["data"], now["data"]
    if before is after:
        return True
    if before.keys() - set(_TRACKED) != after.keys() - set(_TRACKED) or any(
        before[k] != after[k] for k in before if k not in _TRACKED
    ):
        return False
    methods_before, methods_after = before.get("methods", {}), after.get("methods", {})
    if qual in reads.listed:
        if methods_before != methods_after:
            return False
    elif any(methods_before.get(m) != methods_after.get(m) for m in reads.methods.get(qual, ())):
        return False
    fields_before, fields_after = before.get("field_facts", {}), after.get("field_facts", {})
    return all(fields_before.get(a) == fields_after.get(a) for a in reads.fields.get(qual, ()))


__all__ = ["InputReads", "ReadFields", "same_where_read"]
