"""What a rule's ``check(ctx)`` gets: the parsed module, its taint events and helpers."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace

from ._base import Diagnostic, Fix, Location, Related, Severity, TextEdit
from .config import LintConfig
from .events import HandedTurn, PrefixEntry, SinkCall
from .facts import Fact, Kind, Value


@dataclass
class ModuleContext:
    """One module under analysis.

    ``entries``/``sinks`` come from ``taint.Analyzer``; ``lines`` are the source lines (for
    byte-column conversion). Rules build diagnostics through ``diagnostic()``; one whose chain
    passes through a call the analysis cannot see is not a finding (``runner.proven``).
    """

    path: str
    source: str
    tree: ast.Module
    config: LintConfig
    entries: list[PrefixEntry] = field(default_factory=list)
    sinks: list[SinkCall] = field(default_factory=list)
    #: calls that put a cache breakpoint on an argument: (call, argument, function name)
    breakpoint_calls: list[tuple[ast.Call, ast.expr, str]] = field(default_factory=list)
    #: calls passing their client's history to a function that puts text made from the
    #: turn's input ahead of it (PC010)
    handed_turns: list[HandedTurn] = field(default_factory=list)
    #: ``requested_lines`` of each node an entry is recorded at, by ``id``, made on first use
    _requested: dict[int, tuple[int, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    #: the columns of the calls on each line, by the called name (``chain``), made on first use
    _call_columns: dict[tuple[int, str], int] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    #: for a node a finding of ``facts_in_prefix`` is reported at, by ``id``: the other lines
    #: where the same value enters a request (another request's argument, a helper's call
    #: that sends it), each of which needs its own suppression (``requested_lines``)
    _also_sent: dict[int, set[int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def location(self, node: ast.AST) -> Location:
        line: int = getattr(node, "lineno", 1)
        col: int = getattr(node, "col_offset", 0)
        end_line: int = getattr(node, "end_lineno", None) or line
        end_col: int = getattr(node, "end_col_offset", None) or col
        return Location(self.path, line, col, end_line, end_col)

    def at(self, line: int, col: int) -> Location:
        return Location(self.path, line, col, line, col)

    def origin(self, fact: Fact, message: str = "") -> Related:
        """Where ``fact`` was born (in this file or another), with the functions that passed
        it on: "datetime.now() is born here, returned by Clock.now_text"."""
        where = Location(fact.path or self.path, fact.line, fact.col, fact.line, fact.col)
        text = message or f"{fact.detail} is born here"
        if fact.via:
            text += ", " + ", ".join(step[0] for step in fact.via)
        # an unordered iteration's fact sits where it is iterated; its birth is ``fact.site``
        value = "" if fact.kind is Kind.UNORDERED else written_name(fact.detail)
        return Related(where, text, origin=True, value=value)

    def chain(self, fact: Fact, message: str = "") -> tuple[Related, ...]:
        """The finding's chain as related locations: where ``fact`` was born (``origin``),
        then each call that passed it on (``path:line``, "`now_text` passes it on: returned
        by Clock.now_text"), in this module or the ones it came through, innermost first."""
        steps = tuple(
            Related(
                Location(path or self.path, line, col, line, col),
                f"`{name}` passes it on: {text}",
                value=name,
            )
            for text, line, name, path in fact.via
            for col in (0 if path and path != self.path else self.call_column(line, name),)
        )
        return (self.origin(fact, message), *steps)

    def call_column(self, line: int, name: str) -> int:
        """The column of the first call of ``name`` (``f(...)``, ``obj.f(...)``) that starts
        on ``line`` of this module, where a chain's step passed a value on; 0 where none does
        (a step that is no call: ``[0]``, a property)."""
        if self._call_columns is None:
            found: dict[tuple[int, str], int] = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call):
                    func = node.func
                    called = func.attr if isinstance(func, ast.Attribute) else None
                    if isinstance(func, ast.Name):
                        called = func.id
                    key = (node.lineno, called or "")
                    if called and (key not in found or node.col_offset < found[key]):
                        found[key] = node.col_offset
            self._call_columns = found
        return self._call_columns.get((line, name), 0)

    def diagnostic(
        self,
        code: str,
        message: str,
        node: ast.AST,
        severity: Severity,
        related: tuple[Related, ...] = (),
        fix: Fix | None = None,
    ) -> Diagnostic:
        location = self.location(node)
        requested = self.requested_lines(node)
        return Diagnostic(code, message, location, severity, related, fix, requested)

    def requested_lines(self, node: ast.AST) -> tuple[int, ...]:
        """The lines of the request arguments through which ``node``, where an entry enters a
        prefix region (or a piece of its text), enters a request: ``system=s3`` for
        ``s2 = s.strip()`` that ``s3 = s2`` names, ``messages=msgs`` for a ``{"role":
        "system"}`` dict in ``msgs``; () where no entry at ``node`` enters through a request's
        argument (a system message no request in this module is seen to send). Where the
        value reported there also enters a request elsewhere (another request, a helper's
        call that sends it: ``facts_in_prefix``), those lines are among them too, so one
        comment does not silence the others."""
        if self._requested is None:
            found: dict[int, set[int]] = {}
            for entry in self.entries:
                line = getattr(entry.arg, "lineno", None)
                if line is None:
                    continue
                for at in (entry.node, *(part[0] for part in entry.parts)):
                    found.setdefault(id(at), set()).add(line)
            self._requested = {k: tuple(sorted(v)) for k, v in found.items()}
        lines = self._requested.get(id(node), ())
        also = self._also_sent.get(id(node))
        if not lines or not also:
            return lines
        return tuple(sorted(also.union(lines)))

    def facts_in_prefix(
        self,
        wanted: Callable[[Fact, PrefixEntry], bool],
        regions: frozenset[str] = frozenset({"tools", "system", "messages", "frozen", "session"}),
    ) -> Iterator[tuple[PrefixEntry, Fact]]:
        """Each wanted fact once, at the earliest place it enters a prefix region.

        "Earliest" is by source position, so a time formatted into ``system_prompt = ...`` is
        reported at that line rather than again where ``system_prompt`` is passed on. A fact
        of this file that came back through another module's summary (its ``path`` is this
        file, its ``fix`` and ``site`` left behind) is the same fact as the one born here: of
        two at the same place the one born here is kept, then the first by ``_tie``, so the
        choice does not depend on the order a fact set is iterated in (the hash seed).
        """
        best: dict[tuple[object, ...], tuple[PrefixEntry, Fact]] = {}
        # each key's places: (line of the request's argument or of the helper's call's, the
        # node the value is at, whether it entered through a request's argument)
        places: dict[tuple[object, ...], set[tuple[int, int, bool]]] = {}
        for entry in self.entries:
            if entry.region not in regions:
                continue
            for fact in entry.value.facts:
                if not wanted(fact, entry):
                    continue
                where = entry
                for node, _, _, facts in entry.parts:
                    if fact in facts:  # the piece of the text that carries it
                        where = replace(entry, node=node)
                        break
                path = "" if fact.path == self.path else fact.path
                # a fact returned by a helper is reported in each function it reaches
                where_from = id(entry.function) if fact.via or path else 0
                key = (fact.kind, path, fact.line, fact.col, fact.detail, where_from)
                through = entry.arg if entry.arg is not None else where.node
                places.setdefault(key, set()).add(
                    (getattr(through, "lineno", 0), id(where.node), entry.arg is not None)
                )
                old = best.get(key)
                if old is None:
                    best[key] = (where, fact)
                    continue
                here, there = (_pos(where.node), fact.rank), (_pos(old[0].node), old[1].rank)
                if here < there or (
                    here == there and _tie(fact, self.path) < _tie(old[1], self.path)
                ):
                    best[key] = (where, fact)
        for found, (where, _fact) in best.items():
            # where else the value enters a request: a request's argument, or a helper's call
            # (recorded at its argument), but not the reported place itself
            also = {
                line
                for line, at, argument in places[found]
                if line and (argument or at != id(where.node))
            }
            if also:
                self._also_sent.setdefault(id(where.node), set()).update(also)
        yield from sorted(
            best.values(),
            key=lambda pair: (_pos(pair[0].node), pair[1].line, _tie(pair[1], self.path)),
        )

    def edits_fix(self, title: str, *edits: TextEdit) -> Fix:
        return Fix(title, tuple(sorted(edits)))


#: the name of the last call in a fact's detail (``random.Random().random()`` -> ``random``)
_CALLED = re.compile(r"([A-Za-z_]\w*)\([^()]*\)$")


#: a dotted name read as a value (``os.environ``, ``sys.platform``)
_READ = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")


#: fact descriptions (``Fact.detail``) and what is written where such a fact is born
_DESCRIBED = (
    ("a conditional expression", "if"),
    ("a filter in a comprehension", ""),  # born at the condition, after its ``if``
    ("chosen by the `if`", "if"),
    ("a set literal", "{"),
    ("a set comprehension", "{"),
)


def written_name(detail: str) -> str:
    """The name a fact's ``detail`` says is written where it was born: the called name of a
    call (``datetime.now()`` -> ``now``, ``json.dumps() without sort_keys`` -> ``dumps``,
    ``.iterdir()`` -> ``iterdir``); the last name of a value read (``os.environ`` ->
    ``environ``); for a description, what it says is written there (``if`` for a value chosen
    by a condition, ``{`` for a set literal); else ""."""
    for start, written in _DESCRIBED:
        if detail.startswith(start):
            return written
    token = detail.strip("`").split(" ", 1)[0]
    match = _CALLED.search(token)
    if match:
        return match.group(1)
    # a value read, not called (``os.environ``): its last name
    return token.rsplit(".", 1)[-1] if _READ.match(token) else ""


def born_in(fact: Fact, function: ast.AST | None) -> bool:
    """True when ``fact`` was born inside ``function``'s lines (the code of one request)."""
    if function is None or fact.path:
        return False
    start = getattr(function, "lineno", 0)
    end = getattr(function, "end_lineno", None) or start
    return start <= fact.line <= end


def request_scope(sink: SinkCall) -> ast.AST | None:
    """The code that runs once per request to ``sink``: the function around the call, or for
    a call at module level the outermost loop around it (each pass sends again); None for a
    call at module level outside loops (it runs once)."""
    if sink.function is not None:
        return sink.function
    return sink.loops[0] if sink.loops else None


def made_in(fact: Fact, function: ast.AST | None) -> bool:
    """True when ``fact`` was born inside ``function``'s lines, or was returned to it by a
    call on its lines (``pick_model()`` drawing ``random.choice(MODELS)`` afresh on each
    call): made anew each time ``function`` runs."""
    if born_in(fact, function):
        return True
    if function is None or not fact.via:
        return False
    what, line, _, path = fact.via[-1]
    start = getattr(function, "lineno", 0)
    end = getattr(function, "end_lineno", None) or start
    return what.startswith("returned by ") and not path and start <= line <= end


def first_fact_born_in(
    value: Value, function: ast.AST | None, kinds: Collection[Kind]
) -> Fact | None:
    """The earliest-born unpinned fact of ``value`` among ``kinds`` that was made inside
    ``function`` (``made_in``: so it changes from one request to the next), or None."""
    facts = [f for f in value.facts if f.kind in kinds and not f.pinned and made_in(f, function)]
    return min(facts, key=lambda f: (f.line, f.col, f.detail, f.rank)) if facts else None


def _pos(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _tie(fact: Fact, own: str) -> tuple[bool, bool, str]:
    """A total order of facts met at the same place: one born in this file (``own``) first,
    then one that carries a fix, then by everything the fact holds."""
    return (bool(fact.path) and fact.path != own, not fact.fix, repr((fact.identity, fact.via)))
