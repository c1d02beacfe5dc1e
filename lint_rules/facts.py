"""Abstract values of the taint engine: what the linter knows about an expression's value.

A ``Value`` is a set of ``Fact`` objects (where volatile or order-unstable data came from) plus a
coarse ``Shape`` (a set, a dict, a string, ...) and, when known, the constant string it holds.
Values are immutable and shared; combining two values unions their facts.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")


class Kind(enum.Enum):
    """The taint classes of the issue, plus the bookkeeping kinds the engine needs."""

    TIME = "time"  # datetime.now(), time.time(), ... (granularity "subday" or "day")
    UNIQUE = "unique"  # uuid4(), secrets.*, random.*, os.urandom, id(), hash(str)
    UNORDERED = "unordered"  # the result of iterating a set, os.listdir, glob, as_completed
    ENV = "environment"  # cwd, hostname, user name, os.environ, temp dir
    JSON_UNSORTED = "json"  # json.dumps without sort_keys=True, yaml.dump(sort_keys=False)
    REPR = "repr"  # str()/repr()/f-string of a dict, a set or an object with the default repr
    TOOLS_UNSTABLE = "tools"  # MCP list_tools(), entry points: order set by someone else
    VARIES = "varies"  # chosen per request: a conditional, a filtered comprehension
    PARAM = "param"  # the value of the enclosing function's parameter (for summaries)
    LOOP = "loop"  # a loop variable inside a function (per-iteration value)

    #: members are singletons compared by identity: hashed by identity too, in C (``Enum``'s
    #: own ``__hash__``, in Python, hashed the name each time a fact went into a set)
    __hash__ = object.__hash__


#: one step of a fact's chain: (what passed it on, 1-based line of that call, the name written
#: there, the file of that line: "" for the file being linted)
Step = tuple[str, int, str, str]
#: the start of a chain step through a call whose code the analysis cannot see
ASSUMED = "assumed to pass through"
#: the start of a chain step through a search call whose code the analysis cannot see, read
#: as what that search found for the text it was given (PC010's retrieved context:
#: ``regions.retrieved``)
SEARCHED = "found by the search"
#: the start of the step of one entry of a parameter splatted whole into a sink
#: (``create(**payload)``): proven where the caller's dict is known to hold that key, unproven
#: where its keys are not known (what it holds may be under another key)
SPLATTED = f"{ASSUMED} **"
#: the step of a value sent by a method chosen by the receiver's class, one of several it may
#: be (``calls.call_choices``) or a subclass's override of the abstract method called
#: (``calls.call_overrides``); a summary keeps it beside the unproven steps, so the finding
#: names the file and line of that method's call that sends it
OVERRIDE = "sent by"


def assumed(steps: tuple[tuple[str, int, str, str], ...]) -> bool:
    """Whether a chain's ``steps`` pass through a call the analysis cannot see."""
    return any(s[0].startswith(ASSUMED) for s in steps)


#: how many steps a chain keeps (recursive and very long chains stay bounded)
MAX_STEPS = 6

#: the most facts one value passed through a call may carry (``AnalysisBoundError``): far
#: above what real code gives, low enough that a file whose values outgrow it (dicts rebuilt
#: from each other's whole values, re-keying the same ids again and again) ends in seconds
MAX_VALUE_FACTS = 4096


class AnalysisBoundError(Exception):
    """A value passed through a call carries more than ``MAX_VALUE_FACTS`` facts: the
    analysis of that file would grow without a useful bound (minutes, gigabytes), so it is
    abandoned and the file reported as not analysed (PC000), like one that nests too deeply."""


#: ``Fact.param`` of the receiver (``self``) of a method, in summaries
SELF = -1

#: ``Fact.granularity`` of a TOOLS_UNSTABLE fact of one MCP server's tool list
#: (``session.list_tools()``, ``load_mcp_tools(session)``): in the order that server registers
#: its tools, the same in every session unless the server itself reorders, so not shown to
#: change (PC005 reports it only under ``--explain``). Joined with other servers' lists
#: (``joined_servers``) it is a fact of granularity "": the join follows the order the
#: servers are listed, connect or answer in
ONE_SERVER = "one server"
#: the start of the related note of a finding whose value is not shown to change between
#: sessions (one MCP server's own tool list): an unproven flow, as one through a call the
#: analysis cannot see (``runner.proven``)
NOT_SHOWN = "not shown to change:"


def made_within(fact: Fact, start: tuple[int, int], end: tuple[int, int], first_line: int) -> bool:
    """True when ``fact`` (a fact of the file being analysed, or one returned to it) was
    made between the positions ``start`` and ``end`` (line, column) of this file: born
    there, or passed on by a call on a line from ``first_line`` to ``end``'s
    (``load_one(server)`` returning a list it fetched; a step names a line, not a column,
    so ``first_line`` is the first line that lies wholly after ``start``)."""
    if not fact.path and start <= (fact.line, fact.col) <= end:
        return True
    return any(not path and first_line <= line <= end[0] for _, line, _, path in fact.via)


def joined_servers(facts: frozenset[Fact], inside: Callable[[Fact], bool]) -> frozenset[Fact]:
    """``facts`` with each fact of one MCP server's tool list (``ONE_SERVER``) for which
    ``inside`` holds made a fact of several servers' lists joined (granularity "")."""
    if not any(f.granularity == ONE_SERVER and inside(f) for f in facts):
        return facts
    return frozenset(
        f._with(granularity="") if f.granularity == ONE_SERVER and inside(f) else f for f in facts
    )


#: Kinds whose facts stop mattering when the value is computed once (at import or per session).
PINNABLE = frozenset({Kind.TIME, Kind.UNIQUE, Kind.VARIES, Kind.LOOP})

#: the granularity of a PARAM fact whose parameter the function writes once into a
#: conversation it starts and holds (``conversations.held_conversations``): what a caller
#: passes for it is computed once per conversation (``held_once``)
ONCE = "once"

#: the granularity of the UNIQUE fact of a list drawn by ``random.sample(pool, k)``: which
#: elements of the pool it holds, in which order, is new per call, but each element is one of
#: the pool's values, so an element taken in a loop holds only what the pool's elements hold;
#: text or a list that gathers them (a join, what the loop appends) keeps the fact
SAMPLED = "sampled"


def sampled(facts: frozenset[Fact]) -> frozenset[Fact]:
    """The facts of ``facts`` that mark the draw of a ``random.sample`` (``SAMPLED``)."""
    return frozenset(f for f in facts if f.kind is Kind.UNIQUE and f.granularity == SAMPLED)


#: ``Fact.when``: (a parameter's index, the truth it needs, the truth of its default), or ();
#: for a test of the parameter against a constant (``kind == 0``), that constant follows, and
#: the truths are those of the test (the default's: whether it equals the constant)
When = tuple[int, bool, int] | tuple[int, bool, int, int | str] | tuple[()]


@dataclass(frozen=True, init=False)
class Fact:
    """One reason a value is volatile, with the place it was born.

    ``line``/``col`` locate the birth (1-based line, 0-based column). ``detail`` is the source
    as written (``datetime.now()``). ``granularity`` is "subday" or "day" for TIME facts,
    "sorted" for a PARAM fact of a parameter that was sorted (its argument's order facts do not
    pass).
    ``pinned`` is true when the value was computed once (module level, ``__init__``, cached).
    ``param`` is the parameter index for PARAM facts (``SELF`` for the receiver of a method).
    ``fix`` carries what an autofix needs (a tuple of ints and strings, see the rule modules),
    ``site`` a second location (line, col), e.g. where a set was created when the fact marks the
    loop that iterates it. ``path`` is the file it was born in when that is not the file being
    linted ("" for the same file); ``via`` the steps that passed it on, innermost first, each
    a ``Step``: what happened (``"returned by Clock.now_text"``), the 1-based line of the call
    that did it, the name written there (``"now_text"``) and that line's file ("" for the file
    being linted; a step in another module keeps its file).
    """

    kind: Kind
    line: int
    col: int
    detail: str
    granularity: str = ""
    pinned: bool = False
    param: int = -1
    fix: tuple[int | str | bool, ...] = ()
    site: tuple[int, int] = (0, 0)
    path: str = ""
    via: tuple[Step, ...] = ()
    #: the role of the chat message the value was put in (``"user"``), when that role is a
    #: constant; "" when unknown. On a PARAM fact, ``"=system"`` says the parameter was read
    #: only where its message role is tested equal to ``"system"`` (see ``narrowed``)
    role: str = ""
    #: the constant keys under which a time or id (``KEYED_KINDS``) was stored into a dict,
    #: outermost first (``ctx["recipient"]["time"] = now`` gives ``("recipient", "time")``):
    #: a read of another constant key of that dict does not take it (``key_read``)
    key: tuple[str, ...] = ()
    #: a fact only one branch of a conditional expression on a parameter of the function
    #: makes (``fmt_a if include_hour else fmt_b``): (the parameter's index, the truth of the
    #: parameter that branch needs, the truth of its constant default: 1, 0, or -1 for no
    #: default); a caller whose argument (or the default it leaves) takes the other branch
    #: does not get it (``calls.call_bound``). ``()`` for every other fact
    when: When = ()
    #: every field but ``via``: what the fact is, whatever chain brought it (``canonical``)
    identity: tuple[object, ...] = field(init=False, repr=False, compare=False)
    #: the hash of ``identity``, and of every compared field, computed once (facts are hashed
    #: into sets often)
    _identity_hash: int = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        kind: Kind,
        line: int,
        col: int,
        detail: str,
        granularity: str = "",
        pinned: bool = False,
        param: int = -1,
        fix: tuple[int | str | bool, ...] = (),
        site: tuple[int, int] = (0, 0),
        path: str = "",
        via: tuple[Step, ...] = (),
        role: str = "",
        key: tuple[str, ...] = (),
        when: When = (),
    ) -> None:
        """The dataclass's constructor and ``__post_init__`` in one, writing the fields into
        the instance's dict (the generated one of a frozen dataclass calls
        ``object.__setattr__`` once per field; facts are made a few hundred thousand times in
        a large module's analysis)."""
        identity = (
            kind,
            line,
            col,
            detail,
            granularity,
            pinned,
            param,
            fix,
            site,
            path,
            role,
            key,
            when,
        )
        identity_hash = hash(identity)
        state = self.__dict__
        state["kind"] = kind
        state["line"] = line
        state["col"] = col
        state["detail"] = detail
        state["granularity"] = granularity
        state["pinned"] = pinned
        state["param"] = param
        state["fix"] = fix
        state["site"] = site
        state["path"] = path
        state["via"] = via
        state["role"] = role
        state["key"] = key
        state["when"] = when
        state["identity"] = identity
        state["_identity_hash"] = identity_hash
        state["_hash"] = hash((identity_hash, via))

    def __post_init__(self) -> None:
        identity = (
            self.kind,
            self.line,
            self.col,
            self.detail,
            self.granularity,
            self.pinned,
            self.param,
            self.fix,
            self.site,
            self.path,
            self.role,
            self.key,
            self.when,
        )
        identity_hash = hash(identity)
        object.__setattr__(self, "identity", identity)
        object.__setattr__(self, "_identity_hash", identity_hash)
        object.__setattr__(self, "_hash", hash((identity_hash, self.via)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        """The dataclass's ``__eq__`` (every compared field equal), cheaper: facts of unequal
        hashes differ (the hash is of those fields), and equal facts met again and again in
        set unions compare two tuples, not two tuples of thirteen fields built each time."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        if self._hash != other._hash:
            return False
        return bool(self.via == other.via and self.identity == other.identity)

    def _with(self, **changes: object) -> Fact:
        """``dataclasses.replace(self, **changes)`` without its per-call introspection (a
        fact is copied with a longer chain for every step it is passed on): `replace`."""
        return replace(self, **changes)

    def _with_via(self, via: tuple[Step, ...]) -> Fact:
        """``self._with(via=via)``: the identity (every field but ``via``) and its hash are
        the same, so only the whole fact's hash is computed again."""
        new = object.__new__(Fact)
        state = new.__dict__
        state.update(self.__dict__)
        state["via"] = via
        state["_hash"] = hash((self._identity_hash, via))
        state.pop("_proven", None)
        state.pop("_unseen", None)
        return new

    @property
    def rank(self) -> tuple[bool, int, tuple[tuple[str, int, str, str], ...]]:
        """How a chain compares with another chain of the same fact (smaller is kept): a
        proven chain first, then the shorter, then by its steps' (file, line, name, text)."""
        return (
            not self.proven,
            len(self.via),
            tuple((path, line, name, text) for text, line, name, path in self.via),
        )

    def passed_on(self, step: Step) -> Fact:
        """The same fact, carried one step further (``step``: ("returned by f", line, "f",
        "")); at most ``MAX_STEPS`` steps are kept, and a function already on the chain is not
        added again, so recursive chains stay bounded."""
        text = step[0]
        for s in self.via:  # a loop, not ``any``: about a million calls in a large module
            if s[0] == text:
                return self
        if len(self.via) >= MAX_STEPS:
            # keep the first steps, and an unproven step wherever it came
            if not step[0].startswith(ASSUMED) or any(s[0].startswith(ASSUMED) for s in self.via):
                return self
            return self._with_via((*self.via[: MAX_STEPS - 1], step))
        return self._with_via((*self.via, step))

    def pin(self) -> Fact:
        """The same fact, computed once (``pinned``)."""
        return self._with(pinned=True)

    @property
    def proven(self) -> bool:
        """False when the chain passes through a call whose code the analysis cannot see
        (a step "assumed to pass through ..."); computed once per fact (copies with another
        ``via`` drop it: ``_with_via``, ``replace``)."""
        known: bool | None = self.__dict__.get("_proven")
        if known is None:
            known = self.__dict__["_proven"] = not any(s[0].startswith(ASSUMED) for s in self.via)
        return known

    @property
    def volatile(self) -> bool:
        """True for a per-request TIME/UNIQUE/VARIES fact that was not pinned."""
        return self.kind in (Kind.TIME, Kind.UNIQUE, Kind.VARIES) and not self.pinned


#: fact sets ``canonical`` found holding one fact per identity hash (it returned them as they
#: are): the same sets are made canonical again and again (every ``Value`` built from them),
#: and looking one up hashes it in C, once per set object, where the test walks its facts in
#: Python. Emptied past ``_CANONICAL_KEPT`` sets and after each analysis (``forget_canonical``)
_CANONICAL: set[frozenset[Fact]] = set()
_CANONICAL_KEPT = 50_000


#: a fact's ``_identity_hash``, read in C (``canonical`` reads it of every fact of a set)
_IDENTITY_HASH = operator.attrgetter("_identity_hash")


def canonical(facts: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` with one fact per identity (``Fact.identity``: everything but the chain):
    the same origin reached along several paths keeps the chain of smallest ``Fact.rank``,
    whatever order the paths were met in, so fact sets stay as small as the origins they
    name and a chain, hence a finding, does not depend on the order sets are iterated in."""
    if len(facts) < 2 or facts in _CANONICAL:
        return facts
    # equal identities have equal hashes: without a repeated hash no identity repeats
    hashes = set(map(_IDENTITY_HASH, facts))
    if len(hashes) == len(facts):
        if len(_CANONICAL) >= _CANONICAL_KEPT:
            _CANONICAL.clear()
        _CANONICAL.add(facts)
        return facts
    return best_chains(facts)


def forget_canonical() -> None:
    """Let go of the fact sets ``canonical`` remembers (at the end of an analysis, so they
    do not outlive it)."""
    _CANONICAL.clear()


def best_chains(facts: Iterable[Fact]) -> frozenset[Fact]:
    """One fact per identity, the one of smallest ``Fact.rank`` (see ``canonical``)."""
    # keyed by the identity's hash, each bucket holding the best fact of each identity with
    # that hash (hashing the identity tuple itself again costs more than the whole search)
    best: dict[int, list[Fact]] = {}
    for f in facts:
        bucket = best.get(f._identity_hash)
        if bucket is None:
            best[f._identity_hash] = [f]
            continue
        for i, old in enumerate(bucket):
            if old.identity == f.identity:
                if old.via != f.via and _ranks_below(f, old):
                    bucket[i] = f
                break
        else:
            bucket.append(f)
    return frozenset(f for bucket in best.values() for f in bucket)


def _ranks_below(f: Fact, old: Fact) -> bool:
    """``f.rank < old.rank``, building the step tuples only when the first keys tie."""
    proven = f.proven
    if proven != old.proven:
        return proven
    if len(f.via) != len(old.via):
        return len(f.via) < len(old.via)
    return f.rank < old.rank


#: the empty fact set, ``Value``'s default
_NO_FACTS: frozenset[Fact] = frozenset()


class Shape(enum.Enum):
    """What kind of object a value is, as far as the linter can tell."""

    UNKNOWN = "unknown"
    STR = "str"
    NUM = "num"
    DICT = "dict"
    SET = "set"  # iterating it gives an unstable order
    UNORDERED_LIST = "unordered list"  # os.listdir(), glob.glob(): a list in filesystem order
    LIST = "list"
    DATETIME = "datetime"
    DATE = "date"
    OBJECT = "object"  # instance of a same-module class with the default repr (has 0x address)
    RNG = "rng"  # an unseeded random.Random()
    BUILDER = "builder"  # promptcache.PromptBuilder
    FUNC = "function"  # a nested function; ``const`` holds its summary key
    TOOL_RESULT = "tool result"  # what MCP list_tools() returns (has .tools)


@dataclass(frozen=True, init=False)
class Value:
    """What the linter knows about one expression's value.

    ``const``: the string value when statically known. ``elem_str``: the elements of this
    collection are strings or paths (so ``sorted()`` is safe). ``name_key``: how to read a tool's
    name from an element ("attr" for ``tool.name``, "item" for ``tool["name"]``). ``ref``: what
    the value is when the shape says (a class, a callable, where a set was made). ``elts``: the
    values of a tuple's elements, or of a list's first elements, when known, so that facts do
    not spread across them; ``more``: a list may hold further elements after those (appended
    in a loop or under a condition), so only its first ``len(elts)`` indexes are known.
    ``items``: the values under the constant string keys of a dict literal (all of its keys),
    so that a ``**payload`` splat into a sink can map them onto keyword arguments. ``elem``:
    every element of a list, merged, when each is a dict of known keys or an object of known
    fields (chat messages with extra keys, results built with keyword fields), so that what
    a callee reads at one key of each element takes only what was put under that key.
    """

    facts: frozenset[Fact] = frozenset()
    shape: Shape = Shape.UNKNOWN
    const: str | None = None
    elem_str: bool = False
    name_key: str = ""
    ref: object = None
    elts: tuple[Value, ...] | None = None
    items: tuple[tuple[str, Value], ...] | None = None
    more: bool = False
    elem: Value | None = None

    def __init__(
        self,
        facts: frozenset[Fact] = _NO_FACTS,
        shape: Shape = Shape.UNKNOWN,
        const: str | None = None,
        elem_str: bool = False,
        name_key: str = "",
        ref: object = None,
        elts: tuple[Value, ...] | None = None,
        items: tuple[tuple[str, Value], ...] | None = None,
        more: bool = False,
        elem: Value | None = None,
    ) -> None:
        """The dataclass's constructor and ``__post_init__`` in one, writing the fields into
        the instance's dict (the generated one of a frozen dataclass calls
        ``object.__setattr__`` once per field; a large module's analysis makes about a million
        values)."""
        state = self.__dict__
        state["facts"] = canonical(facts) if len(facts) > 1 else facts
        state["shape"] = shape
        state["const"] = const
        state["elem_str"] = elem_str
        state["name_key"] = name_key
        state["ref"] = ref
        state["elts"] = elts
        state["items"] = items
        state["more"] = more
        state["elem"] = elem

    def __post_init__(self) -> None:
        if len(self.facts) > 1:
            object.__setattr__(self, "facts", canonical(self.facts))

    def __eq__(self, other: object) -> bool:
        """The dataclass's ``__eq__`` (the fields compared in order, as tuples compare them:
        the same object, or equal), without building two tuples of ten fields each."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        for name in _VALUE_FIELDS:
            a, b = mine[name], theirs[name]
            if a is not b and not a == b:
                return False
        return True

    def with_facts(self, facts: frozenset[Fact]) -> Value:
        return replace(self, facts=facts)

    def having(self, shape: Shape, **kwargs: object) -> Value:
        return Value(self.facts, shape, **kwargs)  # type: ignore[arg-type]

    def kinds(self) -> set[Kind]:
        return {f.kind for f in self.facts}

    def without(self, *kinds: Kind) -> Value:
        if not self.facts:
            return self
        return replace(self, facts=frozenset(f for f in self.facts if f.kind not in kinds))

    def ordered(self) -> Value:
        """The value after sorting: no order facts; a parameter's fact is marked ``sorted``
        (``Fact.granularity``), so that what a caller passes in loses its order facts too, and
        the fact of a parameter's order alone (granularity "order") goes with them."""
        if not self.facts:
            return self
        return replace(
            self,
            facts=frozenset(
                (replace(f, granularity="sorted") if f.kind is Kind.PARAM else f)
                for f in self.facts
                if f.kind not in (Kind.UNORDERED, Kind.TOOLS_UNSTABLE)
                and not (f.kind is Kind.PARAM and f.granularity == "order")
            ),
        )

    def pinned(self) -> Value:
        """The value as computed once: per-request facts become pinned."""
        if not self.facts or all(f.pinned or f.kind not in PINNABLE for f in self.facts):
            return self
        return replace(
            self,
            facts=frozenset(
                replace(f, pinned=True) if f.kind in PINNABLE else f for f in self.facts
            ),
            items=tuple((k, v.pinned()) for k, v in self.items) if self.items else self.items,
            elem=self.elem.pinned() if self.elem is not None else None,
        )

    @property
    def dynamic(self) -> bool:
        """Varies per call: depends on a parameter, a loop variable or a volatile source (the
        receiver ``self`` alone does not count)."""
        return any(
            f.volatile or f.kind is Kind.LOOP or (f.kind is Kind.PARAM and f.param != SELF)
            for f in self.facts
        )


#: ``Value``'s fields, in the order its ``__eq__`` compares them
_VALUE_FIELDS = tuple(f.name for f in dataclasses.fields(Value))


def replace(obj: _T, /, **changes: Any) -> _T:
    """``dataclasses.replace(obj, **changes)``; for a ``Fact`` or a ``Value`` (copied with one
    field changed hundreds of thousands of times in a large module's analysis) without its
    per-call introspection of the fields: the new object takes ``obj``'s fields, then
    ``changes``, then runs ``__post_init__`` as a constructed one does. ``changes`` must name
    fields of ``obj`` that its constructor takes."""
    cls = obj.__class__
    if cls is not Fact and cls is not Value:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    new = object.__new__(cls)
    state = new.__dict__
    state.update(obj.__dict__)
    state.update(changes)
    if "via" in changes:
        state.pop("_proven", None)
        state.pop("_unseen", None)
    if cls is Value and "facts" not in changes:
        # the facts are ``obj``'s, already made canonical when it was built
        return new
    new.__post_init__()  # type: ignore[attr-defined]
    return new


CLEAN = Value()
STR = Value(shape=Shape.STR)
#: the marks that end the ``ref`` of a set whose order is the same in every process: a set
#: literal of numbers only or of one element (``exprs._stable_order``), and what keeps its
#: order (a copy, an intersection with it, a union of sets of numbers)
STABLE_SETS = (("numbers",), ("one element",))


def stable_set(value: Value) -> bool:
    """True when ``value`` is a set whose iteration order is the same in every process (its
    ``ref`` ends with one of ``STABLE_SETS``)."""
    return (
        value.shape is Shape.SET and isinstance(value.ref, tuple) and value.ref[3:] in STABLE_SETS
    )


def join(*values: Value) -> Value:
    """Union of facts; the shape and constant are lost unless only one value is given."""
    if len(values) == 1:
        return values[0]
    facts: frozenset[Fact] = frozenset()
    for v in values:
        if v.facts:
            facts = facts | v.facts
    return Value(facts)


#: the start of the detail of the fact an ``if`` on a per-request value gives what it stores
CHOSEN_BY_IF = "chosen by the `if` at line"


def keyed_conditions(facts: frozenset[Fact], key: str) -> frozenset[Fact]:
    """``facts`` of an ``if`` around a store ``d[key] = ...`` of a constant ``key``: each
    such fact (``CHOSEN_BY_IF``) names the key (``fix == ("key", key)``), so a read of another
    constant key of ``d`` leaves it out (``other_keys_dropped``); the whole dict keeps it."""
    return frozenset(
        replace(f, fix=("key", key))
        if f.kind is Kind.VARIES and not f.fix and f.detail.startswith(CHOSEN_BY_IF)
        else f
        for f in facts
    )


#: the kinds of fact a store under a constant key of a dict tags with that key (``keyed``)
KEYED_KINDS = frozenset({Kind.TIME, Kind.UNIQUE})


#: what a constant key of a dict display with a ``**splat`` keeps as its own (``expr_Dict``):
#: a time, an id, and a JSON text dumped without sorted keys
SPLAT_KEYED_KINDS = KEYED_KINDS | {Kind.JSON_UNSORTED}


def keyed(
    facts: frozenset[Fact], path: tuple[str, ...], kinds: frozenset[Kind] = KEYED_KINDS
) -> frozenset[Fact]:
    """``facts`` stored into a dict under the constant keys ``path`` (outermost first): each
    fact of ``kinds`` (a time or an id unless told) gains them in front of the keys it was
    under already, so a read of another constant key of that dict leaves it out
    (``key_read``)."""
    if not path or not any(f.kind in kinds for f in facts):
        return facts
    return frozenset(replace(f, key=(*path, *f.key)) if f.kind in kinds else f for f in facts)


#: the key a store under a computed key puts in a fact's ``key`` (``entities[eid]["hp"] = roll``
#: keys the roll ``(ANY_KEY, "hp")``): any entry of that dict may hold it, under the keys after
ANY_KEY = "[*]"


def key_read(facts: frozenset[Fact], key: str) -> frozenset[Fact]:
    """``facts`` of a dict read at the constant ``key``: a fact stored under another constant
    key (``keyed``) is left out, one stored under this key or under a computed one
    (``ANY_KEY``) loses it (it is what the entry holds, under the keys after it); a fact of no
    key (the whole dict's), or of an object's field (``field_keyed``: not an entry of a dict),
    stays."""
    if not any(f.key and not f.key[0].startswith(".") for f in facts):
        return facts
    return frozenset(
        f if not f.key or f.key[0].startswith(".") else replace(f, key=f.key[1:])
        for f in facts
        if not f.key or f.key[0].startswith(".") or f.key[0] in (key, ANY_KEY)
    )


def any_key_read(facts: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` of a dict read at a computed key (``entities.get(eid)``): a fact stored under
    a computed key (``ANY_KEY``, ``entities[eid]["hp"] = roll``) loses it, as the entry read
    may be the one that holds it, so what the entry holds under its own constant key stays
    that key's (``entities.get(eid).get("name")`` does not take the rolled "hp"). A fact stored
    under a constant key keeps it: an entry copied by a computed key (``out[k] = src[k]``)
    keeps the key it was under."""
    if not any(f.key[:1] == (ANY_KEY,) for f in facts):
        return facts
    return frozenset(replace(f, key=f.key[1:]) if f.key[:1] == (ANY_KEY,) else f for f in facts)


def field_keyed(facts: frozenset[Fact], name: str) -> frozenset[Fact]:
    """``facts`` of what an object's field ``name`` holds, as facts of the whole object: each
    time or id is marked as that field's (the key ``.name``), so a read of another field of
    the object, where its fields are no longer known one by one (``field_read``), leaves it
    out, while the object itself (shown whole, turned into text) keeps it."""
    return keyed(facts, (f".{name}",))


def field_read(facts: frozenset[Fact], name: str) -> frozenset[Fact]:
    """``facts`` of an object whose fields are not known, read at its field ``name``: a fact
    marked as another field's (``field_keyed``) is left out, one marked as this field's loses
    the mark; every other fact stays."""
    if not any(k.startswith(".") for f in facts for k in f.key):
        return facts
    own = f".{name}"
    out = set()
    for f in facts:
        # constant dict keys before the first field mark were left by a read at a computed
        # key (``self._entries.get(name)`` of an entry stored under "main"): the object read
        # is that entry, so its field mark decides
        at = next((i for i, k in enumerate(f.key) if k.startswith(".")), -1)
        if at < 0:
            out.add(f)
        elif f.key[at] == own:
            out.add(replace(f, key=f.key[at + 1 :]))
    return frozenset(out)


def fields_read(facts: frozenset[Fact], names: Iterable[str]) -> frozenset[Fact]:
    """``facts`` of an object whose fields are not known, read along the fields ``names``
    (``entry.versions[-1].content``, a summary's path ``versions.content``): a fact marked as
    a field's (``field_keyed``) that is none of them is left out, one marked as one of them
    loses the mark. A mark is not nested under the field of the object that holds it (an
    object kept in another's field keeps its own marks), so any field on the path counts."""
    if not any(f.key and f.key[0].startswith(".") for f in facts):
        return facts
    read = {f".{name}" for name in names}
    return frozenset(
        replace(f, key=f.key[1:]) if f.key[:1] and f.key[0] in read else f
        for f in facts
        if not (f.key and f.key[0].startswith(".") and f.key[0] not in read)
    )


def into_fields(
    items: tuple[tuple[str, Value], ...], facts: frozenset[Fact]
) -> tuple[tuple[str, Value], ...]:
    """The fields ``items`` of an object whose fields are known, once ``facts`` are stored
    into it: each fact marked as one field's (``field_keyed``: a helper's ``member.since =
    now`` on the object it was given) goes into that field, without the mark; the others
    stay the whole object's, as before."""
    fields = dict(items)
    changed = False
    for f in facts:
        if f.key and f.key[0].startswith("."):
            name = f.key[0][1:]
            held = fields.get(name, CLEAN)
            fields[name] = held.with_facts(held.facts | {replace(f, key=f.key[1:])})
            changed = True
    return tuple(sorted(fields.items())) if changed else items


def unfielded(facts: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` of an object made into text (``str()``, an f-string): the marks of the fields
    they were in (``field_keyed``) go, as the text has no fields."""
    if not any(f.key and f.key[0].startswith(".") for f in facts):
        return facts
    return frozenset(
        replace(f, key=f.key[1:]) if f.key and f.key[0].startswith(".") else f for f in facts
    )


def other_keys_dropped(facts: frozenset[Fact], key: str) -> frozenset[Fact]:
    """``facts`` of a dict read at the constant ``key``, less the facts of an ``if`` that
    stored only another constant key (``keyed_conditions``): that ``if`` chose what the other
    key holds, not this one's value."""
    facts = key_read(facts, key)
    if not any(f.kind is Kind.VARIES and f.fix[:1] == ("key",) for f in facts):
        return facts
    return frozenset(
        f
        for f in facts
        if not (f.kind is Kind.VARIES and f.fix[:1] == ("key",) and f.fix != ("key", key))
    )


def concat(*values: Value) -> Value:
    """The value of string concatenation: union of facts, constant when every part is."""
    facts: frozenset[Fact] = frozenset()
    parts: list[str] | None = []
    for v in values:
        if v.facts:
            facts = facts | v.facts
        if parts is not None:
            if v.const is None:
                parts = None
            else:
                parts.append(v.const)
    return Value(facts, Shape.STR, "".join(parts) if parts is not None else None)


def param_entry(
    facts: frozenset[Fact],
    key: str | int,
    func_key: int,
    attribute: bool = False,
    line: int | None = None,
) -> frozenset[Fact]:
    """``facts`` read at ``[key]`` (or, with ``attribute``, at ``.key``): a PARAM fact of one
    of the function's own parameters (``func_key``: its ``fix``) becomes the PARAM fact of
    that entry (detail ``page['body']`` or ``data.instructions``), so a summary says which
    entry or field of an argument it returns or sends to a sink. A PARAM fact already of an
    entry, or of the receiver, is kept (what a function returns or stores names one level:
    ``param_path`` goes deeper, for sinks only). Given the ``line`` of the read, such a fact
    read one level deeper (``resolved.snapshot`` read at ``.session_id``) gains an unproven
    step: the caller will pass all that ``resolved.snapshot`` holds, its other fields too (a
    time stamped beside the text read), so a finding made of it is an unproven flow. An
    ``int`` key is a position (``messages[0]``): the element there, read below as the whole
    parameter is (``messages[0]['content']``)."""
    if not any(f.kind is Kind.PARAM for f in facts):
        return facts
    suffix = f".{key}" if attribute else f"[{key!r}]"
    out = set()
    for f in facts:
        if f.kind is Kind.PARAM and f.param >= 0 and f.fix == (func_key,):
            if method_result(f.detail) is not None:
                # an entry or field of what the method returns: that result still, not the
                # field of the same name of the parameter (``resp.text`` of
                # ``resp = provider.generate()`` is no ``provider.text``)
                out.add(f)
                continue
            deeper = line is not None and not attribute and _one_field(f.detail)
            if f.detail.isidentifier() or positional(f.detail) or deeper:
                f = replace(f, detail=f"{f.detail}{suffix}")
            elif line is not None:
                f = f.passed_on(
                    (f"{ASSUMED} {f.detail}{suffix}, read below {f.detail}", line, f.detail, "")
                )
        out.add(f)
    return frozenset(out)


#: how many keys and fields, one after another, the PARAM fact of what reaches a sink may name
#: (``variant.agent.builder``); a deeper one keeps the path so far
MAX_ENTRY_DEPTH = 3


def param_path(facts: frozenset[Fact], suffix: str, func_key: int) -> frozenset[Fact]:
    """``facts`` read at ``suffix`` (``['agent'].builder``, see ``entry_suffix``) on their way
    to a sink: a PARAM fact of one of the function's own parameters, whole or already one
    entry or field of it (``variant.agent``), names the longer path
    (``variant.agent.builder``), at most ``MAX_ENTRY_DEPTH`` keys and fields deep (the first
    of ``suffix``'s that fit), so a caller passes only what it holds there; a PARAM fact of
    the receiver, or one that names that many already, is kept. Only what a summary records
    as reaching a sink goes deeper than one level: a function's return value names one
    (``param_entry``), as a value read at many paths would otherwise carry one fact per
    path."""
    texts = [m.group(0) for m in _STEPS.finditer(suffix)]
    if not texts or not any(f.kind is Kind.PARAM for f in facts):
        return facts
    out = set()
    for f in facts:
        if f.kind is Kind.PARAM and f.param >= 0 and f.fix == (func_key,):
            if method_result(f.detail) is not None:
                # what the method returns, read at ``suffix``: that result still
                out.add(f)
                continue
            depth = 0 if f.detail.isidentifier() else len(entry_path(f.detail) or ())
            room = MAX_ENTRY_DEPTH - depth
            if (depth or f.detail.isidentifier()) and room > 0:
                f = replace(f, detail=f.detail + "".join(texts[:room]))
        out.add(f)
    return frozenset(out)


_STEP = r"\[(?:'[^']*'|\"[^\"]*\"|\d+)\]|\.\w+"
_ENTRY = re.compile(rf"^(\w+)((?:{_STEP})+)$")
_STEPS = re.compile(r"\[(?P<key>'[^']*'|\"[^\"]*\")\]|\[(?P<index>\d+)\]|\.(?P<attr>\w+)")
_POSITIONS = re.compile(r"^\w+(?:\[\d+\])+$")


@functools.lru_cache(maxsize=4096)
def entry_path(detail: str) -> tuple[tuple[str | int, bool], ...] | None:
    """Each (key, is an attribute) of the PARAM fact of an entry or field of a parameter,
    outermost first (``variant['agent'].llm`` -> (("agent", False), ("llm", True))), None for
    a whole parameter. The name before it may be a parameter index (``0['body']``). A key
    that is an ``int`` is a position in a list (``messages[0]['content']`` -> ((0, False),
    ("content", False))): the element at that index, not every element."""
    match = _ENTRY.match(detail)
    if match is None:
        return None
    return tuple(
        (step["attr"], True)
        if step["attr"] is not None
        else (int(step["index"]), False)
        if step["index"] is not None
        else (str(ast.literal_eval(step["key"])), False)
        for step in _STEPS.finditer(match[2])
    )


#: the PARAM detail of what a method of a parameter whose class is not known returns
#: (``sheet.inventory_list()``, see ``CallsMixin.called_on_param``)
_METHOD_RESULT = re.compile(r"^(\w+)\.(\w+)\(\)$")


def method_result(detail: str) -> tuple[str, str] | None:
    """(the parameter, the method) of the PARAM detail of what a method of that parameter
    returns (``sheet.inventory_list()``), None for any other detail. Read below (an entry or
    field of the result) it names that result still; a caller whose argument is an object of
    a project class whose fields are known passes what that class's method returns of them,
    a caller whose argument's class is not known all it holds, through a call the analysis
    cannot see (``CallsMixin.method_result_of``)."""
    match = _METHOD_RESULT.match(detail)
    return (match[1], match[2]) if match is not None else None


def positional(detail: str) -> bool:
    """Whether ``detail`` names an element of a parameter by position alone
    (``messages[0]``, ``rows[0][1]``): read below, it names the entry or field read there, as
    the whole parameter would (``param_entry``)."""
    return _POSITIONS.match(detail) is not None


def _one_field(detail: str) -> bool:
    """Whether ``detail`` names one field of a parameter (``tool.parameters``): a key read
    below it (``tool.parameters['properties']``) names that key too, so a caller that built
    the object and the dict in that field passes only what it put under that key."""
    path = entry_path(detail)
    return path is not None and len(path) == 1 and path[0][1]


def keyed_field(detail: str) -> bool:
    """Whether ``detail`` names a key of one field of a parameter
    (``tool.parameters['properties']``, see ``_one_field``)."""
    path = entry_path(detail)
    return path is not None and len(path) == 2 and path[0][1] and not path[1][1]


def entry_key(detail: str) -> tuple[str | int, bool] | None:
    """(key, is an attribute) of the first entry or field a parameter's PARAM fact names
    (``page['body']`` -> ("body", False), ``data.instructions`` -> ("instructions", True)),
    None for a whole parameter."""
    path = entry_path(detail)
    return path[0] if path else None


def entry_suffix(detail: str) -> str:
    """The part of an entry's PARAM detail after the parameter's name (``['body']``,
    ``.agent.llm``)."""
    match = _ENTRY.match(detail)
    return match[2] if match is not None else ""


#: message roles that a constant ``role`` of a chat message can name (OpenAI, Anthropic,
#: Gemini's ``model``, tool results)
MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "model", "tool", "function"})


def wrapped(value: Value, role: str) -> Value:
    """``value`` put into a chat message whose role is the constant ``role``: every fact, in
    its entries and elements too, is marked with that role (an inner message's role is
    replaced by the outer one's)."""

    def mark(facts: frozenset[Fact]) -> frozenset[Fact]:
        return frozenset(f if f.role == role else replace(f, role=role) for f in facts)

    return map_facts(value, mark)


def narrowed(value: Value, role: str) -> Value:
    """``value`` where a test says its message role equals the constant ``role`` (or one of
    the roles ``role`` joins by commas, ``"developer,system"``): facts marked with another
    role are dropped; facts of unknown role are kept; a parameter's fact is marked
    ``"=<role>"``, so that a caller passes only the facts of its argument that may be in a
    message of that role (``Fact.role``)."""
    roles = frozenset(role.split(","))

    def keep(facts: frozenset[Fact]) -> frozenset[Fact]:
        out = set()
        for f in facts:
            if f.kind is Kind.PARAM and (not f.role or f.role.startswith("=")):
                out.add(replace(f, role=f"={role}"))
            elif not f.role or f.role in roles:
                out.add(f)
        return frozenset(out)

    return map_facts(value, keep)


def passed_role(given: frozenset[Fact], role: str) -> frozenset[Fact]:
    """What a caller's argument facts ``given`` become where the callee's parameter fact has
    ``role`` (``Fact.role``): narrowed (``"=system"``), wrapped (``"user"``) or unchanged."""
    if not role or not given:
        return given
    if role.startswith("="):
        return narrowed(Value(given), role[1:]).facts
    return wrapped(Value(given), role).facts


def held_once(facts: frozenset[Fact]) -> frozenset[Fact]:
    """``facts`` as written once into a conversation that the function holds for all its
    requests: per-request facts pinned (``Value.pinned``), and each parameter's whole fact
    marked ``ONCE``, so that what a caller passes for it is pinned too (``calls.with_grain``)."""
    out = set()
    for f in facts:
        if f.kind is Kind.PARAM and f.granularity == "":
            out.add(replace(f, granularity=ONCE))
        elif f.kind in PINNABLE and not f.pinned:
            out.add(replace(f, pinned=True))
        else:
            out.add(f)
    return frozenset(out)


def map_facts(value: Value, change: Callable[[frozenset[Fact]], frozenset[Fact]]) -> Value:
    """``value`` with ``change`` applied to its facts and to those of its elements and
    entries (``Value.elts``, ``Value.items``)."""
    elts = tuple(map_facts(v, change) for v in value.elts) if value.elts is not None else None
    items = (
        tuple((k, map_facts(v, change)) for k, v in value.items)
        if value.items is not None
        else None
    )
    elem = map_facts(value.elem, change) if value.elem is not None else None
    if not value.facts and elts is None and items is None and elem is None:
        return value
    return replace(value, facts=change(value.facts), elts=elts, items=items, elem=elem)


def branch_only(branch: Value, other: Value, when: When) -> Value:
    """``branch`` with each fact that ``other`` lacks (a parameter's excepted) marked as
    made only where the parameter has the truth ``when`` names (``Fact.when``)."""
    only = [f for f in branch.facts - other.facts if f.kind is not Kind.PARAM and not f.when]
    if not only:
        return branch
    return branch.with_facts((branch.facts - set(only)) | {replace(f, when=when) for f in only})


def other_branch(when: When) -> When:
    """The condition of the other branch of the ``if`` that needs ``when``."""
    if not when:
        return when
    index, needed, *rest = when
    return (index, not needed, *rest)


def branches_only(body: Value, orelse: Value, when: When) -> tuple[Value, Value]:
    """The values of one name after the two branches of an ``if`` on a parameter (``when``:
    what the body needs), each with what it alone holds marked with its branch's condition
    (``branch_only``), as for a conditional expression on that parameter."""
    return (
        branch_only(body, orelse, when),
        branch_only(orelse, body, other_branch(when)),
    )


def branch_marked(
    returns: list[tuple[ast.expr, Value]], conditions: Mapping[int, tuple[When, ...]]
) -> list[tuple[ast.expr, Value]]:
    """``returns`` (a summary's, in order) with each fact made only under one condition on a
    parameter marked with it (``Fact.when``): a fact that every return holding it holds under
    that condition (``conditions``: the index of each return run inside ``if`` branches on a
    parameter -> their conditions, innermost last). A parameter's facts, and facts marked
    already (by a conditional expression), stay as they are."""
    common: dict[tuple[object, ...], list[When]] = {}
    for index, (_node, value) in enumerate(returns):
        held = conditions.get(index, ())
        for fact in value.facts:
            if fact.kind is Kind.PARAM or fact.when:
                continue
            known = common.get(fact.identity)
            common[fact.identity] = list(held) if known is None else [c for c in known if c in held]
    marks = {identity: found[-1] for identity, found in common.items() if found}
    if not marks:
        return returns
    out = []
    for node, value in returns:
        facts = frozenset(
            replace(f, when=marks[f.identity]) if f.identity in marks and not f.when else f
            for f in value.facts
        )
        out.append((node, value if facts == value.facts else value.with_facts(facts)))
    return out
